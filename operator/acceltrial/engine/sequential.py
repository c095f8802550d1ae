"""The always-valid sequential test of ``analysis.mode: sequential``: which criteria it judges,
the counters it reads, and the evidence they hold.

A criterion on the preset's request latency (``latency_mean``, ``latency_p50/p90/p99``) or
``error_ratio`` that fails when the candidate is worse (relative ``max``, statistical
``increase`` or ``either``, absolute ``max`` on errors) is judged on counts instead of one value
per window: the requests each variant served in each scrape interval of the step so far, how
many failed, and how many successful ones were slower than each bucket bound of the latency
histogram. These come from range queries of the raw counters, so the counts are exact.

The test. In each interval, given how many events (errors, or requests slower than a bound) both
variants had and how many requests each served, the candidate's share of the events is binomial;
its success probability grows with r, the candidate's event rate over the baseline's. Against
the tolerance r0 (relative ``max``, or 1 + ``allowedChange``) the likelihood ratio of r = r0 x m
to r = r0, averaged over the multipliers ``MULTIPLIERS``, is a nonnegative supermartingale while
r <= r0 (a mixture sequential probability ratio test), and so is its mean over the streams (one
per bucket bound, or the errors). By Ville's inequality that mean ever reaches 1 / alpha with
probability at most alpha: a criterion within its tolerance fails a step with probability at
most ``alpha``, however many times the step is measured. Each interval's factor is capped at
e^MAX_LOG_FACTOR, which keeps the bound. An absolute ``max`` on errors is the one-sample
version: the candidate's errors among its requests against the rate ``max``.

Pure: counts in, evidence out.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from acceltrial.api.spec import AnalysisSpec, Criterion
from acceltrial.engine.metrics import COUNTER_PRESETS, LATENCY_METRICS, Stream

MULTIPLIERS = (1.1, 1.25, 1.5, 2.0, 3.0, 5.0, 10.0)
"""How much worse than the tolerance the mixture's alternatives are."""
MAX_LOG_FACTOR = 2.0
"""One interval multiplies the evidence by at most e^2: a burst within one scrape interval (a
pause, one long prompt) cannot fail a step alone. A capped factor still has expectation <= 1, so
the guarantee holds."""
Samples = Sequence[tuple[float, float]]
"""(timestamp, value) samples of one counter."""


@dataclass(frozen=True)
class SequentialCheck:
    """How the sequential test judges one criterion."""

    stream: Stream
    tolerance: float
    """r0 (two-sample), or the highest passing error ratio (one-sample)."""
    one_sample: bool = False


def sequential_check(analysis: AnalysisSpec, criterion: Criterion) -> SequentialCheck | None:
    """The sequential test of ``criterion``, or None when it is judged measurement by measurement
    (fixed mode, your own query, a metric without counters, or a criterion on a decrease)."""
    if analysis.mode != "sequential" or analysis.preset not in COUNTER_PRESETS:
        return None
    stream = _stream(criterion)
    if stream is None:
        return None
    if criterion.relative is not None and criterion.relative.max is not None:
        return SequentialCheck(stream, criterion.relative.max)
    test = criterion.statistical
    if test is not None and test.direction in ("increase", "either"):
        return SequentialCheck(stream, 1 + test.allowed_change)
    bounds = criterion.absolute
    if stream == "errors" and bounds is not None and bounds.max is not None:
        return SequentialCheck(stream, bounds.max, one_sample=True)
    return None


def _stream(criterion: Criterion) -> Stream | None:
    if criterion.query is not None or criterion.metric is None:
        return None
    if criterion.metric in LATENCY_METRICS:
        return "latency"
    return "errors" if criterion.metric == "error_ratio" else None


@dataclass(frozen=True)
class Counts:
    """One variant's increments per interval: requests, and events per stream name."""

    requests: Mapping[float, float]
    events: Mapping[str, Mapping[float, float]]


def latency_counts(parts: Mapping[str, Samples], since: float | None = None) -> Counts:
    """From a histogram's cumulative bucket counters, one part per bound: requests (``+Inf``)
    and, per finite bound, requests slower than it. A histogram first seen after ``since`` (the
    start of the range) was created in it (a new pod's), and counts from zero."""
    parts = _created_from_zero(parts, since)
    total = increments(parts.get("+Inf", ()))
    events = {}
    for bound, samples in parts.items():
        if bound == "+Inf":
            continue
        within = increments(samples)
        events[f"slower than {bound} s"] = {
            t: total[t] - within[t] for t in total if t in within and total[t] >= within[t]
        }
    return Counts(total, events)


def error_counts(parts: Mapping[str, Samples], since: float | None = None) -> Counts:
    """From requests counted by status class: requests, and those answered 5xx.

    A status class's series exists only from its first response (vLLM's instrumentator, TGI's
    failure counter), so a series first seen after the range began (``since``; else after the
    others began) was created in the window: it counted up from zero, and its first value is
    requests of the window, not a baseline to difference from. Else the first errors of a
    failing build, often all a short step sees, would be lost, and so would a new candidate
    pod's first requests: at 1 request/s, a step's first window held none."""
    if since is None:
        since = min((samples[0][0] for samples in parts.values() if samples), default=0.0)
    by_status = {
        status: increments(samples) for status, samples in _created_from_zero(parts, since).items()
    }
    times = set().union(*(s.keys() for s in by_status.values())) if by_status else set()
    requests = {t: sum(s.get(t, 0.0) for s in by_status.values()) for t in times}
    errors = {
        t: sum(s.get(t, 0.0) for status, s in by_status.items() if status.startswith("5"))
        for t in times
    }
    return Counts(requests, {"errors": errors})


