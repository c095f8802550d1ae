"""Judging a step: which readings measure it, what each criterion's readings mean, and the limits.

Pure: the caller runs the planned requests (:class:`~acceltrial.engine.metrics.MetricRequest`,
through a metrics port) and hands back one :class:`Reading` per criterion and variant. The rule
that matters most here: **no data is never a pass**. An empty result, NaN, +Inf, a provider
error, several series where one was expected, or too few samples or requests make a criterion
Inconclusive, with the reason in words.

Run-level limits follow Argo Rollouts: a step fails once failed measurements exceed
``failureLimit``, errors once consecutive errored measurements exceed ``consecutiveErrorLimit``,
and turns inconclusive once inconclusive measurements exceed ``inconclusiveLimit``.
"""

from __future__ import annotations

import math
import statistics as pystats
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from acceltrial.api.spec import AnalysisSpec, Criterion
from acceltrial.api.status import AnalysisCounts, Verdict
from acceltrial.engine.evidence import need_of
from acceltrial.engine.metrics import (
    COST_METRICS,
    REQUESTS_METRIC,
    Measure,
    MetricRequest,
    OwnQuery,
    PresetMetric,
    Variant,
    offers,
)
from acceltrial.engine.sequential import (
    SequentialCheck,
    error_counts,
    latency_counts,
    one_sample_evidence,
    sequential_check,
    two_sample_evidence,
)
from acceltrial.engine.statistics import Comparison, compare

STATISTICAL_MIN_SAMPLES = 10
RoundOutcome = Literal["Pass", "Fail", "Inconclusive", "Error", "Thin"]
StepStatus = Literal["Running", "Failed", "Errored", "Inconclusive"]


@dataclass(frozen=True)
class MeasurementWindow:
    """When a measurement is taken (``end``) and the span statistical criteria sample."""

    start: datetime
    end: datetime
    resolution_seconds: float
    baseline_end: datetime | None = None
    """When the baseline is measured, if not at ``end``: during the bake the baseline serves
    nothing, so it is measured over the last window in which it still served traffic."""
    baseline_earlier: tuple[datetime, ...] = ()
    """Earlier ends to measure the baseline at, in order, where its reading at ``baseline_end``
    came back empty (a scrape missed there): its traffic before then is as good a reference,
    and without one the bake would wait for data that can never come."""

    def baseline_at(self, end: datetime) -> MeasurementWindow:
        """This window with the baseline measured at ``end`` instead, and no earlier end."""
        return MeasurementWindow(self.start, self.end, self.resolution_seconds, end)

    def for_variant(self, variant: Variant) -> tuple[datetime, datetime]:
        """The (start, end) a variant's queries are evaluated over."""
        if variant == "baseline" and self.baseline_end is not None:
            return self.baseline_end - (self.end - self.start), self.baseline_end
        return self.start, self.end


@dataclass(frozen=True)
class Reading:
    """What the metrics provider returned for one variant of one criterion."""

    values: tuple[float, ...] = ()
    """One value per series (instant), or the samples of the series (range)."""
    series: int = 0
    """How many series the query returned."""
    requests: float | None = None
    """Requests the variant served in the window, when the criterion asked for it."""
    error: str | None = None
    """The provider's error, when the query failed."""
    parts: tuple[tuple[str, tuple[tuple[float, float], ...]], ...] = ()
    """Raw counters (a request's ``counters``): each part's name (a histogram bound such as
    ``0.5`` or ``+Inf``, a status class such as ``5xx``) and its (timestamp, value) samples."""
    asked: str = ""
    """What the source was asked, in its own language (the rendered query), for messages."""
    since: float | None = None
    """Raw counters: the start of the range their samples cover (Unix seconds), so a series
    first seen after it is known to have been created in the range (engine/sequential.py)."""


@dataclass(frozen=True)
class Judgement:
    """The verdict on one criterion in one measurement, with the numbers behind it."""

    criterion: str
    verdict: Verdict
    reason: str
    baseline: float | None = None
    candidate: float | None = None
    ratio: float | None = None
    baseline_samples: int = 0
    candidate_samples: int = 0
    errored: bool = False
    comparison: Comparison | None = None
    candidate_requests: float | None = None
    """The candidate's requests the verdict rests on, when counted."""
    baseline_requests: float | None = None
    candidate_errors: float | None = None
    """The candidate's failed requests among them (error ratios)."""
    thin: bool = False
    """Too few requests to pass or fail (verdict Inconclusive, but no data problem)."""
    unserved: bool = False
    """The candidate answered no request in what was judged: thin or inconclusive by whether
    its share should have brought some (engine/unserved.py)."""
    spans_step: bool = False
    """The counts span the step so far (a sequential test), not one interval."""


