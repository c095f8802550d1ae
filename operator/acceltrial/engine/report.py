"""Building the decision report from what a tick saw and decided. Pure.

The report grows with the trial: each measurement adds a point to the timeline and refreshes the
side-by-side figures of a variant that had traffic; the rest (decision, economics, the controlled
test) is rewritten from the status each time, so the last write is the whole story. The timeline
stays bounded (:func:`thinned`); what the report says of the whole trial (measurements taken,
weights reached, the candidate's highest error ratio) is carried from the previous report, not
counted from the points left.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from acceltrial.api.report import (
    TIMELINE_LIMIT,
    Compatibility,
    ControlledTest,
    CriterionLimit,
    CriterionSummary,
    Point,
    QualityLimit,
    ReadingQuery,
    Report,
    VariantFigures,
    Variants,
    Workload,
)
from acceltrial.api.spec import Criterion, TrialSpec
from acceltrial.api.spec.quality import QualityCriterion
from acceltrial.api.status import TERMINAL_PHASES, CriterionResult, TrialStatus
from acceltrial.engine.candidate import TrialRef
from acceltrial.engine.compile_gate import with_compile_note
from acceltrial.engine.economics import migration_total
from acceltrial.engine.evidence import need_of
from acceltrial.engine.metrics import Variant
from acceltrial.engine.report_evidence import evidence_rows, judged_requests
from acceltrial.engine.ticks import Measurement

_FIGURES = {
    "request_rate": "requests_per_second",
    "token_rate": "tokens_per_second",
    "latency_mean": "latency_mean",
    "latency_p50": "latency_p50",
    "latency_p99": "latency_p99",
    "error_ratio": "error_ratio",
    "accelerator_utilization": "utilization",
}


@dataclass(frozen=True)
class ReportInputs:
    """Everything one tick knows that the report shows."""

    spec: TrialSpec
    status: TrialStatus
    """The status after this tick."""
    trial: TrialRef
    now: datetime
    measurement: Measurement | None = None
    replicas: Mapping[Variant, int] | None = None
    price_sources: Mapping[Variant, str] | None = None
    gitops: dict[str, Any] | None = None


def report_due(before: TrialStatus, after: TrialStatus, measured: bool) -> bool:
    """Whether a tick rewrites the report: after each measurement and each phase change."""
    return measured or after.phase != before.phase


def gitops_due(status: TrialStatus) -> bool:
    """Whether the report lists what to commit: once promoted, so Git can match the cluster."""
    return status.phase == "Promoted"


def upload_due(status: TrialStatus) -> bool:
    """Whether the report goes to S3: once the trial has ended, so the upload is the whole
    story, written once rather than on every tick."""
    return status.phase in TERMINAL_PHASES


def update_report(previous: Report | None, inputs: ReportInputs) -> Report:
    """The report after this tick, from the previous one (None for the first)."""
    spec, status = inputs.spec, inputs.status
    timeline = list(previous.timeline) if previous else []
    point = _point(inputs)
    if point is not None:
        timeline = thinned([*timeline, point], TIMELINE_LIMIT)
    variants = _variants(previous, inputs)
    economics = spec.economics
    return Report(
        trial=inputs.trial.name,
        namespace=inputs.trial.namespace,
        generated_at=inputs.now,
        phase=status.phase,
        decision=status.decision,
        workload=_workload(inputs) or (previous.workload if previous else Workload()),
        variants=variants,
        economics=status.economics,
        target_utilization=economics.target_utilization,
        migration_cost=migration_total(economics.migration_cost),
        compatibility=with_compile_note(
            _compatibility(spec, status, point, previous), status.compile
        ),
        compile=status.compile,
        quality=status.quality,
        quality_limits=_quality_limits(spec),
        controlled_test=_controlled_test(spec, status, point, previous),
        evidence=evidence_rows(spec, status.evidence or []),
        timeline=timeline,
        queries=_queries(previous, inputs, point),
        capacity=status.capacity,
        capacity_test=status.capacity_test,
        gitops=inputs.gitops if gitops_due(status) else None,
    )


RECENT_POINTS = 60
"""The newest points a thinned timeline keeps as measured."""


def thinned(timeline: Sequence[Point], limit: int) -> list[Point]:
    """At most ``limit`` points: past it, every other point older than the newest
    :data:`RECENT_POINTS` goes (the first one stays), as often as needed, so the timeline spans
    the whole trial with the latest minutes as measured."""
    points = list(timeline)
    recent = min(RECENT_POINTS, limit // 2)
    while len(points) > limit:
        older, newest = points[: len(points) - recent], points[len(points) - recent :]
        if len(older) < 2:
            return points[len(points) - limit :]
        points = [*older[::2], *newest]
    return points


def _point(inputs: ReportInputs) -> Point | None:
    measurement = inputs.measurement
    if measurement is None or measurement.observed is None:
        return None
    first = measurement.results[0] if measurement.results else None
    step = first.step if first else inputs.status.step or 0
    weight = first.weight if first else inputs.status.canary_weight or 0
    asked = first.requested_weight if first else inputs.status.requested_weight
    values = {v: dict(measurement.observed.get(v, {})) for v in ("baseline", "candidate")}
    economics = measurement.economics
    for variant in ("baseline", "candidate"):
        figures = getattr(economics, variant, None) if economics else None
        values[variant]["cost_per_million_tokens"] = (
            figures.projected_cost_per_million_tokens if figures else None
        )
        values[variant]["cost_per_thousand_requests"] = (
            figures.projected_cost_per_thousand_requests if figures else None
        )
    return Point(
        at=inputs.now,
        step=step,
        weight=weight,
        requested_weight=asked,
        outcome=measurement.outcome,
        reason=measurement.reason[:1024],
        baseline=values["baseline"],
        candidate=values["candidate"],
    )


def _queries(
    previous: Report | None, inputs: ReportInputs, point: Point | None
) -> list[ReadingQuery]:
    """Each reading's query as last asked: this measurement's replace the earlier ones."""
    kept = {(q.reading, q.variant): q for q in (previous.queries if previous else [])}
    asked = inputs.measurement.queries if inputs.measurement else None
    if point is not None and asked:
        # During the bake the baseline is read over its last window of traffic, which ends
        # when the bake began.
        bake_began = inputs.status.step_started_at if point.weight == 100 else None
        for reading, per_variant in asked.items():
            for variant, query in per_variant.items():
                before = bake_began if variant == "baseline" else None
                kept[(reading, variant)] = ReadingQuery(
                    reading=reading, variant=variant, query=query,
                    measured_at=before or point.at, step=point.step, weight=point.weight,
                )  # fmt: skip
    return sorted(kept.values(), key=lambda q: (q.reading.startswith("economics:"), q.reading,
                                                q.variant))  # fmt: skip


def _variants(previous: Report | None, inputs: ReportInputs) -> Variants:
    spec = inputs.spec
    measurement = inputs.measurement
    figures: dict[Variant, VariantFigures] = {}
    instances: dict[Variant, str] = {
        "baseline": spec.baseline.instance_type,
        "candidate": spec.candidate.instance_type,
    }
    first = measurement.results[0] if measurement and measurement.results else None
    for variant, instance in instances.items():
        before = getattr(previous.variants, variant) if previous else None
        current = before or VariantFigures(instance_type=instance)
        observed = (measurement.observed or {}).get(variant) if measurement else None
        # At 100% the baseline serves nothing: its figures stay those of its last window with
        # traffic, and say so.
        serving = not (variant == "baseline" and first is not None and first.weight == 100)
        refreshed = observed is not None and bool(observed.get("request_rate")) and serving
        if observed is not None and refreshed:
            current = VariantFigures(
                instance_type=instance,
                replicas=current.replicas,
                price_source=current.price_source,
                measured_at=inputs.now,
                step=first.step if first else inputs.status.step,
                weight=first.weight if first else inputs.status.canary_weight,
                requested_weight=first.requested_weight
                if first
                else inputs.status.requested_weight,
                **{field: observed.get(metric) for metric, field in _FIGURES.items()},
            )
        update: dict[str, Any] = {}
        # Replicas go with the figures they served: a variant without traffic (the baseline
        # handed over after promotion) keeps the count its figures were measured with.
        if inputs.replicas is not None and (refreshed or current.replicas is None):
            update["replicas"] = inputs.replicas.get(variant, current.replicas)
        if inputs.price_sources is not None:
            update["price_source"] = inputs.price_sources.get(variant)
        figures[variant] = current.model_copy(update=update)
    return Variants(baseline=figures["baseline"], candidate=figures["candidate"])


_BOTH: Sequence[Variant] = ("baseline", "candidate")


def _workload(inputs: ReportInputs) -> Workload | None:
    measurement = inputs.measurement
    if measurement is None or measurement.observed is None:
        return None
    weight = measurement.results[0].weight if measurement.results else None
    # At 100% the baseline's figures are from before the bake: count the candidate only. At 0%
    # (a mirror step) the candidate serves copies, not users: count the baseline only.
    serving: Sequence[Variant] = (
        ("candidate",) if weight == 100 else ("baseline",) if weight == 0 else _BOTH
    )
    requests = tokens = concurrency = 0.0
    for variant in serving:
        observed = measurement.observed.get(variant) or {}
        rate = observed.get("request_rate") or 0.0
        requests += rate
        tokens += observed.get("token_rate") or 0.0
        concurrency += rate * (observed.get("latency_mean") or 0.0)
    if requests == 0:
        return None
    first = measurement.results[0] if measurement.results else None
    return Workload(
        requests_per_second=requests,
        tokens_per_second=tokens or None,
        tokens_per_request=tokens / requests if tokens else None,
        concurrency=concurrency or None,
        measured_at=inputs.now,
        step=first.step if first else inputs.status.step,
        weight=weight if weight is not None else inputs.status.canary_weight,
    )


def _latest(results: Sequence[CriterionResult]) -> dict[str, CriterionResult]:
    latest: dict[str, CriterionResult] = {}
    for result in results:
        latest[result.criterion] = result
    return latest


def judged(criterion: Criterion) -> str:
    """What a criterion compares, with its limit, in words."""
    metric = criterion.metric or "custom query"

    def bounds(low: float | None, high: float | None) -> str:
        parts = ([f">= {low:g}"] if low is not None else []) + (
            [f"<= {high:g}"] if high is not None else []
        )
        return " and ".join(parts)

    if criterion.absolute is not None:
        return f"candidate {metric} {bounds(criterion.absolute.min, criterion.absolute.max)}"
    if criterion.relative is not None:
        limits = bounds(criterion.relative.min, criterion.relative.max)
        return f"candidate / baseline {metric} {limits}"
    test = criterion.statistical
    assert test is not None
    return (
        f"{metric}: no significant {test.direction} beyond {test.allowed_change:.0%} "
        f"(Mann-Whitney, {test.confidence:.0%} confidence)"
    )


def _limit(criterion: Criterion | QualityCriterion) -> CriterionLimit | None:
    if criterion.absolute is not None:
        absolute = criterion.absolute
        return CriterionLimit(kind="absolute", min=absolute.min, max=absolute.max)
    if criterion.relative is not None:
        relative = criterion.relative
        return CriterionLimit(kind="relative", min=relative.min, max=relative.max)
    return None


def _quality_limits(spec: TrialSpec) -> list[QualityLimit]:
    """Each quality criterion's limit: status.quality records the figures only."""
    criteria = spec.quality.criteria if spec.quality else []
    return [QualityLimit(name=c.name, limit=limit) for c in criteria if (limit := _limit(c))]


