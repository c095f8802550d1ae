"""Seeded traffic traces for the decision benchmark, and what Prometheus would answer on them.

A trace says how the baseline and the candidate behave (request rate, latency distribution,
errors, spikes, a regression that starts late or only under load). :class:`Simulation` plays it
one 15 s scrape interval at a time at whatever weight the judge under test has reached, and keeps
the counters a vLLM server exports: ``http_requests_total`` by status class and the
``vllm:e2e_request_latency_seconds`` histogram with vLLM's own bucket bounds, ``_sum`` and
``_count``. The query helpers then answer what the preset's PromQL answers on those counters:
``rate()`` over a 1 m window that, at a 15 s scrape interval, holds four samples and so sees 45 s
of increase; ``histogram_quantile`` with Prometheus' linear interpolation inside a bucket (and the
highest finite bound when the rank falls in ``+Inf``); NaN for 0/0.

Every scrape interval draws from its own generator seeded by (seed, trace, interval, variant), so
two judges that hold the same weight see exactly the same requests.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from scipy import special  # type: ignore[import-untyped]

SCRAPE_SECONDS = 15
WINDOW_SCRAPES = 4
"""A 1 m window at a 15 s scrape interval holds four samples: three increments (45 s)."""
# vLLM's bucket bounds of vllm:e2e_request_latency_seconds (vllm/engine/metrics.py,
# request_latency_buckets, vLLM v0.6 to v0.10; https://github.com/vllm-project/vllm).
BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0)
BASE_MEDIAN_S = 1.6
BASE_SIGMA = 0.45
BASE_ERROR_RATIO = 0.001
Z99 = 2.3263478740408408
BAD_LATENCY_S = BASE_MEDIAN_S * math.exp(Z99 * BASE_SIGMA)
"""The baseline's true p99: a candidate request slower than this was served badly."""
BURST_SHARE = 0.25
"""Errors come in bursts: a quarter of the scrape intervals carry all of a candidate's errors."""
SPIKE_FACTOR = 3.0
Variant = Literal["baseline", "candidate"]
Kind = Literal["aa", "regression", "no-traffic"]


@dataclass(frozen=True)
class Trace:
    """How both variants behave; the candidate's regression, if any, and when it shows."""

    name: str
    kind: Kind
    rate: float = 20.0
    """Requests per second to the service, split by the weight."""
    sigma: float = BASE_SIGMA
    """Spread of the log-normal latency of both variants (the noise level)."""
    p99_factor: float = 1.0
    """The candidate's p99 over the baseline's, with the median unchanged (a heavier tail)."""
    mean_factor: float = 1.0
    """Every candidate latency multiplied by this (mean, median and p99 alike)."""
    error_ratio: float = BASE_ERROR_RATIO
    """The candidate's average error ratio (in bursts when above the baseline's)."""
    burn_minutes: float = 0.0
    """A slow burn: mean_factor is reached linearly over this many minutes (0: at once)."""
    from_weight: int = 0
    """The regression shows only at weights of at least this (a regression under load)."""
    spikes: float = 0.0
    """Chance that one variant's scrape interval is a latency spike (x3), each independently."""
    baseline_spikes_only: bool = False


@dataclass
class Counters:
    """Per scrape interval increments of one variant's counters (index k is (t_k-1, t_k])."""

    requests: list[int] = field(default_factory=list)
    errors: list[int] = field(default_factory=list)
    buckets: list[np.ndarray] = field(default_factory=list)
    """Successful requests with latency <= each of BUCKETS."""
    latency_sum: list[float] = field(default_factory=list)
    bad: list[int] = field(default_factory=list)
    """Requests served badly: failed, or slower than the baseline's true p99."""


