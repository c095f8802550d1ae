"""Neuron preflight: does the model fit the accelerator memory the candidate pod gets, is the
Neuron device plugin there, is the device count one the instance accepts, and which scheduler
places the pod.

Pure: the instance's shape comes in as plain values (:class:`NeuronShape`, read by a provider
from the bundled catalog or EC2), the Nodes as the API server returns them. Memory is compared
in bytes and reported in GiB, with the numbers that decided.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from acceltrial.api.spec import CandidateSpec

GIB = 1024**3
NEURONCORE_RESOURCE = "aws.amazon.com/neuroncore"
NEURON_DEVICE_RESOURCE = "aws.amazon.com/neuron"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
TORUS_DEVICE_COUNTS = (1, 4, 8, 16)
"""Devices a pod may take on trn1/trn1n: they form a 2D torus (Neuron scheduler extension docs,
https://awsdocs-neuron.readthedocs-hosted.com/en/latest/containers/kubernetes-getting-started.html)."""
_TORUS_FAMILIES = ("trn1", "trn1n")
_DTYPE_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}
_QUANTITY_UNITS = {
    "": 1,
    "K": 1000,
    "M": 1000**2,
    "G": 1000**3,
    "T": 1000**4,
    "Ki": 1024,
    "Mi": 1024**2,
    "Gi": 1024**3,
    "Ti": 1024**4,
}
_PARAMETER_UNITS = {"M": 1e6, "B": 1e9, "T": 1e12}

Manifest = dict[str, Any]


@dataclass(frozen=True)
class NeuronShape:
    """What one instance type offers: Neuron devices, NeuronCores and accelerator memory."""

    instance_type: str
    devices: int
    cores: int
    memory_bytes: float
    source: str
    """Where the figures come from (the bundled catalog, EC2 DescribeInstanceTypes)."""


@dataclass(frozen=True)
class ModelNeed:
    """Accelerator memory the model needs, and how that was found."""

    bytes: float
    how: str


def quantity_bytes(text: str) -> float:
    """Bytes of a Kubernetes memory quantity such as 16Gi or 40G."""
    found = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)(Ki|Mi|Gi|Ti|K|M|G|T)?", text)
    if found is None:
        raise ValueError(f"{text!r} is not a memory quantity such as 16Gi")
    return float(found.group(1)) * _QUANTITY_UNITS[found.group(2) or ""]


def model_need(candidate: CandidateSpec) -> ModelNeed | None:
    """The memory the spec says the model needs: modelMemory, else the weights estimated from
    modelParameters and modelDtype; None when the spec gives neither."""
    if candidate.model_memory is not None:
        return ModelNeed(quantity_bytes(candidate.model_memory), "modelMemory")
    if candidate.model_parameters is not None:
        count = float(candidate.model_parameters[:-1])
        parameters = count * _PARAMETER_UNITS[candidate.model_parameters[-1]]
        weights = parameters * _DTYPE_BYTES[candidate.model_dtype]
        return ModelNeed(
            weights,
            f"the weights alone: {candidate.model_parameters} parameters in "
            f"{candidate.model_dtype}",
        )
    return None


def pod_share(candidate: CandidateSpec, shape: NeuronShape) -> tuple[float, str]:
    """Accelerator memory the candidate pod gets (its cores' or devices' share of the
    instance's), and what it asks for, in words."""
    if candidate.neuron_cores is not None:
        share = shape.memory_bytes * candidate.neuron_cores / shape.cores
        return share, _count(candidate.neuron_cores, "NeuronCore")
    devices = candidate.neuron_devices or 1
    return shape.memory_bytes * devices / shape.devices, _count(devices, "Neuron device")


