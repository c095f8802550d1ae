"""The sandbox provisions like Karpenter and EKS managed node groups (emulator only: the real
control plane starts no provisioner): a pending pod that fits a NodePool gets a Node after the
delay, within the pool's limits, and the Node goes once empty; a managed node group's Nodes
follow its desiredSize in moto's EKS API."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from acceltrial_testbed.sandbox.cluster import Sandbox
from acceltrial_testbed.sandbox.topology import Topology
from tests.sandbox.conftest import Api, eventually

# moto's EKS API takes seconds to create a cluster and its node groups.
pytestmark = pytest.mark.slow
INF2 = {"cpu": "31850m", "memory": "120Gi", "pods": "234", "aws.amazon.com/neuroncore": "2"}
TAINT = {"key": "aws.amazon.com/neuron", "value": "true", "effect": "NoSchedule"}
TOPOLOGY = Topology.model_validate({
    "cluster": "inference",
    "provisionDelaySeconds": 0.5,
    "consolidationDelaySeconds": 1,
    "nodeGroups": [
        {"name": "managed", "instanceType": "inf2.8xlarge", "count": 0, "taints": [TAINT],
         "managed": {"maxSize": 3}, "allocatable": INF2},
    ],
    "nodePools": [
        {"name": "neuron", "taints": [TAINT], "limits": {"aws.amazon.com/neuroncore": "4"},
         "requirements": [{"key": "karpenter.k8s.aws/instance-family", "operator": "In",
                           "values": ["inf2"]}],
         "offerings": [{"instanceType": "inf2.8xlarge", "allocatable": INF2}]},
    ],
})  # fmt: skip


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox(ready_delay=0.1, topology=TOPOLOGY) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def api(sandbox: Sandbox) -> Api:
    api = Api(sandbox.url)
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "work"}}
    assert api.post("/api/v1/namespaces", namespace).status == 201
    return api


def pod(name: str, selector: dict[str, str], cores: int = 2) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "work"},
        "spec": {
            "nodeSelector": selector,
            "tolerations": [{"key": "aws.amazon.com/neuron", "operator": "Exists"}],
            "containers": [{"name": "main", "image": "neuron:1", "resources": {
                "limits": {"aws.amazon.com/neuroncore": str(cores)}}}],
        },
    }  # fmt: skip


def labelled(api: Api, key: str, value: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = api.get("/api/v1/nodes").body["items"]
    return [n for n in items if (n["metadata"].get("labels") or {}).get(key) == value]


def bound_to(api: Api, name: str) -> str | None:
    node: str | None = api.get(f"/api/v1/namespaces/work/pods/{name}").body["spec"].get("nodeName")
    return node


def test_pending_pods_get_nodepool_nodes_within_its_limits_which_go_once_empty(api: Api) -> None:
    pinned = {"karpenter.sh/nodepool": "neuron"}
    started = time.monotonic()
    for name in ("a", "b", "c"):
        assert api.post("/api/v1/namespaces/work/pods", pod(name, pinned)).status == 201
    eventually(lambda: bound_to(api, "a") and bound_to(api, "b"), timeout=30)
    assert time.monotonic() - started >= 0.5, "a node takes provisionDelaySeconds to appear"
    nodes = labelled(api, "karpenter.sh/nodepool", "neuron")
    assert len(nodes) == 2, "the pool's limit (4 NeuronCores) holds two inf2.8xlarge"
    assert nodes[0]["metadata"]["labels"]["karpenter.k8s.aws/instance-family"] == "inf2"
    assert nodes[0]["spec"]["taints"] == [TAINT]
    time.sleep(1.5)
    assert bound_to(api, "c") is None, "no third node beyond the limits"
    pool = api.get("/apis/karpenter.sh/v1/nodepools/neuron").body
    assert pool["status"]["resources"]["aws.amazon.com/neuroncore"] == "4"
    for name in ("a", "b", "c"):
        api.delete(f"/api/v1/namespaces/work/pods/{name}")
    eventually(lambda: labelled(api, "karpenter.sh/nodepool", "neuron") == [], timeout=30)


def test_a_managed_node_groups_nodes_follow_its_desired_size(sandbox: Sandbox, api: Api) -> None:
    assert sandbox.eks is not None
    eks = sandbox.eks.client()

    def resize(size: int) -> None:
        eks.update_nodegroup_config(clusterName="inference", nodegroupName="managed",
                                    scalingConfig={"desiredSize": size})  # fmt: skip

    assert labelled(api, "eks.amazonaws.com/nodegroup", "managed") == []
    resize(2)
    eventually(lambda: len(labelled(api, "eks.amazonaws.com/nodegroup", "managed")) == 2, 30)
    pinned = {"eks.amazonaws.com/nodegroup": "managed"}
    assert api.post("/api/v1/namespaces/work/pods", pod("on-group", pinned)).status == 201
    busy = eventually(lambda: bound_to(api, "on-group"), timeout=30)
    resize(1)
    eventually(lambda: len(labelled(api, "eks.amazonaws.com/nodegroup", "managed")) == 1, 30)
    (kept,) = labelled(api, "eks.amazonaws.com/nodegroup", "managed")
    assert kept["metadata"]["name"] == busy, "the empty node goes first"
    assert labelled(api, "karpenter.sh/nodepool", "neuron") == [], "Karpenter stays out of it"
    resize(0)
    eventually(lambda: labelled(api, "eks.amazonaws.com/nodegroup", "managed") == [], 30)