def applicable(analysis: AnalysisSpec, weight: int) -> list[Criterion]:
    """The criteria judged at ``weight`` (those whose fromWeight it reaches)."""
    return [c for c in analysis.criteria if weight >= c.from_weight]


def plan(analysis: AnalysisSpec, weight: int) -> list[MetricRequest]:
    """The readings one measurement needs: at most one per criterion and variant."""
    planned: list[MetricRequest] = []
    for criterion in applicable(analysis, weight):
        if criterion.metric in COST_METRICS:
            continue  # computed from prices and throughput, not read
        check = sequential_check(analysis, criterion)
        if check is not None:
            variants: tuple[Variant, ...] = (
                ("candidate",) if check.one_sample else ("baseline", "candidate")
            )
            planned += [
                MetricRequest(criterion.name, v, measure(criterion), counters=check.stream)
                for v in variants
            ]
            continue
        mode: Literal["instant", "range"] = "range" if criterion.statistical else "instant"
        requests = _requests_measure(criterion, analysis.preset)
        planned += [
            MetricRequest(criterion.name, variant, measure(criterion), mode, requests)
            for variant in _variants_of(criterion)
        ]
    return planned


def _variants_of(criterion: Criterion) -> tuple[Variant, ...]:
    return ("candidate",) if criterion.absolute else ("baseline", "candidate")


def measure(criterion: Criterion) -> Measure:
    """What a criterion reads: its own query, or its metric as the preset reads it."""
    if criterion.query is not None:
        return OwnQuery(criterion.query)
    assert criterion.metric is not None  # the API requires metric or query
    return PresetMetric(criterion.metric)


def _requests_measure(criterion: Criterion, preset: str) -> Measure | None:
    """How the requests behind a criterion are counted: always when it has a need (its own
    requestsQuery, else the preset's counter), so thin windows and the promotion's evidence
    can be told."""
    if criterion.min_requests is None and need_of(criterion) is None:
        return None
    if criterion.requests_query is not None:
        return OwnQuery(criterion.requests_query)
    if criterion.query is None and offers(preset, REQUESTS_METRIC):
        return PresetMetric(REQUESTS_METRIC)
    return None


def judge(
    criterion: Criterion,
    baseline: Reading | None,
    candidate: Reading | None,
    analysis: AnalysisSpec | None = None,
) -> Judgement:
    """Judge one criterion from its readings (``None`` where nothing was queried); with the
    ``analysis`` in sequential mode, criteria it covers get the sequential test."""
    if analysis is not None and (check := sequential_check(analysis, criterion)) is not None:
        return _judge_sequential(criterion, check, analysis.alpha, baseline, candidate)
    return _judge_fixed(criterion, baseline, candidate)


def _judge_fixed(
    criterion: Criterion, baseline: Reading | None, candidate: Reading | None
) -> Judgement:
    name = criterion.name
    if criterion.metric in COST_METRICS:
        return _inconclusive(name, "a cost criterion is judged from the cost model (judge_cost)")
    readings = {"baseline": baseline, "candidate": candidate}
    needed = _variants_of(criterion)
    for variant in needed:
        problem = _reading_problem(criterion, variant, readings[variant])
        if problem is not None:
            return problem
    if criterion.statistical is not None:
        return _judge_statistical(criterion, _present(baseline), _present(candidate))
    values: dict[str, float] = {}
    for variant in needed:
        value_or_problem = _single_value(name, variant, _present(readings[variant]))
        if isinstance(value_or_problem, Judgement):
            return value_or_problem
        values[variant] = value_or_problem
    if criterion.absolute is not None:
        return _judge_absolute(criterion, values["candidate"])
    return _judge_relative(criterion, values["baseline"], values["candidate"])


def judge_cost(
    criterion: Criterion, baseline: float | None, candidate: float | None, missing: str
) -> Judgement:
    """Judge a cost criterion on the cost model's figures; ``missing`` says why one is None."""
    needed = _variants_of(criterion)
    for variant, value in (("baseline", baseline), ("candidate", candidate)):
        if variant in needed and value is None:
            return _inconclusive(criterion.name, f"no cost figure for the {variant}: {missing}")
    if criterion.absolute is not None:
        assert candidate is not None
        return _judge_absolute(criterion, candidate)
    assert baseline is not None
    assert candidate is not None
    return _judge_relative(criterion, baseline, candidate)


def _present(reading: Reading | None) -> Reading:
    assert reading is not None  # checked by _reading_problem
    return reading


def _reading_problem(
    criterion: Criterion, variant: str, reading: Reading | None
) -> Judgement | None:
    name = criterion.name
    if reading is None:
        return _inconclusive(name, f"the {variant} was not measured")
    if reading.error is not None:
        return _inconclusive(name, f"the {variant}'s query failed: {reading.error}", errored=True)
    asked_for_requests = criterion.min_requests is not None and criterion.min_requests > 0
    counted = reading.requests
    if asked_for_requests and (counted is None or not math.isfinite(counted)):
        return _inconclusive(name, f"the {variant}'s request count is unavailable")
    return None


