"""One measurement, planned and judged: the rules of a measured tick, fed plain values.

It owns what the operator decides about a measurement: the window (at 100% during the bake the
baseline is compared over its last window of traffic), the step it belongs to (0 during the
bake), which readings it takes, and how each criterion is judged (a cost criterion against the cost
figures, any other criterion on its two readings). The handler gathers the targets and readings;
it decides none of this.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Literal

from acceltrial.api.capacity_test import VariantCapacityTest
from acceltrial.api.durations import duration_seconds
from acceltrial.api.spec import AnalysisSpec, TrialSpec
from acceltrial.api.status import (
    BaselineCostFromSteps,
    CriterionEvidence,
    CriterionResult,
    RequestCounts,
    SampleCounts,
    TrialStatus,
)
from acceltrial.engine.analysis import (
    Judgement,
    MeasurementWindow,
    Reading,
    applicable,
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
    requests_served,
)
from acceltrial.engine.economics import Throughput
from acceltrial.engine.metrics import COST_METRICS, MetricRequest, Variant, VariantTarget
from acceltrial.engine.schedule import mirror_at, requested_weight
from acceltrial.engine.tail import tail_key, tail_requests
from acceltrial.engine.ticks import Measurement
from acceltrial.engine.unserved import expected_requests, weigh_unserved
from acceltrial.engine.weighing import judge_window, weigh

Readings = Mapping[tuple[str, Variant], Reading]

BASELINE_REACH_BACK = (1, 2, 3)
"""During the bake, how many intervals before its start the baseline's reading may reach back,
in turn, where the window ending at its start has no data."""


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
    evidence: tuple[CriterionEvidence, ...] = ()
    """What the criteria were judged on so far in this step at this weight: a thin window is
    judged on them pooled with it."""
    measured_capacity: Mapping[Variant, Throughput] = field(default_factory=dict)
    """What one replica carries at the SLO, as the capacity sweep measured it (by variant)."""


def plan_measurement(spec: TrialSpec, status: TrialStatus, now: datetime) -> MeasurementPlan:
    """The windows of a measurement taken ``now``."""
    weight = status.canary_weight or 0
    requested = requested_weight(status)
    interval = duration_seconds(spec.analysis.interval)
    start = status.step_started_at or now - timedelta(seconds=interval)
    # At 100% (baking, or paused in the bake) the candidate alone serves users.
    baking = status.phase == "BakingIn" or (
        status.phase == "Paused" and weight == 100 and status.promotion is not None
    )
    # At 100% the baseline serves nothing: compare with its last window of traffic, or the
    # one before it where a scrape missed that.
    baseline_end = status.step_started_at if baking else None
    earlier = (
        tuple(baseline_end - timedelta(seconds=k * interval) for k in BASELINE_REACH_BACK)
        if baseline_end is not None
        else ()
    )
    step = 0 if baking else status.step or 0
    return MeasurementPlan(
        window=MeasurementWindow(start, now, max(1.0, interval / 4), baseline_end, earlier),
        cost_window=CostWindow(now, interval, requested, status.step_started_at, baking),
        weight=weight,
        requested=requested,
        step=step,
        baking=baking,
        mirror=mirror_at(spec, status),
        from_steps=status.economics.baseline_from_steps if status.economics else None,
        evidence=tuple(
            row for row in status.evidence or [] if (row.step, row.weight) == (step, weight)
        ),
        measured_capacity=measured_capacity(status),
    )


def measured_capacity(status: TrialStatus) -> dict[Variant, Throughput]:
    """Each swept variant's capacity per replica at the SLO (``status.capacityTest``): the
    candidate's, and the baseline's when its replica's sweep stands for it."""
    swept = status.capacity_test
    if swept is None:
        return {}
    found: dict[Variant, VariantCapacityTest | None] = {"candidate": swept.candidate}
    if swept.baseline_from == "sweep":
        found["baseline"] = swept.baseline
    return {
        variant: Throughput(result.rps_per_pod, result.tokens_per_second_per_pod)
        for variant, result in found.items()
        if result is not None and result.rps_per_pod
    }


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
    """Every reading of a measurement: the criteria at this weight (and the latency counters a
    fixed-mode quantile is told from chance with), then the cost inputs."""
    tails = [t for c in applicable(analysis, weight) for t in tail_requests(analysis, c)]
    return plan(analysis, weight) + tails + plan_cost_inputs(analysis)


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
        measured=planned.measured_capacity,
    )

    def so_far(criterion: str) -> list[CriterionEvidence]:
        return [row for row in planned.evidence if row.criterion == criterion]

    judgements = [
        weigh(
            _with_baseline_requests(
                judge_cost_criterion(c, readings, costs, planned.cost_window, planned.from_steps),
                readings,
            ),
            c,
            requests_served(readings, "candidate"),
            spec.analysis.alpha,
            so_far(c.name),
        )
        if c.metric in COST_METRICS
        else judge_window(
            c,
            readings.get((c.name, "baseline")),
            readings.get((c.name, "candidate")),
            spec.analysis,
            so_far(c.name),
            slower=readings.get((tail_key(c.name), "candidate")),
            baseline_slower=readings.get((tail_key(c.name), "baseline")),
        )
        for c in applicable(spec.analysis, planned.requested)
    ]
    judgements = [_unserved(j, planned, readings, spec.analysis.alpha) for j in judgements]
    outcome, reason = round_outcome(judgements)
    now = planned.window.end
    results = tuple(_result(j, planned, now) for j in judgements)
    production = costs.comparison.production
    measured = production.requests_per_second or production.tokens_per_second
    # Without any measured traffic (Prometheus down, say) the last figures stay.
    economics = (
        economics_status(costs, readings, planned.cost_window, planned.from_steps).model_copy(
            update={"measured_at": now, "step": planned.step, "weight": planned.weight}
        )
        if measured
        else None
    )
    return Measurement(
        outcome, reason, results, economics, observed_values(readings), _queries(readings)
    )


