"""Taking a measurement: the snapshot's targets, the trial's metrics source, the engine's plan.

The engine (engine/measurement.py) plans the windows and queries and judges the readings; this
module only gathers what it needs (pods, prices, readings) and runs the queries.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from acceltrial.api.status import TrialStatus
from acceltrial.engine.lifecycle import Measurement
from acceltrial.engine.measurement import (
    judge_measurement,
    measurement_queries,
    plan_measurement,
    preflight_window,
)
from acceltrial.engine.metric_check import answers, plan_check, unjudgeable
from acceltrial.engine.queries import TemplateError, Variant
from acceltrial.handlers.metrics_source import metrics_source
from acceltrial.handlers.snapshot import TickSnapshot
from acceltrial.providers.metrics.port import MetricsSource, collect


@dataclass(frozen=True)
class Measured:
    """A measurement and the pods each variant had when it ran (before any action scaled them)."""

    measurement: Measurement
    pods: dict[Variant, int]


def measure(snapshot: TickSnapshot, status: TrialStatus, now: datetime) -> Measured:
    spec = snapshot.spec
    planned = plan_measurement(spec, status, now)
    targets = snapshot.targets
    pods: dict[Variant, int] = {v: len(t.pods) for v, t in targets.items()}
    try:
        queries = measurement_queries(spec.analysis, targets, planned.weight)
    except TemplateError as error:
        return Measured(Measurement("Error", f"a query cannot be rendered: {error}"), pods)
    readings = collect(queries, _source(snapshot), planned.window).readings
    judged = judge_measurement(spec, planned, readings, targets, snapshot.resources)
    return Measured(judged, pods)


def metric_problems(snapshot: TickSnapshot, now: datetime) -> list[str]:
    """Every criterion's query run for the baseline: what cannot be judged, and why."""
    analysis = snapshot.spec.analysis
    try:
        planned = plan_check(analysis, snapshot.targets, ("baseline",))
    except TemplateError as error:
        return [f"a query cannot be rendered: {error}"]
    readings = collect(planned, _source(snapshot), preflight_window(analysis, now)).readings
    return unjudgeable(answers(planned, readings))


def _source(snapshot: TickSnapshot) -> MetricsSource:
    return metrics_source(snapshot.kube, snapshot.namespace, snapshot.spec.analysis.prometheus)
