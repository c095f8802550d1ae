"""The capacity port: can the candidate's pods get nodes in this cluster, and may the trial
grow a node group for them? Providers are looked up by ``spec.capacity.provider``: ``nodes``
(:mod:`.nodes`), ``karpenter`` (:mod:`.karpenter`), ``eks-nodegroup`` (:mod:`.nodegroup`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from acceltrial.engine.capacity import CapacityFinding, CapacityNeed


@dataclass(frozen=True)
class InstanceShape:
    """What one node of the candidate's instance type offers, from the instance catalog:
    the labels Karpenter gives it and its capacity (cpu cores, memory bytes, Neuron devices
    and cores), for NodePool requirements and limits."""

    labels: dict[str, str]
    capacity: dict[str, float]


class CapacityProvider(Protocol):
    """Finds room for the candidate; grows and shrinks what the trial added."""

    def check(self, need: CapacityNeed) -> CapacityFinding:
        """What the provider found: problems (the trial cannot start) or a source, and a node
        group to grow when the trial may."""
        ...

    def set_desired_size(self, size: int) -> None:
        """Set the node group's desiredSize (providers without node groups do nothing)."""
        ...