class Simulation:
    """One trace played at the weights a judge chooses, one scrape interval at a time."""

    def __init__(self, trace: Trace, trace_index: int, seed: int) -> None:
        self.trace = trace
        self._key = (seed, trace_index)
        self.counters: dict[Variant, Counters] = {"baseline": Counters(), "candidate": Counters()}
        self.weights: list[int] = []

    @property
    def now(self) -> int:
        """Scrape intervals played so far."""
        return len(self.weights)

    def play(self, weight: int) -> None:
        """One more scrape interval with ``weight`` percent of the traffic on the candidate."""
        k = len(self.weights)
        self.weights.append(weight)
        variants: tuple[Variant, ...] = ("baseline", "candidate")
        for index, variant in enumerate(variants):
            share = weight / 100 if variant == "candidate" else 1 - weight / 100
            rng = np.random.default_rng((*self._key, k, index))
            self._draw(variant, share, weight, k, rng)

    def _draw(
        self, variant: Variant, share: float, weight: int, k: int, rng: np.random.Generator
    ) -> None:
        trace = self.trace
        mean_rate = trace.rate * share * SCRAPE_SECONDS
        if variant == "candidate" and trace.kind == "no-traffic":
            mean_rate = 0.0
        requests = int(rng.poisson(mean_rate))
        errors = int(rng.binomial(requests, self._error_ratio(variant, weight, rng)))
        mu, sigma = self._latency(variant, weight, k, rng)
        successes = requests - errors
        edges = np.array([*BUCKETS, BAD_LATENCY_S])
        order = np.argsort(edges)
        cdf = special.ndtr((np.log(edges[order]) - mu) / sigma)
        counts = rng.multinomial(successes, np.diff(np.concatenate(([0.0], cdf, [1.0]))))
        at_most = np.cumsum(counts)[:-1]  # successes <= each sorted edge
        by_edge = np.empty_like(at_most)
        by_edge[order] = at_most
        mean = math.exp(mu + sigma**2 / 2)
        spread = math.sqrt((math.exp(sigma**2) - 1) * math.exp(2 * mu + sigma**2))
        total = successes * mean + math.sqrt(successes) * spread * float(rng.standard_normal())
        counters = self.counters[variant]
        counters.requests.append(requests)
        counters.errors.append(errors)
        counters.buckets.append(by_edge[: len(BUCKETS)])
        counters.latency_sum.append(max(0.0, total))
        counters.bad.append(errors + successes - int(by_edge[-1]))

    def _regressed(self, variant: Variant, weight: int) -> bool:
        return variant == "candidate" and weight >= self.trace.from_weight

    def _error_ratio(self, variant: Variant, weight: int, rng: np.random.Generator) -> float:
        ratio = self.trace.error_ratio
        if not self._regressed(variant, weight) or ratio <= BASE_ERROR_RATIO:
            return BASE_ERROR_RATIO
        bursting = rng.random() < BURST_SHARE
        return min(1.0, ratio / BURST_SHARE) if bursting else BASE_ERROR_RATIO

    def _latency(
        self, variant: Variant, weight: int, k: int, rng: np.random.Generator
    ) -> tuple[float, float]:
        trace = self.trace
        mu, sigma = math.log(BASE_MEDIAN_S), trace.sigma
        spiky = trace.spikes > 0 and (variant == "baseline" or not trace.baseline_spikes_only)
        if spiky and rng.random() < trace.spikes:
            mu += math.log(SPIKE_FACTOR)
        if not self._regressed(variant, weight):
            return mu, sigma
        factor = trace.mean_factor
        if trace.burn_minutes > 0:
            minutes = k * SCRAPE_SECONDS / 60
            factor = 1 + (factor - 1) * min(1.0, minutes / trace.burn_minutes)
        sigma += math.log(trace.p99_factor) / Z99
        return mu + math.log(factor), sigma

    # -- what the preset's queries answer at the end of scrape interval k ----------------------

    def window(self, variant: Variant, k: int, scrapes: int = WINDOW_SCRAPES) -> Window:
        """The increase over the window of ``scrapes`` samples ending at t_k, as rate() sees it
        (a 1 m window at a 15 s scrape interval: four samples, three increments)."""
        lo = max(0, k - scrapes + 2)
        c = self.counters[variant]
        part = slice(lo, k + 1)
        buckets = np.sum(c.buckets[part], axis=0) if k >= lo else np.zeros(len(BUCKETS))
        return Window(
            requests=sum(c.requests[part]),
            errors=sum(c.errors[part]),
            buckets=tuple(float(b) for b in buckets),
            latency_sum=sum(c.latency_sum[part]),
        )

    def ever_served(self, variant: Variant, k: int) -> bool:
        """Whether the variant's series exist at all by t_k (a server exports them once used)."""
        return sum(self.counters[variant].requests[: k + 1]) > 0

    def bad_requests(self) -> int:
        """Requests the candidate served badly so far."""
        return sum(self.counters["candidate"].bad)


@dataclass(frozen=True)
class Window:
    """Counter increases over one rate() window."""

    requests: int
    errors: int
    buckets: tuple[float, ...]
    latency_sum: float

    @property
    def successes(self) -> int:
        return self.requests - self.errors

    def requests_in_window(self) -> float:
        """increase(...[1m]): the 45 s seen, extrapolated to the window as Prometheus does."""
        return self.requests * WINDOW_SCRAPES / (WINDOW_SCRAPES - 1)

    def error_ratio(self) -> float:
        """(sum(rate(5xx)) or vector(0)) / sum(rate(all)): NaN without requests."""
        return self.errors / self.requests if self.requests else math.nan

    def mean_latency(self) -> float:
        """rate(_sum) / rate(_count): NaN without successful requests."""
        return self.latency_sum / self.successes if self.successes else math.nan

    def quantile(self, q: float) -> float:
        """histogram_quantile(q, sum by (le) (rate(_bucket))) as Prometheus computes it."""
        total = self.successes
        if total == 0:
            return math.nan
        rank = q * total
        previous_bound, previous_count = 0.0, 0.0
        for bound, count in zip(BUCKETS, self.buckets, strict=True):
            if count >= rank:
                if count == previous_count:
                    return bound
                return previous_bound + (bound - previous_bound) * (rank - previous_count) / (
                    count - previous_count
                )
            previous_bound, previous_count = bound, count
        return BUCKETS[-1]  # the rank is in +Inf: Prometheus answers the highest finite bound
