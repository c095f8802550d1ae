"""A latency quantile beyond its limit, told from chance by the requests slower than the limit.

Pure. A p99 of a hundred requests is their slowest one or two: for two variants drawing the
same log-normal latencies (sigma 0.36 to 0.5), one reads 1.2 times the other's p99 in 12% to 20%
of such windows, and still in 2% to 7% at 400 requests each. A quantile criterion judged window
by window (``analysis.mode: fixed``) would roll back an equal candidate that often. What a
quantile q beyond a threshold T does say is that more than ``1 - q`` of the requests were
slower than T, and the server's latency histogram counts them. So a fixed-mode latency quantile
fails only when the candidate's requests slower than T over the step so far are too many for
chance: the one-sided exact binomial test, P(at least k of n slower | a share ``1 - q``) below
``analysis.alpha`` (the test the error ratio uses). T is the criterion's maximum (absolute) or
that times the baseline's figure (relative); k counts the requests slower than the smallest
histogram bound at or above T, so it never counts a request that was not slower than T.

Where the counters are not read (the custom preset, your own query, TTFT and ITL, which have
no stream of counters here) a quantile is judged as before. A sequential test
(``analysis.mode: sequential``) needs none of this: it tests the same counts as they come.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from acceltrial.api.spec import AnalysisSpec, Criterion
from acceltrial.engine.analysis import Judgement, Reading
from acceltrial.engine.evidence import QUANTILES, error_ratio_p_value
from acceltrial.engine.metrics import (
    COUNTER_PRESETS,
    LATENCY_METRICS,
    MetricRequest,
    PresetMetric,
)
from acceltrial.engine.sequential import latency_counts, sequential_check

TAIL_SUFFIX = ":slower"
"""What a quantile criterion's counters are filed under: its name and this (a criterion's name
cannot hold a colon, so it never meets another criterion's)."""


def tail_key(criterion: str) -> str:
    return criterion + TAIL_SUFFIX


def tail_request(analysis: AnalysisSpec, criterion: Criterion) -> MetricRequest | None:
    """The candidate's latency histogram counters over the step so far, for a fixed-mode
    latency quantile with a maximum; None when the criterion is judged without them."""
    metric = criterion.metric
    bounds = criterion.absolute or criterion.relative
    if (
        metric not in QUANTILES
        or metric not in LATENCY_METRICS
        or criterion.query is not None
        or analysis.preset not in COUNTER_PRESETS
        or bounds is None
        or bounds.max is None
        or sequential_check(analysis, criterion) is not None
    ):
        return None
    return MetricRequest(
        tail_key(criterion.name), "candidate", PresetMetric(metric), counters="latency"
    )


@dataclass(frozen=True)
class Tail:
    """The candidate's requests slower than a quantile criterion's threshold, and the test."""

    requests: float
    slower: float
    bound: float
    """The histogram bound the slower requests are counted above (at or above the threshold)."""
    expected_share: float
    p_value: float

    def said(self) -> str:
        expected = self.requests * self.expected_share
        return (
            f"{self.slower:.0f} of the candidate's {self.requests:.0f} requests in the step were "
            f"slower than {self.bound:.4g} s where {expected:.1f} are expected at "
            f"{self.expected_share:.0%} (p = {self.p_value:.2g})"
        )


def tail_test(judgement: Judgement, criterion: Criterion, counters: Reading | None) -> Tail | None:
    """The exact test of a failed quantile on the requests slower than its threshold, or None
    when it cannot be made (no counters, no threshold, no histogram bound at or above it)."""
    quantile = QUANTILES.get(criterion.metric or "")
    threshold = _threshold(judgement, criterion)
    if quantile is None or threshold is None or counters is None or not counters.parts:
        return None
    counts = latency_counts(dict(counters.parts), counters.since)
    bounds = sorted(
        float(name) for name in dict(counters.parts) if name != "+Inf" and float(name) >= threshold
    )
    if not bounds:
        return None
    bound = bounds[0]
    requests = sum(counts.requests.values())
    slower = sum(counts.events.get(f"slower than {_bound_name(counters, bound)} s", {}).values())
    if requests <= 0:
        return None
    share = 1 - quantile
    p_value = error_ratio_p_value(round(slower), round(requests), share)
    return Tail(requests, slower, bound, share, p_value)


def _threshold(judgement: Judgement, criterion: Criterion) -> float | None:
    if criterion.absolute is not None:
        return criterion.absolute.max
    if criterion.relative is not None and criterion.relative.max is not None:
        if judgement.baseline is None:
            return None
        return criterion.relative.max * judgement.baseline
    return None


def _bound_name(counters: Reading, bound: float) -> str:
    """The part's own name of a bound (as the server wrote it: '2.5', '5.0')."""
    return next(name for name, _ in counters.parts if name != "+Inf" and float(name) == bound)


def weigh_tail(
    judgement: Judgement, failed: Judgement, criterion: Criterion, counters: Reading | None,
    alpha: float,
) -> Judgement:  # fmt: skip
    """``judgement`` (the window weighed) after the tail test of ``failed`` (the figure beyond
    its limit, the window's or the step's pooled): a failure the test does not carry becomes
    thin, and a thin window whose figure the test carries fails."""
    tail = tail_test(failed, criterion, counters)
    if tail is None:
        return judgement
    decisive = tail.p_value < alpha
    if judgement.verdict == "Fail" and not decisive:
        return _thin(judgement, f"{judgement.reason}, but {tail.said()}: may be chance")
    if judgement.thin and decisive:
        reason = f"{failed.reason}; decisive: {tail.said()}"
        return replace(judgement, verdict="Fail", thin=False, reason=reason)
    return judgement


def _thin(judgement: Judgement, reason: str) -> Judgement:
    return replace(judgement, verdict="Inconclusive", thin=True, reason=f"thin: {reason}")
