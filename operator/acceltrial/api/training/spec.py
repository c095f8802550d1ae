"""``TrainingTrialSpec``: the training job as it runs on GPUs today, its Trainium variant, how
long each trial run lasts, the full run it stands for, and the criteria that decide.

Cross-field rules are CEL (``x-kubernetes-validations``), so the API server and ``acceltrial
validate`` refuse the same manifests.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field

from acceltrial.api.base import ApiModel, DnsLabel, Pattern, cel, cel_rules
from acceltrial.api.capacity import CapacitySpec
from acceltrial.api.durations import Duration
from acceltrial.api.spec import (
    ArtifactLocation,
    AwsRegion,
    Bounds,
    ExplicitPrices,
    InstanceType,
    MigrationCost,
    PriceFactors,
    PrometheusSpec,
    RelativeBounds,
)
from acceltrial.api.spec.criteria import placeholder_rule
from acceltrial.api.spec.economics import EXPLICIT_PRICES_RULE

TrainiumInstanceType = Annotated[
    str,
    Pattern(
        r"^(trn1|trn1n|trn2|trn2u)\.[a-z0-9-]+$",
        "a Trainium instance type such as trn1.32xlarge or trn2.48xlarge",
        64,
    ),
]
TrainingMetric = Literal[
    "cost_per_run", "time_per_run", "tokens_per_dollar", "loss_gap", "time_to_first_step"
]
MAX_NODES = 256
MAX_TRAINING_CRITERIA = 16


_PRESERVE: dict[str, Any] = {"x-kubernetes-preserve-unknown-fields": True}
"""Fields beyond those modelled are kept as written (a Kubernetes Container, PodSpec)."""


class ContainerShape(ApiModel):
    """A container of the pod template: its name and image are required, the rest is the
    Kubernetes Container as written (command, args, env, resources, volumeMounts, ...)."""

    model_config = ConfigDict(extra="allow", json_schema_extra=_PRESERVE)

    name: DnsLabel
    """Name of the container."""
    image: str = Field(min_length=1, max_length=512)
    """Its image."""


class PodSpecShape(ApiModel):
    """The pod template's spec: at least one container; the rest is the Kubernetes PodSpec as
    written (volumes, nodeSelector, tolerations, ...)."""

    model_config = ConfigDict(extra="allow", json_schema_extra=_PRESERVE)

    containers: list[ContainerShape] = Field(min_length=1, max_length=32)
    """The pod's containers; the training container among them."""


class PodTemplate(ApiModel):
    """A Job's pod template (spec.template of a batch/v1 Job)."""

    model_config = ConfigDict(extra="allow", json_schema_extra=_PRESERVE)

    metadata: dict[str, Any] | None = None
    """Labels and annotations of the pods."""
    spec: PodSpecShape
    """The pod's spec."""


