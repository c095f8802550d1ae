"""The AcceleratorTrial resource: its identity (group, version, kind, names) and top-level model."""

from __future__ import annotations

from typing import Literal, NamedTuple

from pydantic import ConfigDict, Field

from acceltrial.api.base import ApiModel
from acceltrial.api.spec import TrialSpec
from acceltrial.api.status import TrialStatus

GROUP = "acceltrial.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "AcceleratorTrial"
PLURAL = "acceleratortrials"
SINGULAR = "acceleratortrial"
SHORT_NAMES = ("acceltrial", "at")


class GroupVersionResource(NamedTuple):
    """Where the API server serves a kind of custom object."""

    group: str
    version: str
    plural: str

    def collection_path(self, namespace: str) -> str:
        """The REST path of the objects in ``namespace``."""
        return f"/apis/{self.group}/{self.version}/namespaces/{namespace}/{self.plural}"


TRIAL_GVR = GroupVersionResource(GROUP, VERSION, PLURAL)
"""The AcceleratorTrial resource, as the operator, the CLI, the demo and the tests address it."""


class ObjectMeta(ApiModel):
    """The metadata a manifest carries; the API server owns the rest of it."""

    model_config = ConfigDict(extra="allow")

    name: str | None = Field(default=None, max_length=253)
    """Name of the trial."""
    generate_name: str | None = Field(default=None, max_length=253)
    """Prefix for a generated name."""
    namespace: str | None = Field(default=None, max_length=63)
    """Namespace of the trial; the baseline lives there too."""
    labels: dict[str, str] | None = None
    """Labels."""
    annotations: dict[str, str] | None = None
    """Annotations; acceltrial.dev/action takes pause, resume, abort, promote or approve."""


class AcceleratorTrial(ApiModel):
    """A controlled trial of a Neuron variant of a model server beside its GPU Deployment."""

    api_version: Literal["acceltrial.dev/v1alpha1"] = Field(alias="apiVersion")
    """acceltrial.dev/v1alpha1"""
    kind: Literal["AcceleratorTrial"]
    """AcceleratorTrial"""
    metadata: ObjectMeta = ObjectMeta()
    """Standard object metadata."""
    spec: TrialSpec
    """Desired trial."""
    status: TrialStatus | None = None
    """Observed state, written by the operator."""