def fit_problems(candidate: CandidateSpec, shape: NeuronShape | None) -> list[str]:
    """Why the candidate pod cannot hold the model or cannot get what it asks for."""
    if shape is None:
        return []
    problems = _request_problems(candidate, shape)
    need = model_need(candidate)
    if need is None or problems:
        return problems
    share, asked = pod_share(candidate, shape)
    if need.bytes > share:
        total = _gib(shape.memory_bytes)
        problems.append(
            f"the model does not fit: it needs {_gib(need.bytes)} GiB ({need.how}) but "
            f"{asked} of {shape.instance_type} have {_gib(share)} GiB of accelerator memory "
            f"(the instance has {total} GiB on {_count(shape.cores, 'NeuronCore')}; "
            f"{shape.source}); ask for more neuronCores or neuronDevices, or a larger instance"
        )
    return problems


def _request_problems(candidate: CandidateSpec, shape: NeuronShape) -> list[str]:
    cores, devices = candidate.neuron_cores, candidate.neuron_devices
    if cores is not None and cores > shape.cores:
        return [
            f"neuronCores {cores} exceeds the {shape.cores} NeuronCores of "
            f"{shape.instance_type} ({shape.source})"
        ]
    if devices is not None and devices > shape.devices:
        return [
            f"neuronDevices {devices} exceeds the {_count(shape.devices, 'Neuron device')} of "
            f"{shape.instance_type} ({shape.source})"
        ]
    if _torus(shape.instance_type) and cores is not None:
        per_device = shape.cores // shape.devices
        spans = -(-cores // per_device)
        if spans not in TORUS_DEVICE_COUNTS:
            allowed = ", ".join(str(n * per_device) for n in TORUS_DEVICE_COUNTS[1:])
            return [
                f"neuronCores {cores} spans {spans} Neuron devices of {shape.instance_type}, "
                f"which takes 1, 4, 8 or 16 devices per pod: ask for at most {per_device} "
                f"NeuronCores or for {allowed}"
            ]
    return []


def device_plugin_problem(nodes: list[Manifest], instance_type: str) -> str | None:
    """Nodes of the instance type that advertise no Neuron resource: the Neuron device plugin
    does not run there (None when there are no such nodes, or they advertise one)."""
    typed = [n for n in nodes if _labels(n).get(INSTANCE_TYPE_LABEL) == instance_type]
    if not typed:
        return None
    advertising = [
        n for n in typed if {NEURONCORE_RESOURCE, NEURON_DEVICE_RESOURCE} & set(_allocatable(n))
    ]
    if advertising:
        return None
    return (
        f"the {instance_type} nodes advertise neither {NEURONCORE_RESOURCE} nor "
        f"{NEURON_DEVICE_RESOURCE}: the Neuron device plugin is not running on them; install "
        "it (the aws-neuron-sdk device plugin DaemonSet or the neuron-helm-chart)"
    )


def needs_neuron_scheduler(candidate: CandidateSpec, shape: NeuronShape | None) -> bool:
    """Whether the pod asks for more than one core or device of a multi-device instance, which
    the Neuron scheduler extension must place (the default scheduler may split its cores)."""
    if shape is None or shape.devices < 2:
        return False
    return (candidate.neuron_cores or 0) > 1 or (candidate.neuron_devices or 0) > 1


def scheduler_name(candidate: CandidateSpec, shape: NeuronShape | None) -> str | None:
    """The schedulerName the candidate pod gets: the Neuron scheduler extension's, when the
    spec names one and the pod needs it; otherwise the cluster's default scheduler."""
    if candidate.scheduler_name is None or not needs_neuron_scheduler(candidate, shape):
        return None
    return candidate.scheduler_name


def _torus(instance_type: str) -> bool:
    return instance_type.split(".", 1)[0] in _TORUS_FAMILIES


def _labels(node: Manifest) -> dict[str, str]:
    return dict(node.get("metadata", {}).get("labels") or {})


def _allocatable(node: Manifest) -> dict[str, Any]:
    allocatable = node.get("status", {}).get("allocatable") or {}
    return {k: v for k, v in allocatable.items() if str(v) not in ("0", "")}


def _gib(amount: float) -> str:
    return f"{amount / GIB:.1f}"


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"
