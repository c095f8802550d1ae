"""One measurement, planned and judged: the rules of a measured tick, fed plain values.

It owns what the operator decides about a measurement: the window (at 100% during the bake the
baseline is compared over its last window of traffic), the step it belongs to (0 during the
bake), which readings it takes, and how each criterion is judged (a cost criterion against the cost
figures, any other criterion on its two readings). The handler gathers the targets and readings;
it decides none of this.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from acceltrial.api.durations import duration_seconds
from acceltrial.api.spec import AnalysisSpec, TrialSpec
from acceltrial.api.status import (
    BaselineCostFromSteps,
    CriterionResult,
    SampleCounts,
    TrialStatus,
)
from acceltrial.engine.analysis import (
    Judgement,
    MeasurementWindow,
    Reading,
    applicable,
    judge,
    plan,
    round_outcome,
)
from acceltrial.engine.costing import (
    CostWindow,
    VariantResources,
    cost_figures,
    economics_status,
    judge_cost_criterion,
    observed_values,
    plan_cost_inputs,
)
from acceltrial.engine.lifecycle import Measurement, mirror_at, requested_weight
from acceltrial.engine.metrics import COST_METRICS, MetricRequest, Variant, VariantTarget

Readings = Mapping[tuple[str, Variant], Reading]


@dataclass(frozen=True)
class MeasurementPlan:
    """When and at what a measurement looks, derived from the status alone."""

    window: MeasurementWindow
    cost_window: CostWindow
    weight: int
    """The candidate's share of traffic the routing gives (``status.canaryWeight``)."""
    requested: int
    """The weight the step asked for: which criteria apply (``fromWeight``) is in its terms."""
    step: int
    """The step its results belong to: 0 during the bake after promotion."""
    baking: bool
    mirror: int
    """The percentage of requests copied to the candidate (a shadow step), 0 if none: all
    production traffic is then the baseline's."""
    from_steps: BaselineCostFromSteps | None
    """The baseline's cost figures kept from the steps, compared with during the bake."""


def plan_measurement(spec: TrialSpec, status: TrialStatus, now: datetime) -> MeasurementPlan:
    """The windows of a measurement taken ``now``."""
    weight = status.canary_weight or 0
    requested = requested_weight(status)
    interval = duration_seconds(spec.analysis.interval)
    start = status.step_started_at or now - timedelta(seconds=interval)
    baking = status.phase == "BakingIn"
    # At 100% the baseline serves nothing: compare with its last window of traffic.
    baseline_end = status.step_started_at if baking else None
    return MeasurementPlan(
        window=MeasurementWindow(start, now, max(1.0, interval / 4), baseline_end),
        cost_window=CostWindow(now, interval, requested, status.step_started_at, baking),
        weight=weight,
        requested=requested,
        step=0 if baking else status.step or 0,
        baking=baking,
        mirror=mirror_at(spec, status),
        from_steps=status.economics.baseline_from_steps if status.economics else None,
    )


def _production_from(planned: MeasurementPlan) -> Literal["both", "candidate", "baseline"]:
    """Who serves the users: during the bake the candidate alone; while requests are only
    mirrored, the baseline alone (the candidate's copies are no production traffic)."""
    if planned.baking:
        return "candidate"
    return "baseline" if planned.mirror else "both"


def preflight_window(analysis: AnalysisSpec, now: datetime) -> MeasurementWindow:
    """The window preflight runs each criterion's query over: the last interval."""
    interval = timedelta(seconds=duration_seconds(analysis.interval))
    return MeasurementWindow(now - interval, now, max(1.0, interval.total_seconds() / 4))


def measurement_requests(analysis: AnalysisSpec, weight: int) -> list[MetricRequest]:
    """Every reading of a measurement: the criteria at this weight, then the cost inputs."""
    return plan(analysis, weight) + plan_cost_inputs(analysis)


def judge_measurement(
    spec: TrialSpec,
    planned: MeasurementPlan,
    readings: Readings,
    targets: Mapping[Variant, VariantTarget],
    resources: Mapping[Variant, VariantResources],
) -> Measurement:
    """The measurement's outcome, per-criterion results, cost comparison and observed figures."""
    costs = cost_figures(
        readings,
        targets,
        resources,
        spec.economics,
        production_from=_production_from(planned),
    )
    judgements = [
        judge_cost_criterion(c, readings, costs, planned.cost_window, planned.from_steps)
        if c.metric in COST_METRICS
        else judge(
            c,
            readings.get((c.name, "baseline")),
            readings.get((c.name, "candidate")),
            spec.analysis,
        )
        for c in applicable(spec.analysis, planned.requested)
    ]
    outcome, reason = round_outcome(judgements)
    now = planned.window.end
    results = tuple(_result(j, planned, now) for j in judgements)
    production = costs.comparison.production
    measured = production.requests_per_second or production.tokens_per_second
    # Without any measured traffic (Prometheus down, say) the last figures stay.
    economics = (
        economics_status(costs, readings, planned.cost_window, planned.from_steps)
        if measured
        else None
    )
    return Measurement(outcome, reason, results, economics, observed_values(readings))


def _result(judgement: Judgement, planned: MeasurementPlan, now: datetime) -> CriterionResult:
    return CriterionResult(
        criterion=judgement.criterion,
        step=planned.step,
        weight=planned.weight,
        requested_weight=planned.requested,
        verdict=judgement.verdict,
        baseline=judgement.baseline,
        candidate=judgement.candidate,
        ratio=judgement.ratio,
        samples=SampleCounts(
            baseline=judgement.baseline_samples, candidate=judgement.candidate_samples
        ),
        reason=judgement.reason[:1024],
        at=now,
    )
