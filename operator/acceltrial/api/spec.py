"""The AcceleratorTrial spec: what to trial, how to move traffic, how to judge it, what it costs.

Field docstrings are the API reference users read (``kubectl explain``, the README); cross-field
rules are CEL (``x-kubernetes-validations``) so the API server and ``acceltrial validate`` enforce
the same ones.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field

from acceltrial.api.base import ApiModel, DnsLabel, ObjectName, Pattern, cel, cel_rules
from acceltrial.api.capacity import CapacitySpec
from acceltrial.api.durations import Duration
from acceltrial.api.neuron import CompileSpec, ModelDtype, ModelMemory, ParameterCount
from acceltrial.api.placeholders import PLACEHOLDER_HINT, QUERY_TEMPLATE_PATTERN

MAX_STEPS = 20
MAX_CRITERIA = 32

InstanceType = Annotated[
    str,
    Pattern(r"^[a-z][a-z0-9-]*\.[a-z0-9-]+$", "an EC2 instance type such as g5.2xlarge", 64),
]
NeuronInstanceType = Annotated[
    str,
    Pattern(
        r"^(inf1|inf2|trn1|trn1n|trn2|trn2u)\.[a-z0-9-]+$",
        "an Inferentia or Trainium instance type such as inf2.8xlarge or trn1.2xlarge",
        64,
    ),
]
ArtifactLocation = Annotated[
    str,
    Pattern(
        r"^(s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?|/.+)$",
        "an s3://bucket/prefix/ URI or an absolute path inside the image",
        1024,
    ),
]
HttpUrl = Annotated[
    str,
    Pattern(
        r"^https?://[^\s/]+(/\S*)?$",
        "an http:// or https:// address such as http://prometheus:9090",
        2048,
    ),
]
AwsRegion = Annotated[
    str, Pattern(r"^[a-z]{2}(-[a-z]+)+-[0-9]$", "an AWS region such as us-east-1", 32)
]

PresetName = Literal["vllm", "tgi", "custom"]
MetricName = Literal[
    "latency_mean",
    "latency_p50",
    "latency_p90",
    "latency_p99",
    "ttft_p99",
    "itl_p99",
    "request_rate",
    "token_rate",
    "error_ratio",
    "accelerator_utilization",
    "cost_per_million_tokens",
    "cost_per_thousand_requests",
]


PLACEHOLDER_MESSAGE = "a query template may use only the placeholders"


def _placeholder_rule() -> dict[str, str]:
    escaped = QUERY_TEMPLATE_PATTERN.replace("\\", "\\\\")  # CEL string literal escapes
    return cel(f"self.matches('{escaped}')", f"{PLACEHOLDER_MESSAGE} {PLACEHOLDER_HINT}")


class ObjectRef(ApiModel):
    """A reference to an object in the trial's namespace."""

    name: ObjectName
    """Name of the object."""


class SecretKeyRef(ApiModel):
    """A key of a Secret in the trial's namespace."""

    name: ObjectName
    """Name of the Secret."""
    key: str = Field(min_length=1, max_length=253)
    """Key within the Secret."""


class NamespacedRef(ApiModel):
    """A reference to an object, by default in the trial's namespace."""

    name: ObjectName
    """Name of the object."""
    namespace: DnsLabel | None = None
    """Namespace of the object; defaults to the trial's namespace."""


class BaselineSpec(ApiModel):
    """The GPU Deployment that serves the model today. It is never modified before promotion."""

    deployment_ref: ObjectRef
    """The baseline Deployment, in the trial's namespace."""
    service_ref: ObjectRef | None = None
    """The Service in front of the baseline; defaults to a Service named like the Deployment."""
    container: DnsLabel | None = None
    """The model server container in the pod template; defaults to the first container."""
    instance_type: InstanceType
    """EC2 instance type the baseline runs on (e.g. g5.2xlarge); used for its cost."""