class EnvVar(ApiModel):
    """An environment variable of the training container."""

    name: str = Field(min_length=1, max_length=253, pattern=r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
    """Name of the variable, e.g. NEURON_CC_FLAGS."""
    value: str = Field(default="", max_length=32768)
    """Its value."""


class TrainingBaseline(ApiModel):
    """The training job as it runs on GPUs today: one pod per node."""

    model_config = ConfigDict(
        json_schema_extra=cel_rules(
            cel(
                "!has(self.container) || "
                "self.template.spec.containers.exists(c, c.name == self.container)",
                "container must name a container of template.spec.containers",
                ".container",
            ),
        )
    )

    template: PodTemplate
    """The Job's pod template (metadata and spec, as in a Job's spec.template) that trains on
    GPUs today. acceltrial runs it as an indexed Job, one pod per node, on instanceType;
    restartPolicy defaults to Never."""
    container: DnsLabel | None = None
    """The training container in the template; defaults to the first container."""
    instance_type: InstanceType
    """EC2 instance type the job trains on today (e.g. p4d.24xlarge); pods select it by the
    node.kubernetes.io/instance-type label, and its price makes the cost per run."""
    nodes: int = Field(default=1, ge=1, le=MAX_NODES)
    """How many nodes (pods) the job uses."""


class TrainingCandidate(ApiModel):
    """The Trainium variant: the baseline's pod template with the Neuron build's image, Neuron
    devices instead of GPUs, and its own environment."""

    model_config = ConfigDict(
        json_schema_extra=cel_rules(
            cel(
                "!self.instanceType.startsWith('trn1') || self.neuronDevices in [1, 4, 8, 16]",
                "on trn1 and trn1n a pod takes 1, 4, 8 or 16 Neuron devices (the devices form "
                "a 2D torus): set neuronDevices to one of these",
                ".neuronDevices",
            ),
        )
    )

    image: str = Field(min_length=1, max_length=512)
    """Container image of the Neuron build of the training script (torch-neuronx,
    neuronx-distributed); replaces the training container's image."""
    instance_type: TrainiumInstanceType
    """Trainium instance type to train on (e.g. trn1.32xlarge)."""
    nodes: int = Field(default=1, ge=1, le=MAX_NODES)
    """How many nodes (pods) the Neuron job uses."""
    neuron_devices: int = Field(ge=1, le=16)
    """Neuron devices per pod, requested as aws.amazon.com/neuron (trn1.32xlarge has 16)."""
    efa_interfaces: int | None = Field(default=None, ge=1, le=32)
    """EFA interfaces per pod, requested as vpc.amazonaws.com/efa (multi-node training)."""
    env: list[EnvVar] | None = Field(default=None, max_length=64)
    """Environment of the training container on Neuron, e.g. NEURON_CC_FLAGS; set after the
    baseline's."""
    pod_template_patch: dict[str, Any] | None = None
    """A JSON merge patch applied last to the derived pod template (volumes, command, ...)."""


class TrialRunSpec(ApiModel):
    """How long each variant trains in the trial, and how its log is read."""

    steps: int = Field(ge=2, le=1_000_000)
    """Training steps each variant runs; the run is stopped once its log reports this many
    (a job that ends sooner is read as it is)."""
    warmup_steps: int = Field(default=5, ge=0, le=100_000)
    """First steps left out of speed and loss parity (compilation, graph loading, the data
    pipeline filling). Must be fewer than steps."""
    sequence_length: int | None = Field(default=None, ge=1, le=10_000_000)
    """Tokens per sample, to turn a log's samples (sequences) per second into tokens."""
    timeout: Duration = "2h"
    """How long one variant's run may take, start-up included (its Job's
    activeDeadlineSeconds); past it the trial fails."""
    log_lines: int = Field(default=20, ge=1, le=200)
    """Lines of a failed pod's log kept in the status."""


class FullRunSpec(ApiModel):
    """The full training run the trial stands for: its tokens or its steps, exactly one."""

    model_config = ConfigDict(
        json_schema_extra=cel_rules(
            cel(
                "has(self.tokens) != has(self.steps)",
                "give exactly one of fullRun.tokens (the tokens a full run trains on) or "
                "fullRun.steps (its optimizer steps)",
            ),
        )
    )

    tokens: float | None = Field(default=None, gt=0)
    """Tokens a full run trains on, e.g. 1.0e12."""
    steps: int | None = Field(default=None, ge=1)
    """Optimizer steps of a full run at the trial's batch size."""


class PrecompileSpec(ApiModel):
    """A neuron_parallel_compile Job run before the candidate trains: it extracts and compiles
    the graphs into the compile cache, so the trial run loads them. Its node-hours count into
    the candidate's cost per run."""

    command: list[str] | None = Field(default=None, min_length=1, max_length=64)
    """The precompile container's command; defaults to neuron_parallel_compile followed by the
    training container's command and args."""
    timeout: Duration = "1h"
    """How long the precompile may take; past it the trial fails."""


class CompileCacheSpec(ApiModel):
    """Where compiled graphs are kept between runs."""

    url: ArtifactLocation
    """An s3:// URI or an absolute path; given to every Neuron pod as
    NEURON_COMPILE_CACHE_URL."""


class TrainingCriterion(ApiModel):
    """A criterion of the decision, fixed when the trial starts."""

    model_config = ConfigDict(
        json_schema_extra=cel_rules(
            cel(
                "has(self.absolute) != has(self.relative)",
                "a criterion needs exactly one of absolute or relative",
            ),
            cel(
                "self.metric != 'loss_gap' || has(self.absolute)",
                "loss_gap is already relative to the baseline's loss (0.05 = 5% higher): judge "
                "it with absolute, e.g. absolute: {max: 0.05}",
            ),
        )
    )

    name: DnsLabel
    """Name of the criterion, unique within the trial."""
    metric: TrainingMetric
    """cost_per_run (USD), time_per_run (hours), tokens_per_dollar, loss_gap (the candidate's
    loss minus the baseline's at matched steps, over the baseline's) or time_to_first_step
    (seconds)."""
    absolute: Bounds | None = None
    """Limits on the candidate's value."""
    relative: RelativeBounds | None = None
    """Limits on candidate / baseline, e.g. cost_per_run relative max 0.8."""


class TrainingMetricsSpec(ApiModel):
    """The Prometheus that scrapes the training pods and the accelerator exporters on their
    nodes: each run's accelerator utilization (dcgm-exporter on the GPU nodes,
    neuron-monitor on the Neuron nodes, read as the inference presets read them) over its
    steady steps, and, when the script exports it, its throughput."""

    prometheus: PrometheusSpec
    """Where the metrics come from (address, authentication, TLS)."""
    interval: Duration = "1m"
    """The window of a rate() in the queries ({{interval}}) and the spacing of the samples
    read over a run's steady steps."""
    tokens_per_second: str | None = Field(
        default=None, min_length=1, max_length=4096, json_schema_extra=cel_rules(placeholder_rule())
    )
    """PromQL for the whole job's tokens per second as the training script exports it, e.g.
    sum(rate(train_tokens_total{namespace="{{namespace}}",pod=~"{{pods}}"}[{{interval}}])).
    {{pods}} matches the pods of the variant's Job. When given, it is the throughput cost and
    time per run are projected from (the log's stays in the status beside it)."""


class TrainingEconomicsSpec(ApiModel):
    """Where prices come from, and the one-off migration cost for the payback."""

    model_config = ConfigDict(json_schema_extra=cel_rules(EXPLICIT_PRICES_RULE))

    pricing: Literal["catalog", "aws", "explicit"] = "catalog"
    """catalog: prices bundled with acceltrial (with source and date); aws: the AWS Price List
    API; explicit: the prices below (per node hour)."""
    region: AwsRegion = "us-east-1"
    """Region whose prices apply."""
    prices: ExplicitPrices | None = None
    """Prices of one node hour for pricing: explicit."""
    price_factors: PriceFactors | None = None
    """Discount factors on the prices (Savings Plans, reserved capacity)."""
    migration_cost: MigrationCost | None = None
    """One-off cost of the migration, for the payback."""
    runs_per_month: float = Field(default=1, gt=0, le=100_000)
    """How many full runs a month the team trains, for the monthly saving and the payback."""


class TrainingTrialSpec(ApiModel):
    """The same training job on GPUs and on Trainium, judged by cost and time per run."""

    model_config = ConfigDict(
        json_schema_extra=cel_rules(
            cel(
                "self.run.warmupSteps < self.run.steps",
                "run.warmupSteps must be fewer than run.steps, or no step is left to measure",
                ".run.warmupSteps",
            ),
            cel(
                "!has(self.precompile) || has(self.compileCache)",
                "precompile writes compiled graphs to a cache the trial run reads: give "
                "compileCache.url (an s3:// URI or a path on a shared volume)",
                ".precompile",
            ),
            cel(
                "!has(self.capacity) || !has(self.capacity.eksNodegroup) || "
                "!self.capacity.eksNodegroup.scale",
                "a training trial checks the node group's room but never resizes it: set "
                "capacity.eksNodegroup.scale to false and size the node group for the run",
                ".capacity.eksNodegroup.scale",
            ),
        )
    )

    baseline: TrainingBaseline
    """The GPU training job as it runs today."""
    candidate: TrainingCandidate
    """The Trainium variant."""
    run: TrialRunSpec
    """How long each variant trains in the trial."""
    full_run: FullRunSpec
    """The full training run the trial's figures are projected to."""
    schedule: Literal["parallel", "sequential"] = "parallel"
    """parallel: both variants train at once; sequential: the baseline first, then the
    candidate (when GPU and Trainium capacity are not both at hand)."""
    precompile: PrecompileSpec | None = None
    """A neuron_parallel_compile Job before the candidate's run."""
    compile_cache: CompileCacheSpec | None = None
    """The Neuron compile cache the candidate's pods share."""
    criteria: list[TrainingCriterion] = Field(
        min_length=1,
        max_length=MAX_TRAINING_CRITERIA,
        json_schema_extra=cel_rules(
            cel(
                "self.all(c, self.exists_one(d, d.name == c.name))",
                "criterion names must be unique",
            )
        ),
    )
    """What the candidate must meet to be recommended."""
    economics: TrainingEconomicsSpec = TrainingEconomicsSpec()
    """Prices and the migration cost."""
    capacity: CapacitySpec = CapacitySpec()
    """Where the candidate's Trainium nodes come from, checked before any Job is created:
    nodes (that many Nodes of its instance type with the Neuron devices a pod asks, the
    default), karpenter (a NodePool that admits the type, with room under its limits) or
    eks-nodegroup (the managed node group, with room within its maxSize). A training trial
    never resizes a node group."""
    metrics: TrainingMetricsSpec | None = None
    """Prometheus, for accelerator utilization and exported throughput (optional: the log
    alone decides when absent)."""
