"""Capacity that comes and goes, as Karpenter and EKS managed node groups provide it.

- Karpenter: a pod the scheduler found no room for, that fits a NodePool's offering (its
  requirements, labels and taints, the offering's allocatable) while the pool's ``spec.limits``
  leave room, gets a Node of that instance type ``provision_delay`` seconds later (nodes under
  way count, so a burst of pods does not launch a node each). A pool's node that has run no pod
  for ``consolidation_delay`` seconds goes away. The NodePool's ``status.resources`` sums its
  nodes' capacity, as Karpenter reports it.
- Managed node groups (moto's EKS API): each group's Nodes follow its desiredSize; new ones
  appear ``provision_delay`` seconds after the size went up, surplus ones (empty first) go at
  once, their pods with them.

The NodePool kind is served from a minimal CustomResourceDefinition (group ``karpenter.sh``,
version ``v1``, cluster-scoped, as Karpenter's chart installs it; its schema is not checked).

The provisioner reads and writes the cluster through :class:`ClusterObjects`: the emulator's store
(:class:`StoreObjects`, on the sandbox's loop) or, on the real control plane, its API (run in a
thread by :func:`run_in_thread`).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Protocol

from acceltrial_testbed.sandbox.errors import ApiError
from acceltrial_testbed.sandbox.quantities import parse_quantity
from acceltrial_testbed.sandbox.resources import ResourceType
from acceltrial_testbed.sandbox.scheduling import labels_match, misfit, pod_requests
from acceltrial_testbed.sandbox.store import Object, Store
from acceltrial_testbed.sandbox.topology import (
    NodeGroup,
    NodePool,
    Offering,
    Topology,
    group_node,
    launched_node,
    node_pool_manifest,
)

NODEPOOL_LABEL = "karpenter.sh/nodepool"
NODEGROUP_LABEL = "eks.amazonaws.com/nodegroup"
_PASS_SECONDS = 0.2
_SIZES_SECONDS = 0.5
NODEPOOL_CRD: Object = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "nodepools.karpenter.sh"},
    "spec": {
        "group": "karpenter.sh",
        "scope": "Cluster",
        "names": {"plural": "nodepools", "singular": "nodepool", "kind": "NodePool",
                  "listKind": "NodePoolList"},
        "versions": [{
            "name": "v1", "served": True, "storage": True,
            "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {
                "type": "object", "x-kubernetes-preserve-unknown-fields": True,
            }},
        }],
    },
}  # fmt: skip


@dataclass
class _Launch:
    """A node under way: due at ``due`` (loop time)."""

    node: Object
    due: float


class ClusterObjects(Protocol):
    """What the provisioner reads and writes; a refusal raises :class:`ApiError`."""

    def nodes(self) -> list[Object]: ...

    def pods(self) -> list[Object]: ...

    def create_node(self, node: Object) -> None:
        """Create a Node with its status (capacity, labels; Ready as its agent reports)."""
        ...

    def delete_node(self, name: str) -> None: ...

    def delete_pod(self, namespace: str, name: str) -> None: ...

    def install_node_pools(self, pools: list[Object]) -> None:
        """Serve the NodePool kind (NODEPOOL_CRD) and create ``pools``."""
        ...

    def node_pool(self, name: str) -> Object: ...

    def write_node_pool_status(self, name: str, status: Object) -> None: ...


class StoreObjects:
    """The emulator's store, on the sandbox's loop."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._nodes = self._type("", "v1", "nodes")
        self._pods = self._type("", "v1", "pods")

    def _type(self, group: str, version: str, plural: str) -> ResourceType:
        found = self.store.registry.find(group, version, plural)
        assert found is not None
        return found

    def nodes(self) -> list[Object]:
        return self.store.peek(self._nodes)

    def pods(self) -> list[Object]:
        return self.store.peek(self._pods)

    def create_node(self, node: Object) -> None:
        self.store.create(self._nodes, "", {k: v for k, v in node.items() if k != "status"})
        status = node["status"]
        self.store.update(
            self._nodes, "", node["metadata"]["name"], lambda obj: obj | {"status": status},
            subresource="status",
        )  # fmt: skip

    def delete_node(self, name: str) -> None:
        self.store.delete(self._nodes, "", name)

    def delete_pod(self, namespace: str, name: str) -> None:
        self.store.delete(self._pods, namespace, name)

    def install_node_pools(self, pools: list[Object]) -> None:
        crds = self._type("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        self.store.create(crds, "", NODEPOOL_CRD)
        kind = self._type("karpenter.sh", "v1", "nodepools")
        for pool in pools:
            self.store.create(kind, "", pool)

    def node_pool(self, name: str) -> Object:
        return self.store.get(self._type("karpenter.sh", "v1", "nodepools"), "", name)

    def write_node_pool_status(self, name: str, status: Object) -> None:
        self.store.update(
            self._type("karpenter.sh", "v1", "nodepools"), "", name,
            lambda obj: obj | {"status": status}, subresource="status",
        )  # fmt: skip


class Provisioner:
    """One pass at a time (:meth:`reconcile`); see the module docstring."""

    def __init__(
        self,
        objects: ClusterObjects,
        topology: Topology,
        *,
        provision_delay: float,
        consolidation_delay: float,
        node_groups: Callable[[], dict[str, int]] | None = None,
    ) -> None:
        self.objects = objects
        self.topology = topology
        self.provision_delay = provision_delay
        self.consolidation_delay = consolidation_delay
        self.node_groups = node_groups
        """Reads each managed node group's desiredSize (blocking: run off the loop)."""
        self._launches: list[_Launch] = []
        self._empty_since: dict[str, float] = {}
        self._counter = defaultdict[int, int](int)

    def install(self) -> None:
        """Serve the NodePool kind and create the topology's NodePools."""
        if self.topology.node_pools:
            self.objects.install_node_pools(
                [node_pool_manifest(pool) for pool in self.topology.node_pools]
            )

    async def run(self) -> None:
        """Pass after pass on the sandbox's loop (node group sizes read off the loop)."""
        loop = asyncio.get_running_loop()
        last_read = -math.inf
        while True:
            sizes = None
            # Node group sizes are read every _SIZES_SECONDS: each read is an EKS API call.
            if self.node_groups is not None and loop.time() - last_read >= _SIZES_SECONDS:
                last_read = loop.time()
                with contextlib.suppress(Exception):  # moto restarting: try on the next pass
                    sizes = await loop.run_in_executor(None, self.node_groups)
            with contextlib.suppress(ApiError):
                self.reconcile(loop.time(), sizes)
            await asyncio.sleep(_PASS_SECONDS)

    def reconcile(self, now: float, sizes: dict[str, int] | None) -> None:
        """One pass: launch what pending pods need, land due nodes, remove empty ones."""
        nodes = self.objects.nodes()
        pods = [p for p in self.objects.pods() if not p["metadata"].get("deletionTimestamp")]
        if sizes is not None:
            self._follow_sizes(now, nodes, pods, sizes)
        self._launch_for_pending(now, nodes, pods)
        self._land(now)
        self._consolidate(now, self.objects.nodes(), pods)
        self._report_pools(self.objects.nodes())

    # Karpenter

    def _launch_for_pending(self, now: float, nodes: list[Object], pods: list[Object]) -> None:
        room: list[tuple[Object, dict[str, Decimal]]] = [
            (launch.node, {}) for launch in self._launches
        ]
        for pod in pods:
            if pod.get("spec", {}).get("nodeName") or not _unschedulable(pod):
                continue
            if any(_fits(pod, node, taken) for node, taken in room):
                continue
            launched = self._launch(pod, now, nodes)
            if launched is not None:
                room.append((launched, _take({}, pod)))

    def _launch(self, pod: Object, now: float, nodes: list[Object]) -> Object | None:
        for index, pool in enumerate(self.topology.node_pools):
            for offering in pool.offerings:
                number = self._counter[100 + index]
                node = launched_node(pool, offering, index, number)
                if not labels_match(pool.requirements, node["metadata"]["labels"]):
                    continue
                if misfit(pod, node, {}) is not None or not self._within_limits(
                    pool, offering, nodes
                ):
                    continue
                self._counter[100 + index] += 1
                self._launches.append(_Launch(node, now + self.provision_delay))
                return node
        return None

    def _within_limits(self, pool: NodePool, offering: Offering, nodes: list[Object]) -> bool:
        held = _capacity_sum(
            [n for n in nodes if _label(n, NODEPOOL_LABEL) == pool.name]
            + [
                launch.node
                for launch in self._launches
                if _label(launch.node, NODEPOOL_LABEL) == pool.name
            ]
        )
        for resource, limit in pool.limits.items():
            more = parse_quantity(offering.allocatable.get(resource, "0"))
            if more and held.get(resource, Decimal(0)) + more > parse_quantity(limit):
                return False
        return True

    def _land(self, now: float) -> None:
        due = [launch for launch in self._launches if launch.due <= now]
        self._launches = [launch for launch in self._launches if launch.due > now]
        for launch in due:
            self._create_node(launch.node)

    def _consolidate(self, now: float, nodes: list[Object], pods: list[Object]) -> None:
        busy = {p["spec"].get("nodeName") for p in pods if p.get("spec", {}).get("nodeName")}
        for node in nodes:
            name = node["metadata"]["name"]
            if _label(node, NODEPOOL_LABEL) is None or name in busy:
                self._empty_since.pop(name, None)
                continue
            since = self._empty_since.setdefault(name, now)
            if now - since >= self.consolidation_delay:
                self._empty_since.pop(name)
                self._remove_node(name, pods)

    def _report_pools(self, nodes: list[Object]) -> None:
        if not self.topology.node_pools:
            return
        for pool in self.topology.node_pools:
            mine = [n for n in nodes if _label(n, NODEPOOL_LABEL) == pool.name]
            resources = {k: _quantity(v) for k, v in sorted(_capacity_sum(mine).items())}
            resources["nodes"] = str(len(mine))
            with contextlib.suppress(ApiError):
                current = self.objects.node_pool(pool.name)
                if (current.get("status") or {}).get("resources") != resources:
                    self.objects.write_node_pool_status(pool.name, {"resources": resources})

    # Managed node groups

    def _follow_sizes(
        self, now: float, nodes: list[Object], pods: list[Object], sizes: dict[str, int]
    ) -> None:
        for index, group in enumerate(self.topology.node_groups):
            if group.managed is None or group.name not in sizes:
                continue
            mine = [n for n in nodes if _label(n, NODEGROUP_LABEL) == group.name]
            coming = [
                launch
                for launch in self._launches
                if _label(launch.node, NODEGROUP_LABEL) == group.name
            ]
            wanted = sizes[group.name]
            for _ in range(wanted - len(mine) - len(coming)):
                self._launches.append(
                    _Launch(self._group_node(group, index), now + self.provision_delay)
                )
            if wanted < len(mine) + len(coming):
                self._shrink(group, mine, coming, wanted, pods)

    def _group_node(self, group: NodeGroup, index: int) -> Object:
        number = max(self._counter[index], group.count)
        self._counter[index] = number + 1
        return group_node(group, index, number)

    def _shrink(
        self,
        group: NodeGroup,
        mine: list[Object],
        coming: list[_Launch],
        wanted: int,
        pods: list[Object],
    ) -> None:
        surplus = len(mine) + len(coming) - wanted
        for launch in coming[:surplus]:
            self._launches.remove(launch)
        surplus -= min(surplus, len(coming))
        busy = {p["spec"].get("nodeName") for p in pods if p.get("spec", {}).get("nodeName")}
        for node in sorted(mine, key=lambda n: n["metadata"]["name"] in busy)[:surplus]:
            self._remove_node(node["metadata"]["name"], pods)

    # Nodes

    def _create_node(self, node: Object) -> None:
        self.objects.create_node(node)

    def _remove_node(self, name: str, pods: list[Object]) -> None:
        for pod in pods:
            if pod.get("spec", {}).get("nodeName") == name:
                with contextlib.suppress(ApiError):
                    meta = pod["metadata"]
                    self.objects.delete_pod(meta["namespace"], meta["name"])
        with contextlib.suppress(ApiError):
            self.objects.delete_node(name)


def run_in_thread(
    provisioner: Provisioner, stop: threading.Event, period: float = 1.0
) -> threading.Thread:
    """Run ``provisioner`` a pass every ``period`` seconds in a thread until ``stop`` is set
    (the real control plane's: its objects are read through the API, each pass a few lists, so
    passes are further apart than on the emulator's loop)."""

    def passes() -> None:
        last_read = -math.inf
        while not stop.wait(period):
            sizes = None
            if provisioner.node_groups is not None and time.monotonic() - last_read >= (
                _SIZES_SECONDS
            ):
                last_read = time.monotonic()
                with contextlib.suppress(Exception):  # moto restarting: try on the next pass
                    sizes = provisioner.node_groups()
            with contextlib.suppress(ApiError, OSError):
                provisioner.reconcile(time.monotonic(), sizes)

    thread = threading.Thread(target=passes, name="provisioner", daemon=True)
    thread.start()
    return thread


def _label(obj: Object, key: str) -> str | None:
    return (obj.get("metadata", {}).get("labels") or {}).get(key)


def _unschedulable(pod: Object) -> bool:
    conditions = pod.get("status", {}).get("conditions") or []
    return any(
        c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable" for c in conditions
    )


def _take(used: dict[str, Decimal], pod: Object) -> dict[str, Decimal]:
    totals = dict(used)
    for name, amount in pod_requests(pod).items():
        totals[name] = totals.get(name, Decimal(0)) + amount
    return totals


def _fits(pod: Object, node: Object, taken: dict[str, Decimal]) -> bool:
    if misfit(pod, node, taken) is not None:
        return False
    taken.update(_take(taken, pod))
    return True


def _capacity_sum(nodes: list[Object]) -> dict[str, Decimal]:
    totals: dict[str, Decimal] = defaultdict(Decimal)
    for node in nodes:
        for name, raw in (node.get("status", {}).get("capacity") or {}).items():
            totals[name] += parse_quantity(raw)
    return dict(totals)


def _quantity(value: Decimal) -> str:
    return str(int(value)) if value == value.to_integral() else format(value, "f")


def eks_sizes(client: Any, cluster: str, groups: list[str]) -> dict[str, int]:
    """Each managed node group's desiredSize, read from the EKS API."""
    sizes = {}
    for name in groups:
        reply = client.describe_nodegroup(clusterName=cluster, nodegroupName=name)
        sizes[name] = int(reply["nodegroup"]["scalingConfig"]["desiredSize"])
    return sizes
