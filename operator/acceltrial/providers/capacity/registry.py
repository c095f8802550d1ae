"""The capacity providers by the name ``spec.capacity.provider`` gives them.

A new provider is one module in this folder, one entry in :data:`CAPACITY_PROVIDERS` and its
member in the spec (``api/capacity.py``). Both kinds use them: an AcceleratorTrial's
candidate pods, a TrainingTrial's Trainium nodes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from acceltrial.api.capacity import CapacitySpec
from acceltrial.engine.capacity import CapacityNeed
from acceltrial.kube.gateway import Kube
from acceltrial.providers.capacity.karpenter import KarpenterProvider
from acceltrial.providers.capacity.nodegroup import EksNodegroupProvider
from acceltrial.providers.capacity.nodes import NodesProvider
from acceltrial.providers.capacity.port import CapacityProvider, InstanceShape


@dataclass(frozen=True)
class CapacityContext:
    """What any capacity provider may need to be built for one trial's tick."""

    kube: Kube
    capacity: CapacitySpec
    """The trial's spec.capacity."""
    nodes: list[dict[str, Any]]
    """The cluster's Nodes, read once this tick."""
    need: CapacityNeed
    shape: InstanceShape | None
    """What a node of the candidate's instance type offers; None when the catalog lacks it."""


def _nodes(context: CapacityContext) -> CapacityProvider:
    return NodesProvider(context.nodes)


def _karpenter(context: CapacityContext) -> CapacityProvider:
    settings = context.capacity.karpenter
    wanted = settings.node_pool if settings else None
    return KarpenterProvider(context.kube.node_pools(), context.nodes, context.shape, wanted)


def _eks_nodegroup(context: CapacityContext) -> CapacityProvider:
    settings = context.capacity.eks_nodegroup
    if settings is None:  # the CRD's CEL rule requires it; kept for a spec read without it
        return _nodes(context)
    shape, resource = context.shape, context.need.resource
    per_node = int(shape.capacity.get(resource, 0)) if shape else None
    return EksNodegroupProvider(settings, context.nodes, per_node)


CAPACITY_PROVIDERS: dict[str, Callable[[CapacityContext], CapacityProvider]] = {
    "nodes": _nodes,
    "karpenter": _karpenter,
    "eks-nodegroup": _eks_nodegroup,
}
"""Each capacity provider's factory, by its name in ``spec.capacity.provider``."""


def capacity_provider(context: CapacityContext) -> CapacityProvider:
    """The capacity provider the trial's spec names."""
    return CAPACITY_PROVIDERS[context.capacity.provider](context)
