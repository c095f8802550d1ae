"""Taking a measurement: the snapshot's targets, the trial's metrics source, the engine's plan.

The engine (engine/measurement.py) plans the windows and requests and judges the readings; this
module only gathers what it needs (pods, prices, readings) and runs the requests.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from acceltrial.api.durations import duration_seconds
from acceltrial.api.status import TrialStatus
from acceltrial.engine.analysis import MeasurementWindow, Reading
from acceltrial.engine.capacity_gate import capacity_per_pod
from acceltrial.engine.capacity_sweep import SweepOutcome
from acceltrial.engine.costing import cost_figures, plan_cost_inputs
from acceltrial.engine.economics import Comparison, Throughput
from acceltrial.engine.measurement import (
    judge_measurement,
    measurement_requests,
    plan_measurement,
    preflight_window,
)
from acceltrial.engine.metric_check import answers, plan_check, unjudgeable
from acceltrial.engine.metrics import (
    COST_METRICS,
    REQUEST_SHAPE_METRICS,
    REQUESTS_METRIC,
    UTILIZATION_METRIC,
    MetricRequest,
    PresetMetric,
    Variant,
    offers,
)
from acceltrial.engine.ticks import Measurement
from acceltrial.handlers.metrics_source import metrics_source
from acceltrial.handlers.secrets import SecretProblem
from acceltrial.handlers.snapshot import TickSnapshot
from acceltrial.providers.metrics.port import MetricsSource, RequestError, collect

OPERATING_POINT_INTERVALS = 5
"""The baseline's production operating point (the capacity sweep's cost) is read over this
many analysis intervals, and at least a minute."""


@dataclass(frozen=True)
class Measured:
    """A measurement and the pods each variant had when it ran (before any action scaled them)."""

    measurement: Measurement
    pods: dict[Variant, int]


def measure(snapshot: TickSnapshot, status: TrialStatus, now: datetime) -> Measured:
    spec = snapshot.spec
    planned = plan_measurement(spec, status, now)
    targets = snapshot.targets
    pods: dict[Variant, int] = {v: t.replicas for v, t in targets.items()}
    requests = measurement_requests(spec.analysis, planned.requested)
    try:
        readings = collect(requests, _source(snapshot), targets, planned.window).readings
    except RequestError as error:
        return Measured(Measurement("Error", f"a query cannot be rendered: {error}"), pods)
    except SecretProblem as problem:  # changed since preflight: an errored measurement
        return Measured(Measurement("Error", f"analysis.prometheus: {problem}"), pods)
    judged = judge_measurement(spec, planned, readings, targets, snapshot.resources)
    return Measured(judged, pods)


def metric_problems(snapshot: TickSnapshot, now: datetime) -> list[str]:
    """Every criterion's query run for the baseline: what cannot be judged, and why."""
    analysis = snapshot.spec.analysis
    planned = plan_check(analysis, ("baseline",))
    window = preflight_window(analysis, now)
    try:
        readings = collect(planned, _source(snapshot), snapshot.targets, window).readings
    except RequestError as error:
        return [f"a query cannot be rendered: {error}"]
    except SecretProblem as problem:
        return [f"analysis.prometheus: {problem}"]
    return unjudgeable(answers(planned, readings))


def baseline_request_rate(snapshot: TickSnapshot, now: datetime) -> float | None:
    """The baseline's requests/s over the last interval, as the preset reads it; None when the
    preset has no such metric or the reading fails (the forecast is then left out)."""
    analysis = snapshot.spec.analysis
    if not offers(analysis.preset, "request_rate") or "baseline" not in snapshot.targets:
        return None
    request = MetricRequest("baseline-request-rate", "baseline", PresetMetric("request_rate"))
    rate = _one_value(snapshot, request, preflight_window(analysis, now))
    return rate if rate is not None and rate >= 0 else None


def _one_value(
    snapshot: TickSnapshot, request: MetricRequest, window: MeasurementWindow
) -> float | None:
    """The single finite value ``request`` reads over ``window``; None when it reads none (or
    the query fails)."""
    return _single(_readings(snapshot, [request], window).get(request.criterion))


def _readings(
    snapshot: TickSnapshot, requests: list[MetricRequest], window: MeasurementWindow
) -> dict[str, Reading]:
    """What ``requests`` read over ``window``, asked together, by criterion; none when the
    queries cannot be put or fail."""
    try:
        collected = collect(requests, _source(snapshot), snapshot.targets, window).readings
    except (RequestError, SecretProblem):
        return {}
    return {r.criterion: collected[r.criterion, r.variant] for r in requests
            if (r.criterion, r.variant) in collected}  # fmt: skip


