"""Taking a measurement: the snapshot's targets, the trial's metrics source, the engine's plan.

The engine (engine/measurement.py) plans the windows and requests and judges the readings; this
module only gathers what it needs (pods, prices, readings) and runs the requests.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from acceltrial.api.status import TrialStatus
from acceltrial.engine.measurement import (
    judge_measurement,
    measurement_requests,
    plan_measurement,
    preflight_window,
)
from acceltrial.engine.metric_check import answers, plan_check, unjudgeable
from acceltrial.engine.metrics import MetricRequest, PresetMetric, Variant, offers
from acceltrial.engine.ticks import Measurement
from acceltrial.handlers.metrics_source import metrics_source
from acceltrial.handlers.secrets import SecretProblem
from acceltrial.handlers.snapshot import TickSnapshot
from acceltrial.providers.metrics.port import MetricsSource, RequestError, collect


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
    try:
        reading = collect(
            [request], _source(snapshot), snapshot.targets, preflight_window(analysis, now)
        ).readings.get(("baseline-request-rate", "baseline"))
    except (RequestError, SecretProblem):
        return None
    if reading is None or reading.error is not None or len(reading.values) != 1:
        return None
    rate = reading.values[0]
    return rate if math.isfinite(rate) and rate >= 0 else None


def _source(snapshot: TickSnapshot) -> MetricsSource:
    return metrics_source(snapshot.kube, snapshot.namespace, snapshot.spec.analysis)