def _controlled_test(
    spec: TrialSpec, status: TrialStatus, point: Point | None, previous: Report | None
) -> ControlledTest:
    latest = _latest(status.analysis or [])
    criteria = [
        CriterionSummary(
            name=c.name,
            judged=judged(c),
            metric=c.metric,
            limit=_limit(c),
            from_weight=c.from_weight,
            requests_needed=need.requests if (need := need_of(c)) else None,
            requests_judged=judged_requests(c, status.evidence or []),
            verdict=latest[c.name].verdict if c.name in latest else None,
            reason=latest[c.name].reason if c.name in latest else None,
        )
        for c in spec.analysis.criteria
    ]
    before = previous.controlled_test if previous else ControlledTest()
    weights, mirrors = set(before.weights_reached), set(before.mirrors_reached)
    if point is not None and _shadow(spec, point.step):
        mirrors.add(spec.steps[point.step - 1].mirror or 0)
    elif point is not None:
        weights.add(point.weight)
    return ControlledTest(
        criteria_hash=status.criteria_hash,
        started_at=status.started_at,
        criteria=criteria,
        planned_mirrors=[s.mirror for s in spec.steps if s.mirror],
        planned_weights=[s.weight for s in spec.steps if s.weight],
        weights_reached=sorted(weights),
        mirrors_reached=sorted(m for m in mirrors if m),
        measurements=before.measurements + (point is not None),
        rollback_ready=status.original is not None,
    )


