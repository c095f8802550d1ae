"""The AcceleratorTrial status: all progress of a trial lives here, so a restarted operator resumes.

Only the operator writes it (through the status subresource). Numbers that could not be measured
are absent, never NaN or zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter

from acceltrial.api.base import ApiModel, DnsLabel, ObjectName
from acceltrial.api.capacity import CapacityStatus
from acceltrial.api.capacity_test import CapacityTestStatus
from acceltrial.api.neuron import CompileStatus
from acceltrial.api.quality import QualityStatus
from acceltrial.api.reasons import ReasonCode

Phase = Literal[
    "Pending",
    "Preflight",
    "Progressing",
    "Paused",
    "Promoting",
    "BakingIn",
    "Promoted",
    "RollingBack",
    "RolledBack",
    "Failed",
    "Aborted",
]
PHASES: tuple[Phase, ...] = Phase.__args__  # type: ignore[attr-defined]
TERMINAL_PHASES: frozenset[Phase] = frozenset({"Promoted", "RolledBack", "Failed", "Aborted"})

Verdict = Literal["Pass", "Fail", "Inconclusive"]
PauseReason = Literal[
    "User", "Inconclusive", "AwaitingApproval", "RouteChanged", "QualityInconclusive",
    "CapacityInconclusive",
]  # fmt: skip


class Condition(ApiModel):
    """A condition in the shape of metav1.Condition (kstatus-compatible)."""

    type: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9]*$", max_length=316)
    """Ready, Progressing, Degraded, Reconciling, Stalled, or a specific one such as
    SpecChangeRejected."""
    status: Literal["True", "False", "Unknown"]
    """Whether the condition holds."""
    observed_generation: int | None = Field(default=None, ge=0)
    """The metadata.generation the condition was set for."""
    last_transition_time: datetime
    """When the status last changed."""
    reason: str = Field(pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$", max_length=1024)
    """A CamelCase reason for programs."""
    message: str = Field(default="", max_length=32768)
    """A sentence for people."""


class HttpRouteOriginal(ApiModel):
    """An HTTPRoute rule's backendRefs as found before the trial changed them."""

    name: ObjectName
    """Name of the HTTPRoute."""
    namespace: DnsLabel
    """Namespace of the HTTPRoute."""
    rule_index: int = Field(ge=0)
    """Index of the rule."""
    backend_refs: list[dict[str, Any]]
    """The rule's backendRefs, verbatim."""
    rules: list[dict[str, Any]] | None = None
    """The route's spec.rules as found, verbatim: what the trial compares the route with to
    notice another writer, and restores from."""
    split_rules: list[int] | None = None
    """Indices (in ``rules``) of the rules the trial splits; found again by name or matches."""


class HpaOriginal(ApiModel):
    """A HorizontalPodAutoscaler that scaled the baseline, as found before the trial."""

    name: ObjectName
    """Name of the HorizontalPodAutoscaler (in the trial's namespace)."""
    scale_target_ref: dict[str, Any]
    """Its spec.scaleTargetRef, verbatim; a rollback writes it back."""


class RoutingRecord(ApiModel):
    """What every router records before the first change, beside its own routing."""

    baseline_replicas: int | None = Field(default=None, ge=0)
    """Replicas of the baseline Deployment before the trial."""
    hpa: HpaOriginal | None = None
    """The HorizontalPodAutoscaler of the baseline, re-targeted to the candidate at promotion."""


class GatewayApiOriginal(RoutingRecord):
    """Routing as the gatewayapi router found it: the HTTPRoute's rules."""

    router: Literal["gatewayapi"]
    """The router that recorded it."""
    http_route: HttpRouteOriginal
    """The HTTPRoute rule, for the gatewayapi router."""


class ReplicasOriginal(RoutingRecord):
    """Routing as the replicas router found it: the baseline's replicas and its Service's
    selector."""

    router: Literal["replicas"]
    """The router that recorded it."""
    service_selector: dict[str, str] | None = None
    """The baseline Service's spec.selector as found. Before the bake the trial narrows it to
    the candidate's pods (adding ``acceltrial.dev/variant: candidate``), so the baseline's pods,
    still running, take no traffic; a rollback writes it back. Absent on records made before
    the bake narrowed it."""


OriginalRouting = Annotated[GatewayApiOriginal | ReplicasOriginal, Field(discriminator="router")]
"""Routing as found before the first change, one member per router (told apart by ``router``);
rollback restores exactly this. A new router adds its member here."""
_ORIGINAL_ROUTING: TypeAdapter[OriginalRouting] = TypeAdapter(OriginalRouting)


def original_routing(recorded: Mapping[str, Any]) -> OriginalRouting:
    """The member of :data:`OriginalRouting` that ``recorded`` (as stored, camelCase) is."""
    return _ORIGINAL_ROUTING.validate_python(recorded)


