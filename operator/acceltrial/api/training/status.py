"""``TrainingTrialStatus``: what each run measured, what a full run costs, loss parity and the
decision. Only the operator writes it; a number not measured is absent, never zero."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from acceltrial.api.base import ApiModel, DnsLabel
from acceltrial.api.status import Condition

TrainingPhase = Literal[
    "Pending",
    "Preflight",
    "Compiling",
    "Running",
    "Recommended",
    "NotRecommended",
    "Failed",
]
TRAINING_TERMINAL_PHASES: frozenset[TrainingPhase] = frozenset(
    {"Recommended", "NotRecommended", "Failed"}
)
TrainingReasonCode = Literal[
    "Recommended",
    "CriterionFailed",
    "Inconclusive",
    "PreflightFailed",
    "CompileFailed",
    "RunFailed",
    "NoSteps",
    "ApiRefused",
]
RunState = Literal["Waiting", "Compiling", "Running", "Finished", "Failed"]


class Rate(ApiModel):
    """A steady-state rate and its 95% interval (Student's t over the steps)."""

    mean: float = Field(ge=0)
    """The mean over the steps after the warm-up."""
    low: float
    """Lower end of the 95% interval."""
    high: float
    """Upper end of the 95% interval."""


class LossPoint(ApiModel):
    """The loss a step logged."""

    step: int = Field(ge=0)
    """The step."""
    loss: float
    """Its loss."""


MAX_LOSS_POINTS = 512


class ExportedReading(ApiModel):
    """A run's figures from Prometheus over its steady steps."""

    tokens_per_second: Rate | None = None
    """spec.metrics.tokensPerSecond's samples: their mean and 95% interval."""
    accelerator_utilization: Rate | None = None
    """dcgm-exporter's GPU utilization (baseline) or neuron-monitor's NeuronCore utilization
    (candidate) of the Job's pods, 0 to 1: mean and 95% interval of the samples."""
    samples: int = Field(default=0, ge=0)
    """Samples read (the steady window over spec.metrics.interval)."""
    note: str | None = Field(default=None, max_length=2048)
    """What could not be read, and why."""


class RunStatus(ApiModel):
    """One variant's trial run, as its Job and its log show it."""

    job: str | None = Field(default=None, max_length=253)
    """Name of the variant's Job, in the trial's namespace."""
    state: RunState = "Waiting"
    """Waiting, Compiling (the precompile Job), Running, Finished or Failed."""
    started_at: datetime | None = None
    """When the Job was created."""
    first_step_at: datetime | None = None
    """When the log reported the first training step."""
    finished_at: datetime | None = None
    """When the run was read for the last time (stopped, completed or failed)."""
    steps: int | None = Field(default=None, ge=0)
    """Steps the log reported."""
    startup_seconds: float | None = Field(default=None, ge=0)
    """From the Job's creation to the first step: scheduling, image pull, compile, graph load."""
    tokens_per_second: Rate | None = None
    """The whole job's tokens per second after the warm-up."""
    samples_per_second: Rate | None = None
    """The whole job's samples (sequences) per second after the warm-up, when logged."""
    seconds_per_step: float | None = Field(default=None, gt=0)
    """Wall-clock seconds per step after the warm-up, from the log's timestamps."""
    final_loss: float | None = None
    """The loss at the last step reported."""
    loss_curve: list[LossPoint] | None = Field(default=None, max_length=MAX_LOSS_POINTS)
    """The loss at the steps logged after the warm-up: every step of the last 256, and the
    earlier ones evenly thinned to fit; what loss parity and the report's chart are made
    from."""
    precompile_seconds: float | None = Field(default=None, ge=0)
    """How long the precompile Job took."""
    log_formats: list[Literal["nxd", "katib", "json"]] | None = None
    """The formats the log's step lines were in."""
    log_lines: list[str] | None = Field(default=None, max_length=200)
    """The last lines of a failed pod's log, or of a log without a training step."""
    steady_from: datetime | None = None
    """When the first step after the warm-up was logged: the steady window's start."""
    last_step_at: datetime | None = None
    """When the last step read was logged: the steady window's end."""
    prometheus: ExportedReading | None = None
    """What Prometheus showed over the steady window (with spec.metrics)."""
    throughput_source: Literal["log", "prometheus"] | None = None
    """Where the tokens per second the economics use come from: the log, or Prometheus
    (spec.metrics.tokensPerSecond)."""


class RunEconomicsStatus(ApiModel):
    """A full run's time and cost on one variant (USD, hours)."""

    price_per_node_hour: float = Field(gt=0)
    """Price of one node hour, discounts applied."""
    price_source: str = Field(max_length=1024)
    """Where the price comes from and as of when."""
    cost_per_hour: float = Field(gt=0)
    """All nodes of the variant, per hour."""
    hours_per_run: float = Field(gt=0)
    """A full run's hours at the measured speed, plus the one-off start-up."""
    cost_per_run: float = Field(gt=0)
    """costPerHour x hoursPerRun, plus the precompile's node-hours."""
    tokens_per_dollar: float | None = Field(default=None, gt=0)
    """A full run's tokens over its cost."""


class RunPair(ApiModel):
    """Each variant's trial run."""

    baseline: RunStatus | None = None
    """The GPU job's run."""
    candidate: RunStatus | None = None
    """The Trainium job's run."""


class EconomicsPair(ApiModel):
    """A full run's cost and time on each variant."""

    baseline: RunEconomicsStatus | None = None
    """On the GPU instances."""
    candidate: RunEconomicsStatus | None = None
    """On the Trainium instances."""


class LossParityStatus(ApiModel):
    """The candidate's loss against the baseline's at matched steps after the warm-up."""

    gap: float | None = None
    """Mean of (candidate - baseline) / baseline over the final matched steps; 0.05 = 5% higher."""
    low: float | None = None
    """Lower end of the gap's 95% interval."""
    high: float | None = None
    """Upper end of the gap's 95% interval."""
    matched_steps: int = Field(ge=0)
    """Steps both logs report a loss at, after the warm-up."""
    diverged: bool = False
    """Whether the candidate's loss became NaN or infinite."""
    note: str | None = Field(default=None, max_length=2048)
    """Why the gap could not be judged, when it could not."""


class TrainingCriterionResult(ApiModel):
    """One criterion's verdict."""

    name: DnsLabel
    """The criterion's name."""
    metric: str = Field(max_length=64)
    """Its metric."""
    verdict: Literal["Pass", "Fail", "Inconclusive"]
    """Pass, Fail, or Inconclusive when a figure it needs was not measured."""
    value: float | None = None
    """The candidate's value, or candidate / baseline for a relative criterion."""
    message: str = Field(max_length=2048)
    """The figures behind the verdict, in a sentence."""


class TrainingDecision(ApiModel):
    """The recommendation and why."""

    verdict: Literal["Recommended", "NotRecommended", "Failed"]
    """Recommended, NotRecommended or Failed."""
    reason_code: TrainingReasonCode
    """The kind of reason, for programs."""
    reason: str = Field(max_length=8192)
    """Why, with the numbers."""
    criteria: list[TrainingCriterionResult] | None = Field(default=None, max_length=16)
    """Each criterion's verdict."""
    decided_at: datetime
    """When the decision was made."""


class TrainingTrialStatus(ApiModel):
    """Observed state of a training trial."""

    phase: TrainingPhase = "Pending"
    """Pending, Preflight, Compiling, Running, then Recommended, NotRecommended or Failed."""
    message: str | None = Field(default=None, max_length=8192)
    """What the trial is doing or why it ended."""
    observed_generation: int | None = Field(default=None, ge=0)
    """The metadata.generation the operator last acted on."""
    started_at: datetime | None = None
    """When the trial started."""
    conditions: list[Condition] | None = Field(default=None, max_length=16)
    """Ready, Progressing, Stalled (kstatus)."""
    preflight_notes: list[str] | None = Field(default=None, max_length=16)
    """What preflight could not check and let pass (e.g. an S3 compile cache the operator's
    role cannot read: the pods may)."""
    capacity_source: str | None = Field(default=None, max_length=512)
    """Where the candidate's nodes come from, as preflight found them."""
    runs: RunPair | None = None
    """Each variant's trial run."""
    economics: EconomicsPair | None = None
    """A full run's cost and time on each variant."""
    loss_parity: LossParityStatus | None = None
    """The candidate's loss against the baseline's."""
    decision: TrainingDecision | None = None
    """The recommendation, once made."""
