"""The capacity sweep's plan and its reading: how much one pod carries at the latency SLO,
measured before any user's request reaches it (issue: capacity measured, not projected). Pure.

A sweep is a staircase of closed-loop load at rising concurrency (each stair: ``concurrency``
clients, each sending its next request when the last is answered), as SageMaker Inference
Recommender's load test raises its users and NVIDIA's AIPerf and ``vllm bench serve`` sweep
theirs:

- the concurrency doubles from ``start`` while every stair meets the SLO and the goodput (the
  successful requests per second) still grows;
- a stair that breaks the SLO (a latency percentile above its limit: ``slo``; the error ratio
  above its limit beyond chance, :data:`ERROR_ALPHA`: ``errors``) ends the doubling, and the
  concurrency is then bisected between the last stair within the SLO and the first beyond
  it, while the two lie more than :data:`RESOLUTION` apart (a knee found to within an eighth);
  unless the broken stair's goodput is within :data:`FLAT_GAIN` of the best below it: the pod
  is saturated there and no stair in between can carry more, so the sweep ends at once (still
  ``slo`` or ``errors``: the limit it broke);
- a doubling that adds less than :data:`FLAT_GAIN` to the best goodput so far ends it too:
  ``flat``, as Inference Recommender's ``FlatInvocations`` stops when invocations stop rising;
- the sweep's time (``maxDuration``) or its concurrency bound ends it: ``maxDuration``,
  ``maxConcurrency``.

The pod's capacity is the best goodput of a stair within the SLO, per pod (``rpsPerPod``): what
one pod answers per second without breaking the SLO.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from acceltrial.engine.economics import Comparison
from acceltrial.engine.evidence import error_ratio_p_value

StopReason = Literal["slo", "errors", "flat", "maxDuration", "maxConcurrency"]
FLAT_GAIN = 0.1
"""A doubling that raises the best goodput by less than this share is flat."""
ERROR_ALPHA = 0.05
"""A stair breaks ``slo.errorRatio`` only when its errors are beyond chance at this level."""
RESOLUTION = 1 / 8
"""Bisection ends once the last good and first broken concurrency are this close (relative)."""


@dataclass(frozen=True)
class Slo:
    """Limits a stair must meet: latency percentiles in seconds, the error ratio 0..1."""

    latency_p99: float | None = None
    ttft_p99: float | None = None
    itl_p99: float | None = None
    error_ratio: float | None = None


@dataclass(frozen=True)
class Stair:
    """One stair of the sweep as the load generator measured it: the requests that finished in
    its measured span (``seconds``), and their latencies."""

    concurrency: int
    seconds: float
    succeeded: int
    failed: int
    generated_tokens: float = 0.0
    latency_p50: float | None = None
    latency_p99: float | None = None
    ttft_p99: float | None = None
    itl_p99: float | None = None
    began: float | None = None
    """When its measured span began (seconds since the epoch): to read the pods' utilization
    over it."""
    throughput: float | None = None
    """Requests per second the clients asked in the measured span (their number over the mean
    of each request's latency plus its client's time before it), failed ones included; None:
    the answers counted over ``seconds`` stand."""

    @property
    def ended(self) -> float | None:
        return None if self.began is None else self.began + self.seconds

    @property
    def goodput(self) -> float:
        """Successful requests per second."""
        finished = self.succeeded + self.failed
        if self.throughput is not None and finished:
            return self.throughput * self.succeeded / finished
        return self.succeeded / self.seconds if self.seconds > 0 else 0.0

    @property
    def tokens_per_second(self) -> float:
        if not self.succeeded:
            return 0.0
        return self.goodput * self.generated_tokens / self.succeeded

    @property
    def error_ratio(self) -> float | None:
        total = self.succeeded + self.failed
        return self.failed / total if total else None


@dataclass(frozen=True)
class Bounds:
    """How the sweep starts and how far it may go."""

    start: int = 1
    max_concurrency: int = 256
    stair_seconds: float = 10.0
    max_seconds: float = 300.0


@dataclass(frozen=True)
class Next:
    """The next stair's concurrency, or why the sweep stops (``concurrency`` None)."""

    concurrency: int | None
    stopped_because: StopReason | None = None
    why: str = ""


