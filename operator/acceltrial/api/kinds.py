"""The custom kinds acceltrial serves and what tells their CRDs apart: names, printer columns,
the models of spec and status, and the objects each trial names after itself (which bound the
trial's own name). :mod:`acceltrial.api.crd` builds a CRD from one of these."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import BaseModel

from acceltrial.api.spec import TrialSpec
from acceltrial.api.status import TrialStatus
from acceltrial.api.training.resource import (
    TRAINING_KIND,
    TRAINING_PLURAL,
    TRAINING_SHORT_NAMES,
    TRAINING_SINGULAR,
    TrainingTrial,
)
from acceltrial.api.training.spec import TrainingTrialSpec
from acceltrial.api.training.status import TrainingTrialStatus
from acceltrial.api.trial import GROUP, KIND, PLURAL, SHORT_NAMES, SINGULAR, AcceleratorTrial


@dataclass(frozen=True, eq=False)  # compared and hashed by identity: one object per kind
class CustomKind:
    """One custom kind of the acceltrial.dev group."""

    kind: str
    plural: str
    singular: str
    short_names: tuple[str, ...]
    description: str
    model: type[BaseModel]
    """The whole object's model (apiVersion, kind, metadata, spec, status)."""
    spec_model: type[BaseModel]
    status_model: type[BaseModel]
    printer_columns: tuple[Mapping[str, object], ...]
    longest_suffix: str
    """The longest suffix of the objects a trial names ``<trial><suffix>``."""
    length_reason: str
    """Why the name is that short (the objects named after the trial), for the rule's message."""
    format_reason: str
    """Why the name must start with a letter, for the rule's message."""
    example_name: str

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{GROUP}"

    @property
    def filename(self) -> str:
        """The CRD's file in crds/ and in the chart."""
        return f"{GROUP}_{self.plural}.yaml"


_AGE = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
_MESSAGE = {"name": "Message", "type": "string", "jsonPath": ".status.message", "priority": 1}

ACCELERATOR_TRIAL = CustomKind(
    kind=KIND,
    plural=PLURAL,
    singular=SINGULAR,
    short_names=SHORT_NAMES,
    description="A controlled trial of a Neuron (Inferentia2/Trainium) variant of a model "
    "server beside its GPU Deployment: traffic moves in steps, each judged from Prometheus, "
    "then the candidate is promoted or rolled back.",
    model=AcceleratorTrial,
    spec_model=TrialSpec,
    status_model=TrialStatus,
    printer_columns=(
        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
        {"name": "Step", "type": "integer", "jsonPath": ".status.step"},
        {"name": "Weight", "type": "integer", "jsonPath": ".status.canaryWeight"},
        {"name": "Verdict", "type": "string", "jsonPath": ".status.decision.verdict"},
        _AGE,
        _MESSAGE,
    ),
    longest_suffix="-candidate",
    length_reason="the candidate's Service is named <trial>-candidate, and a Service name is a "
    "DNS label of at most 63",
    format_reason="the candidate's Service, named <trial>-candidate, must start with a letter",
    example_name="llama3-inf2",
)

TRAINING_TRIAL = CustomKind(
    kind=TRAINING_KIND,
    plural=TRAINING_PLURAL,
    singular=TRAINING_SINGULAR,
    short_names=TRAINING_SHORT_NAMES,
    description="The same training job on GPUs and on Trainium, side by side or one after the "
    "other: throughput, loss parity, and cost and time per full training run decide whether "
    "Trainium is recommended.",
    model=TrainingTrial,
    spec_model=TrainingTrialSpec,
    status_model=TrainingTrialStatus,
    printer_columns=(
        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
        {
            "name": "Baseline-Tok/s",
            "type": "number",
            "jsonPath": ".status.runs.baseline.tokensPerSecond.mean",
        },
        {
            "name": "Candidate-Tok/s",
            "type": "number",
            "jsonPath": ".status.runs.candidate.tokensPerSecond.mean",
        },
        {"name": "Verdict", "type": "string", "jsonPath": ".status.decision.verdict"},
        _AGE,
        _MESSAGE,
    ),
    longest_suffix="-precompile",
    length_reason="its Jobs are named <trial>-baseline, <trial>-candidate and "
    "<trial>-precompile, and a Job's name is a label value of at most 63 characters",
    format_reason="its Jobs, named <trial>-baseline, <trial>-candidate and <trial>-precompile, "
    "must start with a letter",
    example_name="llama-trn1",
)

KINDS: tuple[CustomKind, ...] = (ACCELERATOR_TRIAL, TRAINING_TRIAL)
KINDS_BY_NAME: dict[str, CustomKind] = {k.kind: k for k in KINDS}
