"""The two variants: ``spec.baseline`` (the GPU Deployment serving today) and ``spec.candidate``
(the Neuron build deployed beside it), with the instance types and artifact location they name."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import ConfigDict, Field

from acceltrial.api.base import ApiModel, DnsLabel, Pattern, cel, cel_rules
from acceltrial.api.neuron import CompileSpec, ModelDtype, ModelMemory, ParameterCount
from acceltrial.api.spec.common import ObjectRef

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