def _queries(readings: Readings) -> dict[str, dict[Variant, str]]:
    """The query each reading used (as the source renders it), by reading and variant."""
    asked: dict[str, dict[Variant, str]] = {}
    for (name, variant), reading in readings.items():
        if reading.asked:
            asked.setdefault(name, {})[variant] = reading.asked
    return asked


def _unserved(
    judgement: Judgement, planned: MeasurementPlan, readings: Readings, alpha: float
) -> Judgement:
    """A criterion the candidate served no request of, thin or inconclusive by whether its
    share should have brought some beside the baseline's requests over the same span (those
    the criterion counted, else the window's, engine/unserved.py)."""
    if not judgement.unserved:
        return judgement
    beside = judgement.baseline_requests
    if beside is None:
        beside = requests_served(readings, "baseline")
    expected = expected_requests(beside, planned.weight, planned.mirror)
    share = (
        f"{planned.mirror}% of requests mirrored"
        if planned.mirror and not planned.weight
        else f"{planned.weight}% share"
    )
    return weigh_unserved(judgement, expected, share, alpha)


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
        requests=_request_counts(judgement),
        thin=judgement.thin,
        reason=judgement.reason[:1024],
        at=now,
    )


def _with_baseline_requests(judgement: Judgement, readings: Readings) -> Judgement:
    """A cost judgement with the baseline's requests behind its figure, so thin windows of a
    relative cost criterion can be pooled like any other."""
    if judgement.baseline is None:
        return judgement
    return replace(judgement, baseline_requests=requests_served(readings, "baseline"))


def _request_counts(judgement: Judgement) -> RequestCounts | None:
    if judgement.candidate_requests is None:
        return None
    return RequestCounts(
        candidate=judgement.candidate_requests,
        baseline=judgement.baseline_requests,
        candidate_errors=judgement.candidate_errors,
        spans_step=judgement.spans_step,
    )
