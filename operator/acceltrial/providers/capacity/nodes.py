"""Capacity from the Nodes the cluster has (``capacity.provider: nodes``, the default): a node of
the candidate's instance type, whose taints the candidate tolerates, with enough allocatable
Neuron resources for one pod. Capacity that scales from zero is the ``karpenter`` and
``eks-nodegroup`` providers' (:mod:`.karpenter`, :mod:`.nodegroup`).
"""

from __future__ import annotations

from typing import Any

from acceltrial.engine.candidate import INSTANCE_TYPE_LABEL, NEURON_TOLERATION
from acceltrial.engine.capacity import CapacityFinding, CapacityNeed

Manifest = dict[str, Any]


class NodesProvider:
    """The Nodes that exist now; nothing is ever added."""

    def __init__(self, nodes: list[Manifest]) -> None:
        self._nodes = nodes

    def check(self, need: CapacityNeed) -> CapacityFinding:
        problem = schedulable_problem(self._nodes, need.instance_type, need.resource, need.per_pod)
        problems = (problem,) if problem else ()
        return CapacityFinding("nodes", f"existing {need.instance_type} Nodes", problems)

    def set_desired_size(self, size: int) -> None:
        """Existing Nodes have no size to set."""


def schedulable_problem(
    nodes: list[Manifest], instance_type: str, resource: str, amount: int
) -> str | None:
    """Why no node can take one candidate pod, or None when one can."""
    typed = [n for n in nodes if _labels(n).get(INSTANCE_TYPE_LABEL) == instance_type]
    if not typed:
        types = sorted({_labels(n).get(INSTANCE_TYPE_LABEL, "?") for n in nodes})
        return (
            f"no node of instance type {instance_type} (the cluster has: "
            f"{', '.join(types) or 'no nodes'}); add a Neuron node group, "
            "or use spec.capacity.provider karpenter or eks-nodegroup"
        )
    fitting = [n for n in typed if _tolerated(n) and _allocatable(n, resource) >= amount]
    if not fitting:
        most = max(_allocatable(n, resource) for n in typed)
        return (
            f"no {instance_type} node has {amount} allocatable {resource} with only the "
            f"aws.amazon.com/neuron taint (at most {most}); is the Neuron device plugin running?"
        )
    return None


def fitting_nodes(nodes: list[Manifest], instance_type: str, resource: str, amount: int) -> int:
    """How many nodes of ``instance_type`` can each take a pod asking ``amount`` of
    ``resource`` (a training Job's pods take a node each)."""
    return sum(
        1 for n in nodes
        if _labels(n).get(INSTANCE_TYPE_LABEL) == instance_type
        and _tolerated(n) and _allocatable(n, resource) >= amount
    )  # fmt: skip


def _labels(node: Manifest) -> dict[str, str]:
    return dict(node.get("metadata", {}).get("labels") or {})


def _tolerated(node: Manifest) -> bool:
    for taint in node.get("spec", {}).get("taints") or []:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if taint.get("key") != NEURON_TOLERATION["key"]:
            return False
    return True


def _allocatable(node: Manifest, resource: str) -> int:
    raw = node.get("status", {}).get("allocatable", {}).get(resource, "0")
    try:
        return int(str(raw))
    except ValueError:
        return 0
