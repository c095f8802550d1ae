"""The decision report: what a trial measured and decided, as the JSON kept in the
``<trial>-report`` ConfigMap (key ``report.json``) and read by ``acceltrial report``.

It answers the evaluation checklist with measured numbers: the workload, cost per useful result,
whether the candidate ran, stayed healthy and answered like the baseline (the quality check),
latency and throughput side by side, utilization of both accelerators, the migration's payback,
and the controlled test itself (criteria fixed before start, steps taken, rollback readiness). A
promoted trial adds the manifests a GitOps user should commit so that Git matches the cluster.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Literal

from pydantic import Field, ValidationError

from acceltrial.api.base import ApiModel
from acceltrial.api.capacity import CapacityStatus
from acceltrial.api.capacity_test import CapacityTestStatus
from acceltrial.api.neuron import CompileStatus
from acceltrial.api.quality import QualityStatus
from acceltrial.api.status import Decision, EconomicsStatus, Phase

REPORT_KEY = "report.json"
TIMELINE_LIMIT = 720
"""Points the timeline holds at most (12 h at a 1 m interval, 2 h at 10 s). Past it the older
points are thinned, the newest kept as measured: the chart still spans the whole trial
(engine/report.py ``thinned``)."""


def report_name(trial: str) -> str:
    """Name of the ConfigMap holding a trial's report."""
    return f"{trial}-report"[:253]


class VariantFigures(ApiModel):
    """One variant as last measured with traffic, and in which measurement window."""

    instance_type: str
    replicas: int | None = None
    requests_per_second: float | None = None
    tokens_per_second: float | None = None
    latency_mean: float | None = None
    latency_p50: float | None = None
    latency_p99: float | None = None
    error_ratio: float | None = None
    utilization: float | None = None
    price_source: str | None = None
    """Where the instance price comes from, or why it is unknown."""
    measured_at: datetime | None = None
    """End of the measurement window these figures come from (None: never measured with
    traffic)."""
    step: int | None = None
    """The step of that measurement; 0 for the bake."""
    weight: int | None = None
    """The candidate's share of traffic (%) during that measurement."""
    requested_weight: int | None = None
    """The weight the step asked for then, when known."""


class Variants(ApiModel):
    baseline: VariantFigures
    candidate: VariantFigures


class Workload(ApiModel):
    """The traffic the trial saw, both variants together, at the last measurement."""

    requests_per_second: float | None = None
    tokens_per_second: float | None = None
    tokens_per_request: float | None = None
    concurrency: float | None = None
    """Requests in flight (Little's law: request rate x mean latency)."""
    measured_at: datetime | None = None
    """End of the measurement window these figures come from."""
    step: int | None = None
    """The step of that measurement; 0 for the bake."""
    weight: int | None = None
    """The candidate's share of traffic (%) during that measurement."""


class Point(ApiModel):
    """One measurement, for the charts."""

    at: datetime
    step: int
    weight: int
    """The candidate's share of traffic (%) as the routing gave it."""
    requested_weight: int | None = None
    """The weight the step asked for, when known (differs with the ``replicas`` router)."""
    outcome: Literal["Pass", "Fail", "Inconclusive", "Error", "Thin"]
    reason: str | None = None
    """Why this outcome: the worst criterion and its numbers."""
    baseline: dict[str, float | None] = Field(default_factory=dict)
    candidate: dict[str, float | None] = Field(default_factory=dict)
    """Observed figures by metric name (latency_p99, request_rate, ...), and the projected
    cost_per_million_tokens / cost_per_thousand_requests."""


class CriterionLimit(ApiModel):
    """A criterion's bounds, for the charts: on the candidate's value (absolute) or on its ratio
    to the baseline's (relative)."""

    kind: Literal["absolute", "relative"]
    min: float | None = None
    max: float | None = None


class QualityLimit(ApiModel):
    """A quality criterion's limit as ``spec.quality`` sets it (``status.quality`` carries the
    figures, not the limits they were judged against)."""

    name: str
    limit: CriterionLimit


class CriterionSummary(ApiModel):
    name: str
    judged: str
    """What is compared with what limit, in words."""
    metric: str | None = None
    """The metric judged (None for a custom query)."""
    limit: CriterionLimit | None = None
    """Its bounds; None for a statistical criterion (its test has no fixed bound)."""
    from_weight: int = 0
    requests_needed: int | None = None
    """The candidate's requests the criterion needs before a promotion (None: not counted)."""
    requests_judged: float | None = None
    """The candidate's requests it was judged on over the whole trial."""
    verdict: str | None = None
    """The latest verdict."""
    reason: str | None = None