class CandidateSpec(ApiModel):
    """The Neuron-compiled variant, deployed beside the baseline from its pod template."""

    model_config = ConfigDict(
        json_schema_extra=cel_rules(
            cel(
                "has(self.neuronCores) != has(self.neuronDevices)",
                "set exactly one of neuronCores (aws.amazon.com/neuroncore) "
                "or neuronDevices (aws.amazon.com/neuron)",
            ),
            cel(
                "!self.instanceType.startsWith('trn1') || !has(self.neuronDevices) || "
                "self.neuronDevices in [1, 4, 8, 16]",
                "on trn1 and trn1n a pod takes 1, 4, 8 or 16 Neuron devices (the devices form "
                "a 2D torus): set neuronDevices to one of these",
            ),
        )
    )

    image: str = Field(min_length=1, max_length=512)
    """Container image of the Neuron build of the model server; replaces the model container's."""
    instance_type: NeuronInstanceType
    """Inferentia or Trainium instance type to run on (e.g. inf2.8xlarge); pods select it by the
    node.kubernetes.io/instance-type label."""
    neuron_cores: int | None = Field(default=None, ge=1, le=128)
    """NeuronCores per pod, requested as aws.amazon.com/neuroncore; sets NEURON_RT_NUM_CORES."""
    neuron_devices: int | None = Field(default=None, ge=1, le=16)
    """Whole Neuron devices per pod, requested as aws.amazon.com/neuron."""
    replicas: int = Field(default=1, ge=1, le=1000)
    """Number of candidate pods."""
    compiled_artifacts: ArtifactLocation | None = None
    """Where the compiled NEFF artifacts are (s3:// URI or absolute path); exposed to the pod as
    NEURON_COMPILED_ARTIFACTS and checked before any traffic moves."""
    pod_template_patch: dict[str, Any] | None = None
    """A JSON merge patch applied last to the derived pod template (extra env, volumes, ...)."""
    model_memory: ModelMemory | None = None
    """Accelerator memory the model needs (weights, KV cache, runtime), e.g. 40Gi; preflight
    refuses a trial whose requested NeuronCores or devices of instanceType have less."""
    model_parameters: ParameterCount | None = None
    """Parameter count of the model (e.g. 8B); without modelMemory, preflight checks that the
    weights alone (parameters x bytes of modelDtype) fit."""
    model_dtype: ModelDtype = "bf16"
    """Data type of the weights, for the estimate from modelParameters."""
    scheduler_name: DnsLabel | None = None
    """The Neuron scheduler extension's scheduler (e.g. neuron-scheduler), where the cluster
    runs one: a pod asking for more than one NeuronCore or device of a multi-device instance
    is scheduled by it, so its cores are adjacent."""
    compile: CompileSpec | None = None
    """A Neuron compile Job that must succeed before the candidate is deployed."""


class GatewayApiRouting(ApiModel):
    """Traffic split through the weights of a Gateway API HTTPRoute rule."""

    http_route_ref: NamespacedRef
    """The HTTPRoute whose rule sends traffic to the baseline Service."""
    rule_index: int | None = Field(default=None, ge=0, le=63)
    """Split only this rule (index in spec.rules); by default every rule that references the
    baseline Service is split alike."""
    rule_names: list[ObjectName] | None = Field(default=None, min_length=1, max_length=16)
    """Split only the rules with these names (spec.rules[].name); by default every rule that
    references the baseline Service is split alike."""
    port: int | None = Field(default=None, ge=1, le=65535)
    """Port of the candidate backendRef; defaults to the baseline backendRef's port."""


class ReplicaRouting(ApiModel):
    """Traffic split by pod count: candidate pods join the baseline Service's endpoints."""


class TrafficSpec(ApiModel):
    """How traffic moves from the baseline to the candidate."""

    model_config = ConfigDict(
        json_schema_extra=cel_rules(
            cel(
                "self.router != 'gatewayapi' || has(self.gatewayapi)",
                "router gatewayapi needs gatewayapi.httpRouteRef",
            ),
            cel(
                "self.router == 'gatewayapi' || !has(self.gatewayapi)",
                "gatewayapi settings are only used with router gatewayapi",
            ),
        )
    )

    router: Literal["gatewayapi", "replicas"]
    """gatewayapi: weights on an HTTPRoute rule; replicas: share by pod count behind the
    baseline Service."""
    gatewayapi: GatewayApiRouting | None = None
    """Settings of the gatewayapi router."""
    replicas: ReplicaRouting | None = None
    """Settings of the replicas router (none yet)."""