def _single_value(name: str, variant: str, reading: Reading) -> float | Judgement:
    if reading.series == 0 or not reading.values:
        return _inconclusive(name, f"no data for the {variant} (the query returned nothing)")
    if reading.series > 1:
        return _inconclusive(
            name, f"the {variant}'s query returned {reading.series} series where one was expected"
        )
    value = reading.values[0]
    if math.isnan(value):
        return _inconclusive(name, f"the {variant}'s value is NaN (no traffic in the window?)")
    if math.isinf(value):
        return _inconclusive(name, f"the {variant}'s value is {value:+}")
    return value


def _judge_absolute(criterion: Criterion, value: float) -> Judgement:
    bounds = criterion.absolute
    assert bounds is not None
    shown = _fmt(value)
    if bounds.min is not None and value < bounds.min:
        return _judged(criterion, "Fail", f"{shown} is below min {_fmt(bounds.min)}", value)
    if bounds.max is not None and value > bounds.max:
        return _judged(criterion, "Fail", f"{shown} is above max {_fmt(bounds.max)}", value)
    return _judged(criterion, "Pass", f"{shown} is within {_limits(bounds.min, bounds.max)}", value)


def _judge_relative(criterion: Criterion, baseline: float, candidate: float) -> Judgement:
    bounds = criterion.relative
    assert bounds is not None
    if baseline == 0:
        if candidate != 0:
            return _inconclusive(
                criterion.name,
                f"the baseline is 0 so candidate/baseline is undefined (candidate "
                f"{_fmt(candidate)}); use an absolute criterion for this metric",
            )
        ratio = 1.0
    else:
        ratio = candidate / baseline
    said = f"{_fmt(candidate)} is {ratio:.3g}x the baseline's {_fmt(baseline)}"
    verdict: Verdict = "Pass"
    if (bounds.min is not None and ratio < bounds.min) or (
        bounds.max is not None and ratio > bounds.max
    ):
        verdict = "Fail"
    limits = _limits(bounds.min, bounds.max)
    reason = f"{said} (limit {limits})" if verdict == "Fail" else f"{said}, within {limits}"
    return Judgement(
        criterion.name,
        verdict,
        reason,
        baseline=baseline,
        candidate=candidate,
        ratio=ratio,
        baseline_samples=1,
        candidate_samples=1,
    )


def _judge_statistical(criterion: Criterion, baseline: Reading, candidate: Reading) -> Judgement:
    test = criterion.statistical
    assert test is not None
    name = criterion.name
    for variant, reading in (("baseline", baseline), ("candidate", candidate)):
        if reading.series != 1:
            return _inconclusive(
                name,
                f"the {variant}'s query returned {reading.series} series where one was expected",
            )
    base = [v for v in baseline.values if math.isfinite(v)]
    cand = [v for v in candidate.values if math.isfinite(v)]
    needed = criterion.min_samples or STATISTICAL_MIN_SAMPLES
    if min(len(base), len(cand)) < needed:
        return _inconclusive(
            name,
            f"too few finite samples: baseline {len(base)}, candidate {len(cand)} "
            f"(need {needed} each)",
        )
    result = compare(cand, base, test.confidence)
    scale = abs(pystats.median(base))
    tolerance = test.allowed_change * scale
    higher = result.lower > tolerance
    lower = result.upper < -tolerance
    failed = (test.direction in ("increase", "either") and higher) or (
        test.direction in ("decrease", "either") and lower
    )
    shift = (
        f"shift {_fmt(result.estimate)} ({test.confidence:.0%} CI {_fmt(result.lower)} to "
        f"{_fmt(result.upper)}, p={result.p_value:.3g}) against a baseline median of "
        f"{_fmt(scale)}, allowed change {test.allowed_change:.0%}"
    )
    verdict: Verdict = "Fail" if failed else "Pass"
    said = "significantly " + ("higher" if higher else "lower") if failed else "no regression:"
    return Judgement(
        name,
        verdict,
        f"candidate {said} {shift}",
        baseline=pystats.median(base),
        candidate=pystats.median(cand),
        baseline_samples=len(base),
        candidate_samples=len(cand),
        comparison=result,
    )