def breach(stair: Stair, slo: Slo) -> tuple[StopReason, str] | None:
    """How ``stair`` breaks ``slo`` (errors first: a failed request has no latency), or None."""
    ratio = stair.error_ratio
    if ratio is None:
        return "errors", f"no request finished at concurrency {stair.concurrency}"
    if stair.succeeded == 0:
        return "errors", f"every request failed at concurrency {stair.concurrency}"
    total = stair.succeeded + stair.failed
    limit = slo.error_ratio
    # Beyond chance only: one failure among a low stair's dozen requests reads 8% against a 1%
    # limit from a server that fails one in a thousand (the exact one-sided binomial test).
    if (
        limit is not None
        and ratio > limit
        and error_ratio_p_value(stair.failed, total, limit) < (ERROR_ALPHA)
    ):
        return "errors", (
            f"error ratio {ratio:.3g} above {limit:g} at concurrency {stair.concurrency} "
            f"({stair.failed} of {total} requests)"
        )
    for name, value, limit in (
        ("latency p99", stair.latency_p99, slo.latency_p99),
        ("TTFT p99", stair.ttft_p99, slo.ttft_p99),
        ("ITL p99", stair.itl_p99, slo.itl_p99),
    ):
        if limit is not None and value is not None and value > limit:
            return "slo", (
                f"{name} {value:.3g} s above {limit:g} s at concurrency {stair.concurrency}"
            )
    return None


def next_stair(stairs: Sequence[Stair], slo: Slo, bounds: Bounds, elapsed: float) -> Next:
    """Where the sweep goes after ``stairs`` (in the order run), ``elapsed`` seconds in."""
    if not stairs:
        return Next(max(1, min(bounds.start, bounds.max_concurrency)))
    if elapsed + bounds.stair_seconds > bounds.max_seconds:
        return Next(None, "maxDuration", f"the next stair would pass {bounds.max_seconds:g} s")
    broken = [(stair, why) for stair in stairs if (why := breach(stair, slo)) is not None]
    if broken:
        return _bisected(stairs, slo, broken)
    last = stairs[-1]
    earlier = [stair.goodput for stair in stairs[:-1]]
    if earlier and last.goodput < max(earlier) * (1 + FLAT_GAIN):
        best = max(earlier)
        return Next(None, "flat", (
            f"{last.goodput:.3g} requests/s at concurrency {last.concurrency}, less than "
            f"{FLAT_GAIN:.0%} above {best:.3g}"
        ))  # fmt: skip
    if last.concurrency >= bounds.max_concurrency:
        return Next(None, "maxConcurrency", f"concurrency {bounds.max_concurrency} reached")
    return Next(min(2 * last.concurrency, bounds.max_concurrency))


def _bisected(
    stairs: Sequence[Stair], slo: Slo, broken: Sequence[tuple[Stair, tuple[StopReason, str]]]
) -> Next:
    first, (reason, why) = min(broken, key=lambda pair: pair[0].concurrency)
    below = [s for s in stairs if s.concurrency < first.concurrency and breach(s, slo) is None]
    best = max((s.goodput for s in below), default=0.0)
    if best > 0 and abs(first.goodput - best) <= best * FLAT_GAIN:
        # The same goodput at a higher concurrency: the pod is saturated, and a stair in
        # between can add no more (a server whose goodput collapses is bisected still).
        return Next(None, reason, (
            f"{why}; its {first.goodput:.3g} requests/s are within {FLAT_GAIN:.0%} of the "
            f"{best:.3g} below it: the pod is saturated, no stair in between carries more"
        ))  # fmt: skip
    good = [s.concurrency for s in below]
    low = max(good, default=0)
    if first.concurrency - low <= max(1.0, low * RESOLUTION):
        return Next(None, reason, why)
    return Next(low + max(1, math.floor((first.concurrency - low) / 2)))


def best_stair(stairs: Sequence[Stair], slo: Slo) -> Stair | None:
    """The stair within the SLO with the highest goodput; None when none met it."""
    within = [stair for stair in stairs if breach(stair, slo) is None]
    return max(within, key=lambda stair: stair.goodput, default=None)


@dataclass(frozen=True)
class SweepShape:
    """The requests a sweep sent: mean prompt and generated tokens, and where they came from
    (``spec`` or the ``baseline``'s token histograms)."""

    prompt_tokens: int
    generated_tokens: int
    source: Literal["spec", "baseline"]
    baseline_requests: int | None = None
    """How many of the baseline's requests the means rest on (``baseline`` only)."""


@dataclass(frozen=True)
class SweepOutcome:
    """A finished sweep of one variant's pods, or why it could not run (``problem``)."""

    stairs: tuple[Stair, ...] = ()
    stopped_because: StopReason = "errors"
    why: str = ""
    pods: int = 1
    seconds: float = 0.0
    problem: str | None = None
    """The sweep could not measure: its target unreachable, nothing answered."""
    cost: Comparison | None = None
    """Both variants' costs at the measured capacities (the baseline's replica's, or else its
    production operating point), when cost criteria ask (added by the world once the sweeps
    finished)."""
    utilization: float | None = None
    """The pods' accelerator utilization over the best stair within the SLO (added by the
    world): what a projection from utilization would have made of that load."""
    baseline: SweepOutcome | None = None
    """The baseline's temporary replica, swept alike (added by the world to the candidate's
    outcome); None when production's operating point stands in."""
    requests: SweepShape | None = None
    """The requests sent (added by the world)."""
    baseline_unswept: str = ""
    """Why the baseline's replica was not swept (or measured nothing within the SLO), when
    that is so."""
