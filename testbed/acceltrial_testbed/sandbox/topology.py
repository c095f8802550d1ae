"""Simulated Nodes from a topology file: node groups with an instance type, count, labels,
taints and allocatable resources, turned into the Node objects EKS would show.

A node group with ``managed: {minSize, maxSize}`` is also an EKS managed node group (served by
moto's EKS API, ``count`` its desiredSize), and ``nodePools`` are Karpenter NodePools with the
instance types they may launch (``offerings``); both can start with zero nodes and grow
(:mod:`acceltrial_testbed.sandbox.provisioner`).

The default topology (``default-topology.yaml`` in this package) has a g5 GPU node group and
an inf2 Neuron node group tainted ``aws.amazon.com/neuron=true:NoSchedule``.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator

from acceltrial_testbed.sandbox.quantities import parse_quantity


class Taint(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class Scaling(BaseModel):
    """The sizes of an EKS managed node group (``count`` is its desiredSize)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    min_size: int = Field(default=0, ge=0, alias="minSize")
    max_size: int = Field(ge=0, le=500, alias="maxSize")


class NodeGroup(BaseModel):
    """Nodes of one instance type, as one EKS managed node group."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    instance_type: str = Field(alias="instanceType")
    count: int = Field(ge=0, le=500)
    zone: str = "us-east-1a"
    labels: dict[str, str] = {}
    taints: list[Taint] = []
    allocatable: dict[str, str]
    managed: Scaling | None = None
    """An EKS managed node group (in moto's EKS API) whose nodes follow its desiredSize."""

    @field_validator("allocatable")
    @classmethod
    def _quantities(cls, value: dict[str, str]) -> dict[str, str]:
        for quantity in value.values():
            parse_quantity(quantity)  # raises ValueError, reported by pydantic with the key
        return value


class Offering(BaseModel):
    """An instance type a NodePool may launch, with what its nodes offer."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    instance_type: str = Field(alias="instanceType")
    zone: str = "us-east-1a"
    labels: dict[str, str] = {}
    """Labels beyond the ones derived from the instance type (family, category)."""
    allocatable: dict[str, str]

    @field_validator("allocatable")
    @classmethod
    def _quantities(cls, value: dict[str, str]) -> dict[str, str]:
        for quantity in value.values():
            parse_quantity(quantity)
        return value


class NodePool(BaseModel):
    """A Karpenter NodePool (karpenter.sh/v1) with zero nodes at the start."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    requirements: list[dict[str, Any]] = []
    """spec.template.spec.requirements, as in the NodePool."""
    labels: dict[str, str] = {}
    taints: list[Taint] = []
    limits: dict[str, str] = {}
    """spec.limits: the most the pool's nodes may hold in total."""
    offerings: list[Offering] = Field(min_length=1)


class Topology(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    cluster: str = "sandbox"
    """The EKS cluster name of the managed node groups."""
    node_groups: list[NodeGroup] = Field(alias="nodeGroups")
    node_pools: list[NodePool] = Field(default=[], alias="nodePools")
    provision_delay_seconds: float = Field(default=2.0, ge=0, le=600, alias="provisionDelaySeconds")
    """How long a NodePool's or a managed node group's new node takes to appear."""
    consolidation_delay_seconds: float = Field(
        default=10.0, ge=0, le=3600, alias="consolidationDelaySeconds"
    )
    """How long a NodePool's node stays empty before it is removed."""


def load_topology(path: Path | None = None) -> Topology:
    """Read a topology file; None reads the default one shipped with the package."""
    if path is None:
        text = (
            resources.files("acceltrial_testbed.sandbox")
            .joinpath("default-topology.yaml")
            .read_text()
        )
    else:
        text = path.read_text()
    return Topology.model_validate(yaml.safe_load(text))


def nodes(topology: Topology) -> list[dict[str, Any]]:
    """The Node objects of every group (names like EKS's ``ip-10-1-2-3.ec2.internal``)."""
    return [
        _node(group, group_index, index)
        for group_index, group in enumerate(topology.node_groups)
        for index in range(group.count)
    ]


def node_pool_manifest(pool: NodePool) -> dict[str, Any]:
    """The karpenter.sh/v1 NodePool object of a topology's pool."""
    template: dict[str, Any] = {"requirements": pool.requirements}
    if pool.taints:
        template["taints"] = [t.model_dump() for t in pool.taints]
    spec: dict[str, Any] = {
        "template": {"metadata": {"labels": pool.labels}, "spec": template},
        "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized"},
    }
    if pool.limits:
        spec["limits"] = pool.limits
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": pool.name},
        "spec": spec,
    }


def launched_node(
    pool: NodePool, offering: Offering, pool_index: int, index: int
) -> dict[str, Any]:
    """A Node Karpenter launched for ``pool`` (labelled as Karpenter labels its nodes)."""
    family = offering.instance_type.split(".", 1)[0]
    group = NodeGroup(
        name=pool.name,
        instanceType=offering.instance_type,
        count=1,
        zone=offering.zone,
        labels={
            "karpenter.sh/nodepool": pool.name,
            "karpenter.sh/capacity-type": "on-demand",
            "karpenter.sh/registered": "true",
            "karpenter.k8s.aws/instance-family": family,
            "karpenter.k8s.aws/instance-category": re.sub(r"\d.*$", "", family),
        }
        | pool.labels
        | offering.labels,
        taints=pool.taints,
        allocatable=offering.allocatable,
    )
    node = _node(group, 100 + pool_index, index)
    node["metadata"]["labels"].pop("eks.amazonaws.com/nodegroup")
    node["metadata"]["labels"].pop("eks.amazonaws.com/capacityType")
    return node


def group_node(group: NodeGroup, group_index: int, index: int) -> dict[str, Any]:
    """Node number ``index`` of a node group."""
    return _node(group, group_index, index)


def _node(group: NodeGroup, group_index: int, index: int) -> dict[str, Any]:
    address = f"10.{group_index}.{index // 250}.{index % 250 + 4}"
    name = f"ip-{address.replace('.', '-')}.ec2.internal"
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": group.instance_type,
        "topology.kubernetes.io/zone": group.zone,
        "eks.amazonaws.com/nodegroup": group.name,
        "eks.amazonaws.com/capacityType": "ON_DEMAND",
    } | group.labels
    spec: dict[str, Any] = {"providerID": f"aws:///{group.zone}/i-{group_index:04x}{index:013x}"}
    if group.taints:
        spec["taints"] = [t.model_dump(exclude_defaults=False) for t in group.taints]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
        "status": _node_status(group, address),
    }


def _node_status(group: NodeGroup, address: str) -> dict[str, Any]:
    return {
        "capacity": dict(group.allocatable),
        "allocatable": dict(group.allocatable),
        "addresses": [{"type": "InternalIP", "address": address}],
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "KubeletReady",
                "message": "kubelet is posting ready status",
            }
        ],
        "nodeInfo": {
            "kubeletVersion": "v1.33.0-eks",
            "containerRuntimeVersion": "containerd://1.7.27",
            "operatingSystem": "linux",
            "architecture": "amd64",
        },
    }