class SampleCounts(ApiModel):
    """Number of samples each variant contributed to a measurement."""

    baseline: int = Field(default=0, ge=0)
    """Samples of the baseline."""
    candidate: int = Field(default=0, ge=0)
    """Samples of the candidate."""


class RequestCounts(ApiModel):
    """The requests a measurement of one criterion rests on."""

    candidate: float = Field(ge=0)
    """The candidate's requests in the window."""
    baseline: float | None = Field(default=None, ge=0)
    """The baseline's requests in the window, when a relative criterion read them."""
    candidate_errors: float | None = Field(default=None, ge=0)
    """The candidate's failed requests among them (error-ratio criteria)."""
    candidate_value_sum: float | None = None
    """The candidate's figure in each window times its requests, summed: over
    candidateRequests, the figure pooled over the step."""
    baseline_value_sum: float | None = None
    """The same for the baseline (relative criteria), over baselineRequests."""
    spans_step: bool = False
    """The counts span the step so far (a sequential test), not one analysis interval."""


class CriterionResult(ApiModel):
    """One measurement of one criterion."""

    criterion: DnsLabel
    """Name of the criterion."""
    step: int = Field(ge=0)
    """Step (1-based) the measurement belongs to; 0 for the bake after promotion."""
    weight: int = Field(ge=0, le=100)
    """The candidate's share of traffic (%) during the measurement: for the ``replicas`` router
    its ready pods over all ready pods behind the baseline Service."""
    requested_weight: int | None = Field(default=None, ge=0, le=100)
    """The weight the step asked for; differs from ``weight`` when the router cannot give it
    exactly (the ``replicas`` router shares by whole pods). Absent on older results."""
    verdict: Verdict
    """Pass, Fail or Inconclusive."""
    baseline: float | None = None
    """The baseline's value, when measured."""
    candidate: float | None = None
    """The candidate's value, when measured."""
    ratio: float | None = None
    """candidate / baseline, for relative criteria."""
    samples: SampleCounts = SampleCounts()
    """Samples behind the values."""
    requests: RequestCounts | None = None
    """Requests behind the values, when the criterion's requests could be counted."""
    thin: bool = False
    """The window held fewer requests than the criterion needs: neither pass nor fail."""
    reason: str = Field(max_length=1024)
    """One sentence a person can read."""
    at: datetime
    """When the measurement was taken."""


class AnalysisCounts(ApiModel):
    """Tallies of the current step's measurements, against the analysis limits."""

    measurements: int = Field(default=0, ge=0)
    """Measurements taken in this step."""
    failures: int = Field(default=0, ge=0)
    """Failed measurements in this step."""
    inconclusive: int = Field(default=0, ge=0)
    """Inconclusive measurements in this step."""
    consecutive_errors: int = Field(default=0, ge=0)
    """Measurement errors in a row."""
    passes: int = Field(default=0, ge=0)
    """Passing measurements in this step."""
    thin: int = Field(default=0, ge=0)
    """Measurements in this step on too few requests to pass or fail (not inconclusive)."""
    last_outcome: Literal["Pass", "Fail", "Inconclusive", "Error", "Thin"] | None = None
    """Outcome of the latest measurement of this step; a step advances only after a Pass, or a
    Thin one (no harm seen on the few requests it had)."""


class CriterionEvidence(ApiModel):
    """The requests one criterion was judged on in one step (0: the bake), summed over its
    measurements: what the promotion's evidence is counted from."""

    criterion: DnsLabel
    """Name of the criterion."""
    step: int = Field(ge=0)
    """The step (1-based); 0 for the bake."""
    weight: int = Field(ge=0, le=100)
    """The candidate's share of traffic in that step."""
    windows: int = Field(default=0, ge=0)
    """Measurements of the criterion in the step."""
    thin_windows: int = Field(default=0, ge=0)
    """Of them, windows with fewer requests than the criterion needs."""
    candidate_requests: float = Field(default=0, ge=0)
    """The candidate's requests the criterion was judged on in the step."""
    baseline_requests: float | None = Field(default=None, ge=0)
    """The baseline's, when read."""
    candidate_errors: float | None = Field(default=None, ge=0)
    """The candidate's failed requests among them (error-ratio criteria)."""
    candidate_value_sum: float | None = None
    """The candidate's figure in each window times its requests, summed: over
    candidateRequests, the figure pooled over the step."""
    baseline_value_sum: float | None = None
    """The same for the baseline (relative criteria), over baselineRequests."""


