"""Capacity from Karpenter (``capacity.provider: karpenter``): a karpenter.sh/v1 NodePool whose
requirements admit the candidate's instance type (``node.kubernetes.io/instance-type``,
``karpenter.k8s.aws/instance-family``, ``karpenter.k8s.aws/instance-accelerator-name``, ...),
whose taints the candidate tolerates and whose ``spec.limits`` leave room for the nodes the
candidate's replicas need. Karpenter then provisions those nodes for the pending pods; the
trial waits for them within ``progressDeadline``. Existing Nodes with room count too.
"""

from __future__ import annotations

from typing import Any

from kubernetes.utils import parse_quantity

from acceltrial.engine.candidate import NEURON_TOLERATION
from acceltrial.engine.capacity import CapacityFinding, CapacityNeed, nodes_for
from acceltrial.providers.capacity.nodes import schedulable_problem
from acceltrial.providers.capacity.port import InstanceShape

Manifest = dict[str, Any]
NODEPOOL_LABEL = "karpenter.sh/nodepool"


class KarpenterProvider:
    """NodePools read from the cluster; nothing to scale (Karpenter does it)."""

    def __init__(
        self,
        node_pools: list[Manifest],
        nodes: list[Manifest],
        shape: InstanceShape | None,
        wanted: str | None = None,
    ) -> None:
        self._pools = [p for p in node_pools if wanted is None or _name(p) == wanted]
        self._nodes = nodes
        # With a NodePool named, only its nodes count as room already there.
        self._ready = [n for n in nodes if wanted is None or _pool_of(n) == wanted]
        self._shape = shape
        self._wanted = wanted

    def check(self, need: CapacityNeed) -> CapacityFinding:
        if (
            schedulable_problem(self._ready, need.instance_type, need.resource, need.per_pod)
            is None
        ):
            return CapacityFinding("karpenter", f"existing {need.instance_type} Nodes")
        if self._shape is None:
            return self._problem(f"{need.instance_type} is not in the instance catalog")
        if not self._pools:
            where = f"NodePool {self._wanted}" if self._wanted else "a karpenter.sh/v1 NodePool"
            return self._problem(f"no {where} in the cluster and no {need.instance_type} Node")
        refusals = []
        for pool in self._pools:
            why = self._refusal(pool, need)
            if why is None:
                return CapacityFinding("karpenter", f"NodePool {_name(pool)}")
            refusals.append(f"NodePool {_name(pool)} {why}")
        return self._problem("; ".join(refusals))

    def set_desired_size(self, size: int) -> None:
        """Karpenter sizes its nodes itself."""

    def _problem(self, text: str) -> CapacityFinding:
        return CapacityFinding("karpenter", "Karpenter", problems=(text,))

    def _refusal(self, pool: Manifest, need: CapacityNeed) -> str | None:
        assert self._shape is not None
        template = pool.get("spec", {}).get("template", {}).get("spec", {})
        for requirement in template.get("requirements") or []:
            if not _admits(requirement, self._shape.labels):
                return f"does not admit {need.instance_type} ({_describe(requirement)})"
        for taint in template.get("taints") or []:
            key = taint.get("key")
            if taint.get("effect") in ("NoSchedule", "NoExecute") and (
                key != NEURON_TOLERATION["key"]
            ):
                return f"taints its nodes with {key}, which the candidate does not tolerate"
        per_node = int(self._shape.capacity.get(need.resource, 0)) // max(1, need.per_pod)
        if per_node < 1:
            return f"offers {need.instance_type} without {need.per_pod} {need.resource} per node"
        return self._limits_refusal(pool, nodes_for(need.replicas, per_node), need.instance_type)

    def _limits_refusal(self, pool: Manifest, nodes: int, instance_type: str) -> str | None:
        assert self._shape is not None
        limits = pool.get("spec", {}).get("limits") or {}
        used = self._used(pool)
        for resource, raw in sorted(limits.items()):
            limit = _amount(raw)
            wanted = self._shape.capacity.get(resource, 0.0) * nodes
            if wanted and used.get(resource, 0.0) + wanted > limit:
                return (
                    f"limits are exhausted: {resource} {_figure(used.get(resource, 0.0))} of "
                    f"{_figure(limit)} in use, and {nodes} {instance_type} node(s) need "
                    f"{_figure(wanted)} more; raise spec.limits.{resource} or use another NodePool"
                )
        return None

    def _used(self, pool: Manifest) -> dict[str, float]:
        """What the pool's nodes hold: Karpenter's status.resources, else the Nodes' capacity."""
        reported = pool.get("status", {}).get("resources")
        if reported:
            return {k: _amount(v) for k, v in reported.items()}
        totals: dict[str, float] = {}
        for node in self._nodes:
            if _pool_of(node) != _name(pool):
                continue
            for resource, raw in (node.get("status", {}).get("capacity") or {}).items():
                totals[resource] = totals.get(resource, 0.0) + _amount(raw)
        return totals


def _pool_of(node: Manifest) -> str | None:
    return (node.get("metadata", {}).get("labels") or {}).get(NODEPOOL_LABEL)


def _name(pool: Manifest) -> str:
    return str(pool.get("metadata", {}).get("name", "?"))


def _admits(requirement: Manifest, labels: dict[str, str]) -> bool:
    """Whether a NodeSelectorRequirement admits the instance; keys that do not describe the
    instance type (capacity type, zone, ...) do not narrow it."""
    key, operator = requirement.get("key"), requirement.get("operator")
    values = [str(v) for v in requirement.get("values") or []]
    if key not in labels:
        return operator != "Exists" or key not in _INSTANCE_KEYS
    value = labels[key]
    if operator == "In":
        return value in values
    if operator == "NotIn":
        return value not in values
    if operator in ("Gt", "Lt") and values and value.isdigit() and values[0].isdigit():
        return int(value) > int(values[0]) if operator == "Gt" else int(value) < int(values[0])
    return operator != "DoesNotExist"


_INSTANCE_KEYS = frozenset(
    {
        "node.kubernetes.io/instance-type",
        "karpenter.k8s.aws/instance-family",
        "karpenter.k8s.aws/instance-category",
        "karpenter.k8s.aws/instance-accelerator-name",
        "karpenter.k8s.aws/instance-accelerator-count",
    }
)


def _describe(requirement: Manifest) -> str:
    values = ", ".join(str(v) for v in requirement.get("values") or [])
    return f"{requirement.get('key')} {requirement.get('operator')} [{values}]"


def _figure(value: float) -> str:
    return f"{value:g}"


def _amount(raw: object) -> float:
    """A resource quantity (``32``, ``120Gi``, ``500m``) as a number."""
    return float(parse_quantity(raw))  # type: ignore[no-untyped-call]
