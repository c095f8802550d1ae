"""Wiring of the capacity port for one trial: which provider ``spec.capacity.provider`` names,
what the candidate needs of a node, and what a node of its instance type offers (from the
bundled instance catalog, for Karpenter's requirements and limits)."""

from __future__ import annotations

import re
from typing import Any

from acceltrial.api.spec import TrialSpec
from acceltrial.engine.capacity import CapacityNeed
from acceltrial.kube.gateway import Kube
from acceltrial.providers.capacity import registry
from acceltrial.providers.capacity.port import CapacityProvider, InstanceShape
from acceltrial.providers.pricing.catalog import bundled_catalog

Manifest = dict[str, Any]
_GIB = 2**30


def capacity_need(spec: TrialSpec) -> CapacityNeed:
    """What one candidate pod asks of a node, and how many pods the trial starts with."""
    candidate = spec.candidate
    if candidate.neuron_cores is not None:
        resource, amount = "aws.amazon.com/neuroncore", candidate.neuron_cores
    else:
        resource, amount = "aws.amazon.com/neuron", candidate.neuron_devices or 1
    return CapacityNeed(candidate.instance_type, resource, amount, candidate.replicas)


def capacity_provider(spec: TrialSpec, kube: Kube, nodes: list[Manifest]) -> CapacityProvider:
    """The provider the spec names, over the cluster's Nodes read this tick."""
    shape = instance_shape(spec.candidate.instance_type)
    return registry.capacity_provider(
        registry.CapacityContext(kube, spec.capacity, nodes, capacity_need(spec), shape)
    )


def instance_shape(instance_type: str) -> InstanceShape | None:
    """The labels Karpenter puts on a node of this type and its capacity, or None when the
    catalog does not know the type."""
    spec = bundled_catalog().spec(instance_type)
    if spec is None:
        return None
    family = instance_type.split(".", 1)[0]
    accelerator = spec.accelerator
    labels = {
        "node.kubernetes.io/instance-type": instance_type,
        "karpenter.k8s.aws/instance-family": family,
        "karpenter.k8s.aws/instance-category": re.sub(r"\d.*$", "", family),
        "karpenter.k8s.aws/instance-accelerator-name": accelerator.name.lower(),
        "karpenter.k8s.aws/instance-accelerator-count": str(accelerator.devices),
    }
    capacity = {"cpu": float(spec.vcpu), "memory": spec.memory_gib * _GIB}
    for resource in ("aws.amazon.com/neuron", "aws.amazon.com/neuroncore", "nvidia.com/gpu"):
        amount = spec.per_instance(resource)
        if amount is not None:
            capacity[resource] = float(amount)
    return InstanceShape(labels, capacity)