def _single(reading: Reading | None) -> float | None:
    """The reading's one finite value; None when it has not exactly one, or failed."""
    if reading is None or reading.error is not None or len(reading.values) != 1:
        return None
    value = reading.values[0]
    return value if math.isfinite(value) else None


def _source(snapshot: TickSnapshot) -> MetricsSource:
    return metrics_source(snapshot.kube, snapshot.namespace, snapshot.spec.analysis)


def operating_window(snapshot: TickSnapshot, now: datetime) -> MeasurementWindow:
    """Production's operating point is read over a few intervals, not one: a steady state,
    and a read that one missed scrape cannot empty."""
    seconds = max(
        OPERATING_POINT_INTERVALS * duration_seconds(snapshot.spec.analysis.interval), 60.0
    )
    return MeasurementWindow(now - timedelta(seconds=seconds), now, seconds / 4)


@dataclass(frozen=True)
class BaselineShape:
    """The baseline's mean prompt and generated tokens per request, and how many requests
    they rest on (None when the preset cannot count them)."""

    prompt_tokens: int
    generated_tokens: int
    requests: int | None


def baseline_request_shape(snapshot: TickSnapshot, now: datetime) -> BaselineShape | str:
    """The baseline's mean prompt and generated tokens per request over its operating window,
    from its server's token histograms; why not, when they cannot be read."""
    analysis = snapshot.spec.analysis
    if not all(offers(analysis.preset, metric) for metric in REQUEST_SHAPE_METRICS):
        return f"analysis.preset {analysis.preset} reads no token histograms"
    window = operating_window(snapshot, now)
    # The generated tokens' reading also counts the requests behind the means.
    counted = PresetMetric(REQUESTS_METRIC) if offers(analysis.preset, REQUESTS_METRIC) else None
    prompt_metric, generated_metric = REQUEST_SHAPE_METRICS
    prompt_request = MetricRequest("baseline-prompt", "baseline", PresetMetric(prompt_metric))
    generated_request = MetricRequest(
        "baseline-generated", "baseline", PresetMetric(generated_metric), requests=counted
    )
    read = _readings(snapshot, [prompt_request, generated_request], window)
    prompt = _single(read.get(prompt_request.criterion))
    generated = _single(read.get(generated_request.criterion))
    if prompt is None or generated is None or prompt < 0.5 or generated < 0.5:
        return (
            "the baseline's mean tokens per request could not be read from its token "
            "histograms (no request finished, or the query failed)"
        )
    served = read[generated_request.criterion].requests
    requests = None
    if served is not None and math.isfinite(served) and served >= 0:
        requests = round(served)
    return BaselineShape(round(prompt), round(generated), requests)


def cost_at_capacity(
    snapshot: TickSnapshot, outcome: SweepOutcome, now: datetime
) -> Comparison | None:
    """Both variants' costs with the candidate at its measured capacity and the baseline at its
    replica's (swept beside it), or else at its production operating point (its throughput over
    utilization, over the last few intervals), when a cost criterion asks; None when none does
    or the baseline cannot be read."""
    spec = snapshot.spec
    if not any(c.metric in COST_METRICS for c in spec.analysis.criteria):
        return None
    requests = [r for r in plan_cost_inputs(spec.analysis) if r.variant == "baseline"]
    window = operating_window(snapshot, now)
    try:
        readings = collect(requests, _source(snapshot), snapshot.targets, window).readings
    except (RequestError, SecretProblem):
        return None
    swept = capacity_per_pod(spec, outcome)
    if swept is None:
        return None
    measured: dict[Variant, Throughput] = {"candidate": swept}
    beside = outcome.baseline
    alike = None if beside is None or beside.problem else capacity_per_pod(spec, beside)
    if alike is not None:
        measured["baseline"] = alike
    figures = cost_figures(readings, snapshot.targets, snapshot.resources, spec.economics,
                           production_from="baseline", measured=measured)  # fmt: skip
    return figures.comparison


def candidate_utilization(snapshot: TickSnapshot, began: float, ended: float) -> float | None:
    """The candidate's accelerator utilization averaged from ``began`` to ``ended`` (seconds
    since the epoch); None when it cannot be read."""
    request = MetricRequest(
        "sweep-utilization", "candidate", PresetMetric(UTILIZATION_METRIC), averaged=True
    )
    start, end = datetime.fromtimestamp(began, UTC), datetime.fromtimestamp(ended, UTC)
    busy = _one_value(
        snapshot, request, MeasurementWindow(start, end, max(1.0, (ended - began) / 4))
    )
    return busy if busy is not None and busy > 0 else None
