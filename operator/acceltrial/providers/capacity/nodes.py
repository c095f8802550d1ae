"""Capacity from the Nodes the cluster has: a node of the candidate's instance type, whose taints
the candidate tolerates, with enough allocatable Neuron resources for one pod.

Node groups that scale from zero (EKS managed node groups, Karpenter) are not modelled yet: a
cluster with no Neuron node running fails this check with a message that says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from acceltrial.api.spec import CandidateSpec
from acceltrial.engine.candidate import INSTANCE_TYPE_LABEL, NEURON_TOLERATION
from acceltrial.engine.preflight import neuron_request

Manifest = dict[str, Any]


class NodesCapacity:
    """A :class:`~acceltrial.providers.capacity.port.CapacityProvider` on the Nodes as read."""

    def problems(self, candidate: CandidateSpec, nodes: Sequence[Manifest]) -> list[str]:
        resource, amount = neuron_request(candidate)
        problem = schedulable_problem(list(nodes), candidate.instance_type, resource, amount)
        return [problem] if problem else []


def schedulable_problem(
    nodes: list[Manifest], instance_type: str, resource: str, amount: int
) -> str | None:
    """Why no node can take one candidate pod, or None when one can."""
    typed = [n for n in nodes if _labels(n).get(INSTANCE_TYPE_LABEL) == instance_type]
    if not typed:
        types = sorted({_labels(n).get(INSTANCE_TYPE_LABEL, "?") for n in nodes})
        return (
            f"no node of instance type {instance_type} (the cluster has: "
            f"{', '.join(types) or 'no nodes'}); add a Neuron node group"
        )
    fitting = [n for n in typed if _tolerated(n) and _allocatable(n, resource) >= amount]
    if not fitting:
        most = max(_allocatable(n, resource) for n in typed)
        return (
            f"no {instance_type} node has {amount} allocatable {resource} with only the "
            f"aws.amazon.com/neuron taint (at most {most}); is the Neuron device plugin running?"
        )
    return None


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