class VariantEconomics(ApiModel):
    """Cost figures of one variant."""

    cost_per_hour: float | None = Field(default=None, ge=0)
    """What the variant's pods cost per hour, in USD."""
    observed_cost_per_million_tokens: float | None = Field(default=None, ge=0)
    """Cost per 1M generated tokens at the traffic it actually served."""
    observed_cost_per_thousand_requests: float | None = Field(default=None, ge=0)
    """Cost per 1k successful requests at the traffic it actually served."""
    projected_cost_per_million_tokens: float | None = Field(default=None, ge=0)
    """Cost per 1M tokens projected at the production share and the target utilization."""
    projected_cost_per_thousand_requests: float | None = Field(default=None, ge=0)
    """Cost per 1k requests projected at the production share and the target utilization."""
    unit_cost_per_million_tokens: float | None = Field(default=None, ge=0)
    """Cost per 1M tokens of capacity at the target utilization, the replicas needed unrounded:
    what cost criteria judge."""
    unit_cost_per_thousand_requests: float | None = Field(default=None, ge=0)
    """The same per 1k requests."""
    utilization: float | None = Field(default=None, ge=0)
    """Measured accelerator utilization (0..1)."""
    projected_replicas: int | None = Field(default=None, ge=1)
    """Replicas that would carry all production traffic at the target utilization:
    ``replicasNeeded`` rounded up."""
    replicas: int | None = Field(default=None, ge=0)
    """Pods serving the variant in the measurement window (today's replicas); ``costPerHour`` is
    theirs."""
    cost_per_replica_hour: float | None = Field(default=None, ge=0)
    """What one pod costs per hour, in USD: its share of an instance's price."""
    replicas_needed: float | None = Field(default=None, ge=0)
    """Replicas all production traffic needs at the target utilization, before rounding up."""
    projected_replicas_low: int | None = Field(default=None, ge=1)
    """What ``projectedReplicas`` would be were the measured utilization 5 points lower (at
    least 0)."""
    projected_replicas_high: int | None = Field(default=None, ge=1)
    """What ``projectedReplicas`` would be were the measured utilization 5 points higher (at
    most 1)."""
    capacity_rps_per_replica: float | None = Field(default=None, ge=0)
    """Requests per second one replica carries, as the projection took it: measured by the
    capacity sweep (spec.capacityTest), or else throughput over utilization."""
    utilization_capacity_rps_per_replica: float | None = Field(default=None, ge=0)
    """Throughput over utilization, when a measured capacity was used instead: how far the
    utilization projection would have been off."""


class BaselineCostFromSteps(ApiModel):
    """The baseline's cost per unit as the sound measurements of the steps put it, as cost
    criteria judge it (capacity at the target utilization, the replicas needed unrounded).

    During the bake the baseline serves nothing, so relative cost criteria compare the candidate
    with the median of these figures rather than with a baseline re-measured in an older window.
    """

    projected_cost_per_million_tokens: list[float] = Field(default_factory=list, max_length=32)
    """The baseline's projected cost per 1M tokens in each sound step measurement, newest last."""
    projected_cost_per_thousand_requests: list[float] = Field(default_factory=list, max_length=32)
    """The baseline's projected cost per 1k requests in each sound step measurement, newest
    last."""
    candidate_cost_per_million_tokens: list[float] = Field(default_factory=list, max_length=32)
    """The candidate's cost per 1M tokens in each sound measurement (steps and bake), newest
    last: a unit cost does not depend on the share, so during the bake the candidate is judged
    on their median too, and one window read on a late scrape cannot decide."""
    candidate_cost_per_thousand_requests: list[float] = Field(default_factory=list, max_length=32)
    """The same per 1k requests."""


class EconomicsStatus(ApiModel):
    """Summary of the cost comparison; the full figures are in the report."""

    baseline: VariantEconomics | None = None
    """The baseline's figures."""
    candidate: VariantEconomics | None = None
    """The candidate's figures."""
    projected_monthly_savings: float | None = None
    """Monthly cost of all traffic on the baseline minus on the candidate, each at its projected
    replicas (rounded up), in USD."""
    payback_months: float | None = Field(default=None, ge=0)
    """Months until ``projectedMonthlySavings`` repay the migration cost."""
    current_monthly_savings: float | None = None
    """Monthly cost of the baseline's pods minus the candidate's, each at today's replicas (the
    pods serving it in the window), in USD."""
    projected_monthly_savings_low: float | None = None
    """The lowest ``projectedMonthlySavings`` with each variant's utilization 5 points lower or
    higher than measured: the baseline's fewest projected replicas against the candidate's
    most. Below ``projectedMonthlySavings`` when that moves a count."""
    projected_monthly_savings_high: float | None = None
    """The highest, the baseline's most projected replicas against the candidate's fewest."""
    measured_at: datetime | None = None
    """End of the measurement window these figures come from."""
    step: int | None = Field(default=None, ge=0)
    """The step of that measurement; 0 for the bake."""
    weight: int | None = Field(default=None, ge=0, le=100)
    """The candidate's share of traffic (%) during that measurement."""
    baseline_from_steps: BaselineCostFromSteps | None = None
    """The baseline's cost as the steps established it; the bake judges cost against it."""