class Step(ApiModel):
    """One step: the candidate's share of traffic (or of mirrored copies) and how long it is
    judged at that share."""

    model_config = ConfigDict(
        json_schema_extra=cel_rules(
            cel(
                "has(self.weight) != has(self.mirror)",
                "give a step either weight (users served by the candidate) or mirror (copies "
                "of requests, answers discarded), not both",
            ),
        )
    )

    weight: int | None = Field(default=None, ge=1, le=100)
    """Percentage of traffic sent to the candidate during this step (1..100)."""
    mirror: int | None = Field(default=None, ge=1, le=100)
    """A shadow step: percentage of the requests copied to the candidate (Gateway API
    RequestMirror filter) while the baseline answers every user; the candidate's answers are
    discarded. Judged like any step; mirror steps come before the weighted ones."""
    duration: Duration
    """How long the step lasts; analysis runs every analysis.interval during it."""

    @property
    def share(self) -> int:
        """The users' share the candidate serves at this step (0 for a mirror step)."""
        return self.weight or 0

    @property
    def mirrored(self) -> int:
        """The percentage of requests copied to the candidate at this step (0 if none)."""
        return self.mirror or 0


class Bounds(ApiModel):
    """Limits on a value: min, max or both."""

    model_config = ConfigDict(
        json_schema_extra=cel_rules(
            cel("has(self.min) || has(self.max)", "give min, max or both"),
            cel(
                "!has(self.min) || !has(self.max) || self.min <= self.max",
                "min must not be greater than max",
            ),
        )
    )

    min: float | None = None
    """Lowest passing value (inclusive)."""
    max: float | None = None
    """Highest passing value (inclusive)."""


class RelativeBounds(ApiModel):
    """Limits on candidate / baseline measured over the same window, e.g. max: 1.10."""

    model_config = ConfigDict(
        json_schema_extra=cel_rules(
            cel(
                "has(self.min) || has(self.max)",
                "a relative criterion needs a limit: give min, max or both (a ratio to the "
                "baseline, e.g. max: 1.10)",
            ),
            cel(
                "!has(self.min) || !has(self.max) || self.min <= self.max",
                "min must not be greater than max",
            ),
        )
    )

    min: float | None = Field(default=None, ge=0)
    """Lowest passing ratio candidate / baseline (inclusive)."""
    max: float | None = Field(default=None, ge=0)
    """Highest passing ratio candidate / baseline (inclusive)."""


class StatisticalTest(ApiModel):
    """A Mann-Whitney comparison of the candidate's samples with the baseline's over the window."""

    direction: Literal["increase", "decrease", "either"]
    """Which significant change fails: increase (e.g. latency), decrease (e.g. throughput) or
    either."""
    confidence: float = Field(default=0.95, gt=0.5, lt=1)
    """Confidence level of the test and of the Hodges-Lehmann interval (0.5 < confidence < 1)."""
    allowed_change: float = Field(default=0.0, ge=0, le=10)
    """Relative shift tolerated even when significant, e.g. 0.05 lets the candidate be 5% worse."""