def _shadow(spec: TrialSpec, step: int) -> bool:
    """Whether ``step`` (1-based; 0 is the bake) is a shadow step: users see no candidate."""
    return 1 <= step <= len(spec.steps) and not spec.steps[step - 1].weight


def _compatibility(
    spec: TrialSpec, status: TrialStatus, point: Point | None, previous: Report | None
) -> Compatibility:
    before = previous.compatibility if previous else Compatibility()
    served = point is not None and (point.candidate.get("request_rate") or 0) > 0
    deployed = before.deployed or served
    errors = [before.highest_error_ratio]
    if point is not None and served:
        errors.append(point.candidate.get("error_ratio") or 0)
    worst = max((e for e in errors if e is not None), default=None)
    error_criteria = {c.name for c in spec.analysis.criteria if c.metric == "error_ratio"}
    failed = [
        r for r in status.analysis or [] if r.criterion in error_criteria and r.verdict == "Fail"
    ]
    notes = []
    if not deployed:
        notes.append("the candidate served no measured request")
    if failed:
        notes.append(f"error criterion failed: {failed[-1].reason}")
    if worst is not None:
        notes.append(f"highest candidate error ratio measured: {worst:.2%}")
    return Compatibility(
        deployed=deployed, healthy=deployed and not failed, highest_error_ratio=worst, notes=notes
    )
