"""The Neuron-specific parts of a candidate: how big its model is (for the memory preflight) and
the optional compile Job that must succeed before it is deployed (``candidate.compile``), with
the record of that Job kept in ``status.compile``."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from acceltrial.api.base import ApiModel, Pattern
from acceltrial.api.durations import Duration

ModelMemory = Annotated[
    str,
    Pattern(
        r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|K|M|G|T)?$",
        "a memory quantity such as 16Gi or 40G",
        32,
    ),
]
ParameterCount = Annotated[
    str,
    Pattern(
        r"^[0-9]+(\.[0-9]+)?[MBT]$",
        "a parameter count such as 8B, 70B or 350M (M, B, T: millions, billions, trillions)",
        16,
    ),
]
ModelDtype = Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4"]


class CompileSpec(ApiModel):
    """A Neuron compile Job run before the candidate is deployed; the trial fails (nothing
    created, nothing exposed) when it fails or does not finish in time."""

    template: dict[str, Any]
    """The Job's pod template (metadata and spec, as in a Job's spec.template), e.g. a container
    running neuronx-cc or optimum-cli export neuron that writes to compiledArtifacts.
    restartPolicy defaults to Never."""
    timeout: Duration = "30m"
    """How long the Job may take (its activeDeadlineSeconds); past it the trial fails."""
    backoff_limit: int = Field(default=0, ge=0, le=10)
    """Retries of a failed compile pod before the Job fails."""
    log_lines: int = Field(default=20, ge=1, le=200)
    """Lines of the failed pod's log kept in the trial's status and decision."""

    @field_validator("template")
    @classmethod
    def _runs_a_container(cls, template: dict[str, Any]) -> dict[str, Any]:
        spec = template.get("spec")
        containers = spec.get("containers") if isinstance(spec, dict) else None
        if not isinstance(containers, list) or not containers:
            raise ValueError(
                "a pod template needs spec.containers: the container that compiles the model "
                "(e.g. neuronx-cc or optimum-cli export neuron)"
            )
        return template


CompileOutcome = Literal["Running", "Succeeded", "Failed"]


class CompileStatus(ApiModel):
    """What became of the compile Job."""

    job: str = Field(max_length=253)
    """Name of the Job, in the trial's namespace."""
    outcome: CompileOutcome
    """Running, Succeeded or Failed."""
    started_at: datetime
    """When the operator created the Job."""
    finished_at: datetime | None = None
    """When the Job succeeded or failed."""
    seconds: float | None = Field(default=None, ge=0)
    """How long the compile took, in seconds (a figure in the report)."""
    reason: str | None = Field(default=None, max_length=8192)
    """Why it failed: the Job's reason and message, and the tail of the pod's log."""