class Criterion(ApiModel):
    """A success criterion, fixed when the trial starts."""

    model_config = ConfigDict(
        json_schema_extra=cel_rules(
            cel(
                "has(self.metric) != has(self.query)",
                "set either metric (a preset metric name) or query (your own PromQL), not both",
            ),
            cel(
                "[has(self.absolute), has(self.relative), has(self.statistical)].exists_one(x, x)",
                "a criterion needs exactly one of absolute, relative or statistical",
            ),
            cel(
                "!has(self.statistical) || !has(self.metric) || !self.metric.startsWith('cost_')",
                "cost metrics are single values per window: judge them with absolute or "
                "relative, not statistical",
            ),
        )
    )

    name: DnsLabel
    """Name of the criterion, unique within the trial (shown in status and the report)."""
    metric: MetricName | None = None
    """A metric of the preset (latency_p99, error_ratio, accelerator_utilization, ...) or a cost
    metric computed by the operator (cost_per_million_tokens, cost_per_thousand_requests)."""
    query: str | None = Field(
        default=None,
        min_length=1,
        max_length=4096,
        json_schema_extra=cel_rules(_placeholder_rule()),
    )
    """Your own PromQL template returning one series per variant; placeholders are rendered once
    per variant."""
    requests_query: str | None = Field(
        default=None,
        min_length=1,
        max_length=4096,
        json_schema_extra=cel_rules(_placeholder_rule()),
    )
    """For minRequests with your own query: PromQL counting the requests a variant served in the
    window (e.g. sum(increase(http_requests_total{pod=~"{{pods}}"}[{{interval}}]))). Presets
    bring their own."""
    absolute: Bounds | None = None
    """Limits on the candidate's value."""
    relative: RelativeBounds | None = None
    """Limits on candidate / baseline."""
    statistical: StatisticalTest | None = None
    """A rank-sum comparison of both variants' samples."""
    from_weight: int = Field(default=0, ge=0, le=100)
    """Judge this criterion only at steps whose weight is at least this (e.g. cost at 25%+)."""
    min_samples: int | None = Field(default=None, ge=1, le=100000)
    """Fewest samples per variant for a verdict; fewer makes the measurement inconclusive.
    Defaults to 1 for absolute and relative criteria and 10 for statistical ones; for cost
    criteria, the fewest scrapes of each variant's request counter in the window (default 2)."""
    min_requests: float | None = Field(default=None, ge=0)
    """Fewest requests each variant must have served in the window for a verdict."""


class SigV4Auth(ApiModel):
    """AWS SigV4 signing, as Amazon Managed Service for Prometheus requires, with the operator's
    own credentials (its IRSA role on EKS)."""

    region: AwsRegion
    """Region of the workspace."""
    service: str = Field(default="aps", min_length=1, max_length=32)
    """Service name to sign for."""


class PrometheusAuth(ApiModel):
    """How to authenticate to Prometheus: at most one method."""

    model_config = ConfigDict(
        json_schema_extra=cel_rules(
            cel(
                "[has(self.bearerTokenSecretRef), has(self.basicAuthSecretRef), has(self.sigv4)]"
                ".filter(x, x).size() <= 1",
                "choose one of bearerTokenSecretRef, basicAuthSecretRef or sigv4",
            ),
        )
    )

    bearer_token_secret_ref: SecretKeyRef | None = None
    """A Secret key holding a bearer token."""
    basic_auth_secret_ref: ObjectRef | None = None
    """A Secret with the keys username and password."""
    sigv4: SigV4Auth | None = None
    """Sign requests with AWS SigV4 (Amazon Managed Service for Prometheus)."""


class TlsConfig(ApiModel):
    """TLS settings for an https:// Prometheus."""

    ca_secret_ref: SecretKeyRef | None = None
    """A Secret key holding the PEM CA bundle that signs the server's certificate."""
    insecure_skip_verify: bool = False
    """Skip certificate verification (never in production)."""


class PrometheusSpec(ApiModel):
    """Where the metrics come from."""

    address: HttpUrl
    """Base URL of the Prometheus HTTP API, e.g. http://prometheus.monitoring:9090."""
    timeout: Duration = "10s"
    """Timeout of one query."""
    auth: PrometheusAuth | None = None
    """Authentication, if Prometheus needs it."""
    tls: TlsConfig | None = None
    """TLS settings."""


