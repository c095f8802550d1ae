"""A training trial's decision report: what each run measured, what a full run costs and takes
on each variant, loss parity, each criterion, the migration's payback and the evaluation
checklist answered from the measurements. Kept as JSON in the ``<trial>-report`` ConfigMap
(key ``report.json``, with ``"kind": "TrainingTrial"``), rendered by ``acceltrial report``."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from acceltrial.api.base import ApiModel
from acceltrial.api.training.status import (
    LossParityStatus,
    LossPoint,
    Rate,
    TrainingCriterionResult,
)


class TrainingVariantReport(ApiModel):
    """One variant: its instances, its run and a full run's economics."""

    instance_type: str
    nodes: int
    price_per_node_hour: float | None = None
    price_source: str | None = None
    steps: int | None = None
    startup_seconds: float | None = None
    tokens_per_second: Rate | None = None
    samples_per_second: Rate | None = None
    seconds_per_step: float | None = None
    final_loss: float | None = None
    precompile_seconds: float | None = None
    cost_per_hour: float | None = None
    hours_per_run: float | None = None
    cost_per_run: float | None = None
    tokens_per_dollar: float | None = None
    throughput_source: str | None = None
    """log or prometheus: where the tokens per second the economics use come from."""
    exported_tokens_per_second: Rate | None = None
    """The script's exported throughput as Prometheus read it (spec.metrics.tokensPerSecond)."""
    accelerator_utilization: Rate | None = None
    """dcgm-exporter's or neuron-monitor's utilization of the run's accelerators, 0 to 1."""
    prometheus_note: str | None = None
    """What Prometheus could not answer."""
    loss_curve: list[LossPoint] = Field(default_factory=list)
    log_lines: list[str] = Field(default_factory=list)


class Payback(ApiModel):
    """What moving saves and how soon it pays back the migration."""

    saving_per_run: float
    """The baseline's cost per run minus the candidate's (negative: the candidate costs more)."""
    runs_per_month: float
    monthly_saving: float
    migration_cost: float
    months: float | None = None
    """Months until the migration has paid for itself; None when it never does."""


class ChecklistAnswer(ApiModel):
    question: str
    answer: str


class TrainingReport(ApiModel):
    kind: Literal["TrainingTrial"] = "TrainingTrial"
    trial: str
    namespace: str
    phase: str
    verdict: str | None = None
    reason_code: str | None = None
    reason: str | None = None
    decided_at: datetime | None = None
    full_run: str
    """The full run the figures stand for, in words."""
    warmup_steps: int
    baseline: TrainingVariantReport
    candidate: TrainingVariantReport
    loss_parity: LossParityStatus | None = None
    criteria: list[TrainingCriterionResult] = Field(default_factory=list)
    payback: Payback | None = None
    checklist: list[ChecklistAnswer] = Field(default_factory=list)