class PromotionStatus(ApiModel):
    """How the candidate was made ready for all traffic, and when it was handed over."""

    replicas: int = Field(ge=1)
    """Replicas the candidate was scaled to before it received all traffic."""
    reason: str = Field(max_length=1024)
    """How that number was chosen."""
    handed_over_at: datetime | None = None
    """When the candidate stopped being owned by the trial (an ordinary workload since)."""


class Decision(ApiModel):
    """The outcome of the trial and why."""

    verdict: Literal["promote", "rollback", "abort", "none"]
    """promote, rollback or abort; none when the trial ended before anything was deployed (a
    failed preflight), so there was nothing to promote or roll back."""
    reason: str = Field(max_length=4096)
    """Why, with the numbers, e.g. 'p99-latency 1.34x baseline (limit 1.10) at 25%'."""
    reason_code: ReasonCode | None = None
    """The kind of reason, for machines: Promoted, Aborted, PreflightFailed, PreflightTimedOut,
    ApiRefused, CandidateNotAvailable, CandidateNotScaled, CriterionFailed, MeasurementErrored,
    Inconclusive, RouteRefused, CompileFailed or QualityFailed. Absent on decisions recorded
    before codes existed."""
    at: datetime
    """When it was decided."""


class TrialStatus(ApiModel):
    """Observed state of the trial."""

    phase: Phase | None = None
    """Pending, Preflight, Progressing, Paused, Promoting, BakingIn, Promoted, RollingBack,
    RolledBack, Failed or Aborted."""
    observed_generation: int | None = Field(default=None, ge=0)
    """The metadata.generation last acted on."""
    step: int | None = Field(default=None, ge=0)
    """The current step (1-based); 0 before the first step."""
    canary_weight: int | None = Field(default=None, ge=0, le=100)
    """Percentage of traffic the candidate receives now, as the routing really gives it: for the
    ``replicas`` router its ready pods over all ready pods behind the baseline Service (one pod
    beside two is 33%, whatever the step asked)."""
    requested_weight: int | None = Field(default=None, ge=0, le=100)
    """The weight the current step asks for (100 from promotion on, 0 after a rollback); equal
    to ``canaryWeight`` for the ``gatewayapi`` router."""
    criteria_hash: str | None = Field(default=None, max_length=128)
    """Hash of spec.steps and spec.analysis frozen when the trial started."""
    started_at: datetime | None = None
    """When the trial started."""
    step_started_at: datetime | None = None
    """When the current step (or bake) started."""
    last_measurement_at: datetime | None = None
    """When the latest measurement was taken."""
    pause_reason: PauseReason | None = None
    """Why the trial is Paused: a person paused it, too many inconclusive measurements, the
    last step waits for approval, another writer changed the HTTPRoute (condition
    RouteChanged names its field manager), the quality check could not tell
    (QualityInconclusive: resume asks again, promote goes on without it), or the capacity sweep
    could not run (CapacityInconclusive: likewise)."""
    original: OriginalRouting | None = None
    """Routing as found before the first change."""
    analysis: list[CriterionResult] | None = Field(default=None, max_length=256)
    """The most recent measurements, newest last."""
    counts: AnalysisCounts | None = None
    """Tallies of the current step against the analysis limits."""
    evidence: list[CriterionEvidence] | None = Field(default=None, max_length=1024)
    """Per criterion and step, the requests it was judged on: the promotion needs enough."""
    economics: EconomicsStatus | None = None
    """Cost comparison summary."""
    decision: Decision | None = None
    """The outcome, once decided."""
    promotion: PromotionStatus | None = None
    """The candidate's replicas at promotion and the handover."""
    capacity: CapacityStatus | None = None
    """Capacity the trial added (node group desiredSize, Karpenter nodes) and when it was
    given back."""
    compile: CompileStatus | None = None
    """The compile Job of candidate.compile: outcome, how long it took, why it failed."""
    quality: QualityStatus | None = None
    """The latest quality check of spec.quality: verdict, figures, the worst prompts."""
    capacity_test: CapacityTestStatus | None = None
    """The capacity sweep of spec.capacityTest: goodput per pod at the SLO, and why it
    stopped."""
    message: str | None = Field(default=None, max_length=4096)
    """What the trial is doing now, for people."""
    conditions: list[Condition] | None = Field(default=None, max_length=32)
    """Ready, Progressing, Degraded; kstatus' Reconciling (True while the operator moves the trial
    on) and Stalled (True when only a person can: an invalid spec, RolledBack, Failed, Aborted,
    paused on inconclusive data, a refused spec change), absent otherwise; and specific conditions
    such as SpecChangeRejected; each with observedGeneration. See docs/gitops.md."""