class AnalysisSpec(ApiModel):
    """How each step is judged."""

    model_config = ConfigDict(
        json_schema_extra=cel_rules(
            cel(
                "self.preset != 'custom' || self.criteria.all(c, has(c.query))",
                "with preset custom every criterion needs its own query",
            ),
            cel(
                "self.preset != 'custom' || "
                "self.criteria.all(c, !has(c.minRequests) || has(c.requestsQuery))",
                "with preset custom a criterion with minRequests needs a requestsQuery",
            ),
        )
    )

    interval: Duration = "1m"
    """Time between two measurements, and the window each measurement covers."""
    source: Literal["prometheus"] = "prometheus"
    """Where the metrics come from; its settings are the field of the same name. Prometheus
    (any server with its HTTP API: Prometheus, Amazon Managed Service for Prometheus, Thanos,
    Mimir) is the one source today."""
    prometheus: PrometheusSpec
    """The Prometheus that scrapes both variants."""
    preset: PresetName = "vllm"
    """Default queries for the model server: vllm, tgi, or custom (every criterion has a query)."""
    criteria: list[Criterion] = Field(
        min_length=1,
        max_length=MAX_CRITERIA,
        json_schema_extra=cel_rules(
            cel(
                "self.all(c, self.exists_one(d, d.name == c.name))",
                "criterion names must be unique",
            )
        ),
    )
    """The success criteria; every one must pass for a step to advance."""
    failure_limit: int = Field(default=0, ge=0, le=1000)
    """Failed measurements tolerated per step; one more rolls the trial back."""
    inconclusive_limit: int = Field(default=3, ge=0, le=1000)
    """Inconclusive measurements tolerated per step; one more triggers onInconclusive."""
    consecutive_error_limit: int = Field(default=4, ge=0, le=1000)
    """Consecutive measurement errors (Prometheus unreachable, bad query) tolerated; one more
    rolls the trial back."""
    on_inconclusive: Literal["pause", "rollback"] = "pause"
    """What happens past inconclusiveLimit: pause for a person to decide, or roll back."""
    mode: Literal["fixed", "sequential"] = "fixed"
    """fixed: every criterion judges each measurement's window on its own. sequential: criteria
    on the preset's latency or error_ratio that fail when the candidate is worse are judged by an
    always-valid sequential test of the counts behind them over the step so far, which fails as
    soon as the evidence is clear and keeps false failures under alpha (docs/analysis.md)."""
    alpha: float = Field(default=0.01, gt=0, le=0.2)
    """sequential mode: the highest chance that a criterion fails a step for a candidate within
    its tolerance, however many measurements the step takes."""


class PromotionSpec(ApiModel):
    """How the candidate becomes the primary after the last step."""

    mode: Literal["automatic", "manual"] = "automatic"
    """automatic, or manual: wait for the approve action after the last step."""
    bake_time: Duration = "10m"
    """How long 100% of traffic stays on the candidate, with analysis running and the baseline
    warm, before the baseline is scaled to zero."""
    max_replicas: int | None = Field(default=None, ge=1, le=1000)
    """Upper bound on the candidate's replicas at promotion. Before all traffic moves, the
    candidate is scaled to the replicas production needs (projected from its measured capacity
    per replica and economics.targetUtilization) and at least candidate.replicas; this caps it."""


class ExplicitPrices(ApiModel):
    """Prices you give, per instance hour, instead of a catalog."""

    baseline_per_hour: float = Field(gt=0)
    """Price of one baseline instance hour, in USD."""
    candidate_per_hour: float = Field(gt=0)
    """Price of one candidate instance hour, in USD."""


class PriceFactors(ApiModel):
    """Multipliers on the on-demand price for discounts (Savings Plans, reserved, spot)."""

    baseline: float = Field(default=1.0, gt=0, le=1)
    """Factor on the baseline's price, e.g. 0.72."""
    candidate: float = Field(default=1.0, gt=0, le=1)
    """Factor on the candidate's price."""


class MigrationCost(ApiModel):
    """One-off cost of moving the workload, for the payback time."""

    engineer_hours: float = Field(default=0, ge=0)
    """Engineering hours the migration takes."""
    hourly_rate: float = Field(default=0, ge=0)
    """Cost of one engineering hour, in USD."""
    other: float = Field(default=0, ge=0)
    """Other one-off costs, in USD."""


