"""The TrainingTrial kind: its names and top-level model."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from acceltrial.api.base import ApiModel
from acceltrial.api.training.spec import TrainingTrialSpec
from acceltrial.api.training.status import TrainingTrialStatus
from acceltrial.api.trial import GROUP, VERSION, GroupVersionResource, ObjectMeta

TRAINING_KIND = "TrainingTrial"
TRAINING_PLURAL = "trainingtrials"
TRAINING_SINGULAR = "trainingtrial"
TRAINING_SHORT_NAMES = ("tt",)
TRAINING_GVR = GroupVersionResource(GROUP, VERSION, TRAINING_PLURAL)


class TrainingTrial(ApiModel):
    """The same training job on GPUs and on Trainium, decided by cost and time per run."""

    api_version: Literal["acceltrial.dev/v1alpha1"] = Field(alias="apiVersion")
    """acceltrial.dev/v1alpha1"""
    kind: Literal["TrainingTrial"]
    """TrainingTrial"""
    metadata: ObjectMeta = ObjectMeta()
    """Standard object metadata."""
    spec: TrainingTrialSpec
    """Desired trial."""
    status: TrainingTrialStatus | None = None
    """Observed state, written by the operator."""