class EvidenceRow(ApiModel):
    """The requests one criterion was judged on in one step, and how sure its figure is."""

    criterion: str
    step: int
    """The step (1-based); 0 for the bake."""
    weight: int
    """The candidate's share of traffic in that step."""
    windows: int = 0
    """Measurements of the criterion in the step."""
    thin_windows: int = 0
    """Of them, windows on fewer requests than the criterion needs (neither pass nor fail)."""
    candidate_requests: float = 0
    baseline_requests: float | None = None
    how_sure: str = ""
    """In words: an error ratio's exact interval, a rate's, or what a quantile rests on."""


class ControlledTest(ApiModel):
    criteria_hash: str | None = None
    """Hash of spec.steps and spec.analysis, frozen when the trial started."""
    started_at: datetime | None = None
    criteria: list[CriterionSummary] = Field(default_factory=list)
    planned_mirrors: list[int] = Field(default_factory=list)
    """The shadow steps' mirror percentages, before any user was served by the candidate."""
    planned_weights: list[int] = Field(default_factory=list)
    weights_reached: list[int] = Field(default_factory=list)
    """The candidate's shares of users' requests measured, shadow steps not counted."""
    mirrors_reached: list[int] = Field(default_factory=list)
    """The shadow steps' mirror percentages measured."""
    measurements: int = 0
    """Measurements taken (the timeline may hold fewer points: see ``TIMELINE_LIMIT``)."""
    rollback_ready: bool = False
    """The routing as found was recorded before the first change, so it can be restored."""


class ReadingQuery(ApiModel):
    """The query one reading used, as last asked: it gives the same answer alone."""

    reading: str
    """The criterion's name, ``NAME:slower`` for the latency counters a fixed-mode quantile
    criterion is told from chance with, or ``economics:`` and the cost model's input
    (``request_rate``...)."""
    variant: Literal["baseline", "candidate"]
    query: str
    """What the metrics source was asked, in its own language (PromQL)."""
    measured_at: datetime
    """End of the measurement window it was last asked for."""
    step: int
    """The step of that measurement; 0 for the bake."""
    weight: int
    """The candidate's share of traffic (%) during that measurement."""


class Compatibility(ApiModel):
    deployed: bool = False
    """The candidate's pods ran and served traffic."""
    healthy: bool = False
    """It stayed within the error criteria whenever it was judged (never for a candidate that
    served no measured request: the report then gives no health verdict)."""
    highest_error_ratio: float | None = None
    """The candidate's highest error ratio in any measurement with traffic."""
    notes: list[str] = Field(default_factory=list)


class Report(ApiModel):
    """The whole report."""

    trial: str
    namespace: str
    generated_at: datetime
    phase: Phase | None = None
    decision: Decision | None = None
    workload: Workload = Workload()
    variants: Variants
    economics: EconomicsStatus | None = None
    target_utilization: float | None = None
    migration_cost: float | None = None
    compatibility: Compatibility = Compatibility()
    compile: CompileStatus | None = None
    """The Neuron compile Job of candidate.compile: outcome and how long it took (engineering
    effort the migration costs)."""
    quality: QualityStatus | None = None
    """The latest quality check of spec.quality (output parity): verdict, figures, the prompts
    where the candidate strayed furthest."""
    quality_limits: list[QualityLimit] = Field(default_factory=list)
    """Each quality criterion's limit; empty when the trial asks no quality check."""
    controlled_test: ControlledTest = ControlledTest()
    evidence: list[EvidenceRow] = Field(default_factory=list)
    """Per criterion and step, the requests judged and how sure the figure is."""
    timeline: list[Point] = Field(default_factory=list)
    queries: list[ReadingQuery] = Field(default_factory=list)
    """The query each reading (per criterion and cost input, per variant) last used."""
    capacity: CapacityStatus | None = None
    """Capacity the trial added for the candidate and when it was given back."""
    capacity_test: CapacityTestStatus | None = None
    """The capacity sweep (spec.capacityTest): goodput per pod at the SLO, measured before any
    user's request reached the candidate, beside what its utilization would have projected."""
    gitops: dict[str, Any] | None = None
    """For a promoted trial: the manifests to commit (the candidate Deployment as the new primary,
    the HTTPRoute at 100%)."""


class UnreadableReport(ValueError):
    """The report ConfigMap holds something that is not a report."""


def read_report(config_map: dict[str, Any] | None) -> Report | None:
    """The report a ``<trial>-report`` ConfigMap holds; None when there is none yet.

    Raises :class:`UnreadableReport` when the ConfigMap holds something else (edited by hand,
    say), with pydantic's or the JSON parser's words for what is wrong."""
    text = ((config_map or {}).get("data") or {}).get(REPORT_KEY)
    if not text:
        return None
    try:
        return Report.model_validate(json.loads(text))
    except (ValueError, ValidationError) as error:
        raise UnreadableReport(str(error)) from None