SAME_START_SECONDS = 0.5
"""A series whose first sample is this close to the range's start was there before it: a range
query's points lie one resolution (at least 1 s) apart."""


def _created_from_zero(parts: Mapping[str, Samples], since: float | None) -> Mapping[str, Samples]:
    """``parts`` with each series first seen after ``since`` counted up from zero."""
    if since is None:
        return parts
    return {
        name: _from_zero(samples)
        if samples and samples[0][0] > since + SAME_START_SECONDS
        else samples
        for name, samples in parts.items()
    }


def _from_zero(samples: Samples) -> Samples:
    """A counter created by its first event: zero just before its first sample."""
    first = samples[0][0]
    return [(math.nextafter(first, -math.inf), 0.0), *samples]


def increments(samples: Samples) -> dict[float, float]:
    """Increase of a counter into each sample's timestamp; a reset (a decrease) or a gap leaves
    that interval out rather than guess."""
    result = {}
    for (_, before), (t, after) in itertools.pairwise(samples):
        if math.isfinite(before) and math.isfinite(after) and after >= before:
            result[t] = after - before
    return result


@dataclass(frozen=True)
class Evidence:
    """The strongest stream's evidence against 'within tolerance', and what it takes to fail."""

    stream: str
    log_evidence: float
    log_threshold: float
    intervals: int
    """Intervals in which both variants (or the candidate, one-sample) served requests."""

    @property
    def failed(self) -> bool:
        return self.log_evidence >= self.log_threshold


def two_sample_evidence(
    candidate: Counts, baseline: Counts, tolerance: float, alpha: float
) -> Evidence:
    """The mixture SPRT of every stream, paired by interval (or pooled when no interval is
    shared: during the bake the baseline is measured over an earlier window)."""
    times = sorted(set(candidate.requests) & set(baseline.requests))
    paired = [t for t in times if candidate.requests[t] > 0 and baseline.requests[t] > 0]
    threshold = math.log(1 / alpha)
    per_stream = {}
    for name, events in candidate.events.items():
        other = baseline.events.get(name, {})
        if paired:
            rows = [
                (events.get(t, 0.0), other.get(t, 0.0), candidate.requests[t], baseline.requests[t])
                for t in paired
            ]
        else:
            rows = [(sum(events.values()), sum(other.values()), sum(candidate.requests.values()),
                     sum(baseline.requests.values()))]  # fmt: skip
        cap = MAX_LOG_FACTOR if paired else math.inf  # pooled: one look at the whole window
        per_stream[name] = _log_mean_exp(_two_sample_log_lr(np.array(rows), tolerance, cap))
    if not per_stream:
        return Evidence("none", 0.0, threshold, len(paired))
    # The mean of the streams' evidence is a supermartingale too, and never weaker than testing
    # each stream at alpha / streams.
    strongest = max(per_stream, key=lambda name: per_stream[name])
    return Evidence(strongest, _log_mean_exp(list(per_stream.values())), threshold, len(paired))


def _two_sample_log_lr(rows: npt.NDArray[np.float64], tolerance: float, cap: float) -> list[float]:
    """Per alternative, the log likelihood ratio summed over rows (x_c, x_b, n_c, n_b)."""
    x_c, x_b, n_c, n_b = rows.T
    used = (n_c > 0) & (n_b > 0) & (x_c + x_b > 0)
    if not used.any():
        return [0.0] * len(MULTIPLIERS)
    x_c, x_b, n_c, n_b = x_c[used], x_b[used], n_c[used], n_b[used]
    share = (n_c / (n_c + n_b))[:, None]
    r = tolerance * np.array(MULTIPLIERS)[None, :]
    q0 = tolerance * share / (tolerance * share + 1 - share)
    q = r * share / (r * share + 1 - share)
    terms = x_c[:, None] * np.log(q / q0) + x_b[:, None] * np.log((1 - q) / (1 - q0))
    return [float(v) for v in np.minimum(terms, cap).sum(axis=0)]


def one_sample_evidence(candidate: Counts, highest_ratio: float, alpha: float) -> Evidence:
    """The mixture SPRT of the candidate's errors among its requests against ``highest_ratio``."""
    events = candidate.events.get("errors", {})
    served = [t for t in sorted(candidate.requests) if candidate.requests[t] > 0]
    p0 = min(max(highest_ratio, 1e-9), 1 - 1e-9)
    log_lr = [0.0] * len(MULTIPLIERS)
    for i, m in enumerate(MULTIPLIERS):
        p = min(p0 * m, 1 - 1e-9)
        if p <= p0:
            log_lr[i] = -math.inf
            continue
        for t in served:
            x, n = events.get(t, 0.0), candidate.requests[t]
            term = x * math.log(p / p0) + (n - x) * math.log((1 - p) / (1 - p0))
            log_lr[i] += min(term, MAX_LOG_FACTOR)
    return Evidence("errors", _log_mean_exp(log_lr), math.log(1 / alpha), len(served))


def _log_mean_exp(values: Sequence[float]) -> float:
    top = max(values)
    if top == -math.inf:
        return top
    return top + math.log(sum(math.exp(v - top) for v in values) / len(values))
