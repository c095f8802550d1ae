"""A latency quantile beyond its limit, told from chance by the requests slower than the limit.

Pure. A p99 of a hundred requests is their slowest one or two: for two variants drawing the
same log-normal latencies (sigma 0.36 to 0.5), one reads 1.2 times the other's p99 in 12% to 20%
of such windows, and still in 2% to 7% at 400 requests each. A quantile criterion judged window
by window (``analysis.mode: fixed``) would roll back an equal candidate that often. What a
quantile q beyond a threshold T does say is that more than ``1 - q`` of the requests were
slower than T, and the server's latency histogram counts them. So a fixed-mode latency quantile
fails only when the candidate's requests slower than T over the step so far are too many for
chance. T is the criterion's maximum (absolute) or that times the baseline's figure (relative);
k counts the candidate's requests slower than the smallest histogram bound B at or above T, so
it never counts a request that was not slower than T.

- An absolute maximum: the one-sided exact binomial test, P(at least k of n slower | a share
  ``1 - q``) below ``analysis.alpha`` (the test the error ratio uses).
- A relative maximum: T rests on the baseline's figure of the window, itself a p99 of a few
  hundred requests (a replicas-router trial read the baseline's p99 as 1.4 s where its profile
  says 2.8 s, and then 3 of 28 candidate requests slower than 1.7 s looked like no chance). So
  the candidate's share slower than B is compared with the baseline's share slower than B / the
  limit (its largest bound at or below, so the baseline's share is never undercounted), over the
  same span: Fisher's exact test, one-sided. A candidate no worse than the baseline scaled by
  the limit cannot have the larger share but by chance. Without the baseline's counters (none
  read, none served) the binomial test stands in.

Where the counters are not read (the custom preset, your own query, TTFT and ITL, which have
no stream of counters here) a quantile is judged as before. A sequential test
(``analysis.mode: sequential``) needs none of this: it tests the same counts as they come.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from acceltrial.api.spec import AnalysisSpec, Criterion
from acceltrial.engine.analysis import Judgement, Reading
from acceltrial.engine.evidence import QUANTILES, error_ratio_p_value, share_above_p_value
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


def tail_requests(analysis: AnalysisSpec, criterion: Criterion) -> list[MetricRequest]:
    """The latency histogram counters over the step so far of a fixed-mode latency quantile
    with a maximum: the candidate's, and the baseline's for a relative one; none when the
    criterion is judged without them."""
    candidate = _tail_request(analysis, criterion)
    if candidate is None:
        return []
    if criterion.relative is None:
        return [candidate]
    return [candidate, replace(candidate, variant="baseline")]


def _tail_request(analysis: AnalysisSpec, criterion: Criterion) -> MetricRequest | None:
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
class Slower:
    """One variant's requests over the step, and those slower than a histogram bound."""

    requests: float
    slower: float
    bound: float


@dataclass(frozen=True)
class Tail:
    """The candidate's requests slower than a quantile criterion's threshold, and the test:
    against the share ``1 - q`` (absolute), or against the ``baseline``'s share (relative)."""

    candidate: Slower
    expected_share: float
    p_value: float
    baseline: Slower | None = None

    def said(self) -> str:
        mine = self.candidate
        slow = (
            f"{mine.slower:.0f} of the candidate's {mine.requests:.0f} requests in the step were "
            f"slower than {mine.bound:.4g} s"
        )
        theirs = self.baseline
        if theirs is None:
            expected = mine.requests * self.expected_share
            return (
                f"{slow} where {expected:.1f} are expected at {self.expected_share:.0%} "
                f"(p = {self.p_value:.2g})"
            )
        return (
            f"{slow}, against {theirs.slower:.0f} of the baseline's {theirs.requests:.0f} slower "
            f"than {theirs.bound:.4g} s ({self.expected_share:.1%}; p = {self.p_value:.2g})"
        )


def tail_test(
    judgement: Judgement,
    criterion: Criterion,
    counters: Reading | None,
    baseline_counters: Reading | None = None,
) -> Tail | None:
    """The exact test of a failed quantile on the requests slower than its threshold, or None
    when it cannot be made (no counters, no threshold, no histogram bound at or above it)."""
    quantile = QUANTILES.get(criterion.metric or "")
    threshold = _threshold(judgement, criterion)
    if quantile is None or threshold is None:
        return None
    mine = _slower(counters, lambda bound: bound >= threshold, first=True)
    if mine is None or mine.requests <= 0:
        return None
    limit = criterion.relative.max if criterion.relative is not None else None
    if limit:
        theirs = _slower(baseline_counters, lambda bound: bound <= mine.bound / limit, first=False)
        if theirs is not None and theirs.requests > 0:
            p_value = share_above_p_value(
                round(mine.slower), round(mine.requests), round(theirs.slower),
                round(theirs.requests),
            )  # fmt: skip
            return Tail(mine, theirs.slower / theirs.requests, p_value, theirs)
    share = 1 - quantile
    p_value = error_ratio_p_value(round(mine.slower), round(mine.requests), share)
    return Tail(mine, share, p_value)


def _slower(
    counters: Reading | None, wanted: Callable[[float], bool], first: bool
) -> Slower | None:
    """A histogram's requests over the step, and those slower than its smallest bound
    ``wanted`` (``first``) or its largest; None without such a bound."""
    if counters is None or not counters.parts:
        return None
    bounds = sorted(float(name) for name, _ in counters.parts if name != "+Inf")
    chosen = [bound for bound in bounds if wanted(bound)]
    if not chosen:
        return None
    bound = chosen[0] if first else chosen[-1]
    counts = latency_counts(dict(counters.parts), counters.since)
    requests = sum(counts.requests.values())
    slower = sum(counts.events.get(f"slower than {_bound_name(counters, bound)} s", {}).values())
    return Slower(requests, slower, bound)


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
    alpha: float, *, baseline_counters: Reading | None = None,
) -> Judgement:  # fmt: skip
    """``judgement`` (the window weighed) after the tail test of ``failed`` (the figure beyond
    its limit, the window's or the step's pooled): a failure the test does not carry becomes
    thin, and a thin window whose figure the test carries fails."""
    tail = tail_test(failed, criterion, counters, baseline_counters)
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