def _judge_sequential(
    criterion: Criterion,
    check: SequentialCheck,
    alpha: float,
    baseline: Reading | None,
    candidate: Reading | None,
) -> Judgement:
    name = criterion.name
    readings = {"baseline": baseline, "candidate": candidate}
    needed: tuple[Variant, ...] = ("candidate",) if check.one_sample else ("baseline", "candidate")
    counts = {}
    for variant in needed:
        reading = readings[variant]
        if reading is None:
            return _inconclusive(name, f"the {variant} was not measured")
        if reading.error is not None:
            return _inconclusive(
                name, f"the {variant}'s query failed: {reading.error}", errored=True
            )
        parts = dict(reading.parts)
        counts[variant] = (
            latency_counts(parts, reading.since)
            if check.stream == "latency"
            else error_counts(parts, reading.since)
        )
    totals = {variant: sum(counted.requests.values()) for variant, counted in counts.items()}
    if totals.get("baseline", 1.0) <= 0:
        return _inconclusive(name, "no requests counted for the baseline in this step yet")
    if totals["candidate"] <= 0:
        return Judgement(
            name,
            "Inconclusive",
            "no requests counted for the candidate in this step yet",
            candidate_requests=0.0,
            baseline_requests=totals.get("baseline"),
            spans_step=True,
            unserved=True,
        )
    if check.one_sample:
        evidence = one_sample_evidence(counts["candidate"], check.tolerance, alpha)
        limit = f"an error ratio of {_fmt(check.tolerance)}"
    else:
        evidence = two_sample_evidence(
            counts["candidate"], counts["baseline"], check.tolerance, alpha
        )
        limit = f"{_fmt(check.tolerance)}x the baseline's"
    said = (
        f"sequential test over {evidence.intervals} intervals: evidence "
        f"{math.exp(min(evidence.log_evidence, 700)):.3g} that the candidate's {evidence.stream} "
        f"rate is above {limit} (fails at {math.exp(evidence.log_threshold):.3g}, alpha {alpha:g})"
    )
    if evidence.stream == "none":
        said = f"sequential test over {evidence.intervals} intervals: no evidence of a regression"
    verdict: Verdict = "Fail" if evidence.failed else "Pass"
    served = counts["candidate"]
    errors = served.events.get("errors") if check.stream == "errors" else None
    return Judgement(
        name,
        verdict,
        said,
        candidate_requests=sum(served.requests.values()),
        baseline_requests=sum(counts["baseline"].requests.values())
        if "baseline" in counts
        else None,
        candidate_errors=sum(errors.values()) if errors is not None else None,
        spans_step=True,
    )


def _judged(criterion: Criterion, verdict: Verdict, reason: str, candidate: float) -> Judgement:
    return Judgement(criterion.name, verdict, reason, candidate=candidate, candidate_samples=1)


def _inconclusive(name: str, reason: str, errored: bool = False) -> Judgement:
    return Judgement(name, "Inconclusive", reason, errored=errored)


def _limits(low: float | None, high: float | None) -> str:
    parts = ([f"min {_fmt(low)}"] if low is not None else []) + (
        [f"max {_fmt(high)}"] if high is not None else []
    )
    return " and ".join(parts)


def _fmt(value: float) -> str:
    return f"{value:.4g}"


_SEVERITY: tuple[tuple[RoundOutcome, Callable[[Judgement], bool]], ...] = (
    ("Fail", lambda j: j.verdict == "Fail"),
    ("Error", lambda j: j.errored),
    ("Inconclusive", lambda j: j.verdict == "Inconclusive" and not j.thin),
    ("Thin", lambda j: j.thin),
)


def round_outcome(judgements: Sequence[Judgement]) -> tuple[RoundOutcome, str]:
    """The outcome of one measurement: the worst criterion decides, with its reason."""
    if not judgements:
        return "Inconclusive", "no criterion applies at this weight"
    for outcome, is_it in _SEVERITY:
        worst = next((j for j in judgements if is_it(j)), None)
        if worst is not None:
            return outcome, f"{worst.criterion}: {worst.reason}"
    return "Pass", "every criterion passed"


def tally(counts: AnalysisCounts, outcome: RoundOutcome) -> AnalysisCounts:
    """The step's counts after one more measurement."""
    return AnalysisCounts(
        measurements=counts.measurements + 1,
        failures=counts.failures + (outcome == "Fail"),
        inconclusive=counts.inconclusive + (outcome == "Inconclusive"),
        consecutive_errors=counts.consecutive_errors + 1 if outcome == "Error" else 0,
        passes=counts.passes + (outcome == "Pass"),
        thin=counts.thin + (outcome == "Thin"),
        last_outcome=outcome,
    )


def assess(counts: AnalysisCounts, analysis: AnalysisSpec) -> StepStatus:
    """Whether the step's counts have crossed a limit, the most severe first."""
    if counts.failures > analysis.failure_limit:
        return "Failed"
    if counts.consecutive_errors > analysis.consecutive_error_limit:
        return "Errored"
    if counts.inconclusive > analysis.inconclusive_limit:
        return "Inconclusive"
    return "Running"