class EconomicsSpec(ApiModel):
    """How cost per useful result is computed."""

    model_config = ConfigDict(
        json_schema_extra=cel_rules(
            cel(
                "self.pricing != 'explicit' || has(self.prices)",
                "pricing explicit needs prices.baselinePerHour and prices.candidatePerHour",
            ),
        )
    )

    pricing: Literal["catalog", "aws", "explicit"] = "catalog"
    """catalog: prices bundled with acceltrial (with source and date); aws: the AWS Price List
    API; explicit: the prices below."""
    region: AwsRegion = "us-east-1"
    """Region whose prices apply."""
    prices: ExplicitPrices | None = None
    """Prices for pricing: explicit."""
    price_factors: PriceFactors | None = None
    """Discount factors on the prices."""
    target_utilization: float = Field(default=0.7, gt=0, le=1)
    """Utilization each variant is projected to at its production share."""
    migration_cost: MigrationCost | None = None
    """One-off cost of the migration, for the payback time."""


class S3Destination(ApiModel):
    """An S3 location for the final report (written with the operator's IRSA role, which needs
    s3:PutObject on it)."""

    bucket: Annotated[str, Pattern(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$",
                                   "an S3 bucket name (3-63 lowercase letters, digits, . and -)",
                                   63)]  # fmt: skip
    """Bucket name."""
    prefix: str = Field(default="", max_length=512)
    """Key prefix; the report is written to <prefix><namespace>/<trial>/report.json."""
    region: AwsRegion | None = None
    """The bucket's region; defaults to the operator's."""


class ReportSpec(ApiModel):
    """Where the decision report goes besides the <trial>-report ConfigMap."""

    s3: S3Destination | None = None
    """Upload the report to S3 when the trial ends."""


class TrialSpec(ApiModel):
    """What to trial, how to move traffic, how to judge it and what it costs."""

    model_config = ConfigDict(
        json_schema_extra=cel_rules(
            cel(
                "self.steps.all(s, duration(s.duration) >= duration(self.analysis.interval))",
                "every step must last at least one analysis.interval, or it could advance "
                "without a measurement",
                ".steps",
            ),
            cel(
                "!self.steps.exists(s, has(s.mirror)) || self.traffic.router == 'gatewayapi'",
                "mirror steps need traffic.router gatewayapi: the replicas router cannot copy "
                "requests",
                ".steps",
            ),
        )
    )

    baseline: BaselineSpec
    """The GPU Deployment serving the model today."""
    candidate: CandidateSpec
    """The Neuron variant to trial."""
    traffic: TrafficSpec
    """How traffic moves between the two."""
    steps: list[Step] = Field(
        min_length=1,
        max_length=MAX_STEPS,
        json_schema_extra=cel_rules(
            cel(
                "["
                + ", ".join(str(i) for i in range(1, MAX_STEPS))
                + "].all(i, i >= size(self) || !has(self[i - 1].weight) || "
                "(has(self[i].weight) && self[i].weight > self[i - 1].weight))",
                "step weights must increase strictly from one step to the next, and mirror "
                "steps come before every weighted step",
            ),
            cel(
                "self.exists(s, has(s.weight))",
                "give at least one step with a weight: mirror steps alone never serve a user",
            ),
        ),
    )
    """Steps, in order: optional mirror (shadow) steps first, then traffic steps whose weights
    increase strictly within 1..100."""
    analysis: AnalysisSpec
    """How each step is judged."""
    promotion: PromotionSpec = PromotionSpec()
    """What happens after the last step passes."""
    economics: EconomicsSpec = EconomicsSpec()
    """How cost per useful result is computed."""
    report: ReportSpec | None = None
    """Where the decision report goes besides the <trial>-report ConfigMap."""
    progress_deadline: Duration = "10m"
    """How long the candidate may take to become Available before the trial rolls back."""
    capacity: CapacitySpec = CapacitySpec()
    """Where the candidate's nodes come from: existing Nodes, Karpenter or an EKS node group."""
