"""The TrainingTrial resource: the same training job on GPUs and on Trainium, decided by cost
and time per training run (docs/training.md). ``spec`` holds what the user asks, ``status``
what the operator measured and decided, ``resource`` the kind's identity and top-level model."""

from acceltrial.api.training.resource import (
    TRAINING_GVR,
    TRAINING_KIND,
    TRAINING_PLURAL,
    TrainingTrial,
)
from acceltrial.api.training.spec import (
    MAX_TRAINING_CRITERIA,
    EnvVar,
    FullRunSpec,
    TrainingBaseline,
    TrainingCandidate,
    TrainingCriterion,
    TrainingEconomicsSpec,
    TrainingMetric,
    TrainingTrialSpec,
    TrialRunSpec,
)
from acceltrial.api.training.status import (
    TRAINING_TERMINAL_PHASES,
    LossParityStatus,
    RunEconomicsStatus,
    RunStatus,
    TrainingDecision,
    TrainingPhase,
    TrainingTrialStatus,
)

__all__ = [
    "MAX_TRAINING_CRITERIA",
    "TRAINING_GVR",
    "TRAINING_KIND",
    "TRAINING_PLURAL",
    "TRAINING_TERMINAL_PHASES",
    "EnvVar",
    "FullRunSpec",
    "LossParityStatus",
    "RunEconomicsStatus",
    "RunStatus",
    "TrainingBaseline",
    "TrainingCandidate",
    "TrainingCriterion",
    "TrainingDecision",
    "TrainingEconomicsSpec",
    "TrainingMetric",
    "TrainingPhase",
    "TrainingTrial",
    "TrainingTrialSpec",
    "TrainingTrialStatus",
    "TrialRunSpec",
]
