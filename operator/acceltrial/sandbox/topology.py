"""Simulated Nodes from a topology file: node groups with an instance type, count, labels,
taints and allocatable resources, turned into the Node objects EKS would show.

The default topology (``default-topology.yaml`` in this package) has a g5 GPU node group and
an inf2 Neuron node group tainted ``aws.amazon.com/neuron=true:NoSchedule``.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator

from acceltrial.sandbox.quantities import parse_quantity


class Taint(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


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

    @field_validator("allocatable")
    @classmethod
    def _quantities(cls, value: dict[str, str]) -> dict[str, str]:
        for quantity in value.values():
            parse_quantity(quantity)  # raises ValueError, reported by pydantic with the key
        return value


class Topology(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    node_groups: list[NodeGroup] = Field(alias="nodeGroups")


def load_topology(path: Path | None = None) -> Topology:
    """Read a topology file; None reads the default one shipped with the package."""
    if path is None:
        text = resources.files("acceltrial.sandbox").joinpath("default-topology.yaml").read_text()
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
