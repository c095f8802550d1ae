"""Capacity that is provisioned for the trial, end to end: ``kopf run -m acceltrial.handlers``
against a sandbox whose inf2 capacity starts at zero nodes, judging a simulated vLLM fleet
through a real Prometheus.

- a Karpenter NodePool (karpenter.sh/v1) admits inf2: the sandbox provisions a node for the
  pending candidate pod, the trial runs and promotes;
- a NodePool whose limits leave no room: the trial ends Failed with that reason, nothing created;
- an EKS managed node group at desiredSize 0 (moto's EKS API, as the operator reaches it with
  boto3): the operator raises desiredSize, the candidate regresses, the trial rolls back and
  desiredSize is restored exactly; deleting a running trial gives the size back too.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from acceltrial_testbed.sandbox.topology import Topology
from tests.integration.e2e_kit import (  # the api fixture, one instance per module
    BACKENDS,
    ROUTE,
    TRIALS,
    api,
    backend_refs,
    candidate_exists,
    control_plane,
    install_baseline,
    trial,
    wait_for,
)
from tests.integration.operator_account import operator_kubeconfig
from tests.integration.prometheus_server import running_prometheus
from tests.integration.simulated import STEADY, profile, serving
from tests.sandbox.conftest import (
    IMMEDIATE,
    Api,
    Backend,
    eventually,
    why,
)

pytestmark = pytest.mark.slow
__all__ = ["api"]  # a re-exported fixture

NODES = "/api/v1/nodes"
NEURON_TAINT = {"key": "aws.amazon.com/neuron", "value": "true", "effect": "NoSchedule"}
INF2 = {"cpu": "31850m", "memory": "120Gi", "pods": "234",
        "aws.amazon.com/neuron": "1", "aws.amazon.com/neuroncore": "2"}  # fmt: skip
INF2_POOL = [
    {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["inf2"]},
    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
]
TOPOLOGY = Topology.model_validate({
    "cluster": "inference",
    # New nodes in 1 s, empty ones removed after 2 s, on either plane.
    "provisionDelaySeconds": 1.0,
    "consolidationDelaySeconds": 2.0,
    "nodeGroups": [
        {"name": "system", "instanceType": "m5.xlarge", "count": 1,
         "allocatable": {"cpu": "3920m", "memory": "14Gi", "pods": "58"}},
        {"name": "gpu-g5", "instanceType": "g5.xlarge", "count": 8,
         "allocatable": {"cpu": "3920m", "memory": "14Gi", "pods": "58", "nvidia.com/gpu": "1"}},
        {"name": "neuron-managed", "instanceType": "inf2.8xlarge", "count": 0, "zone": "us-east-1b",
         "managed": {"minSize": 0, "maxSize": 2}, "taints": [NEURON_TAINT], "allocatable": INF2},
    ],
    "nodePools": [
        {"name": "neuron", "requirements": INF2_POOL, "taints": [NEURON_TAINT],
         "limits": {"aws.amazon.com/neuron": "4"},
         "offerings": [{"instanceType": "inf2.8xlarge", "zone": "us-east-1b", "allocatable": INF2,
                        "labels": {"karpenter.k8s.aws/instance-accelerator-name": "inferentia2"}}]},
        {"name": "neuron-small", "requirements": INF2_POOL, "taints": [NEURON_TAINT],
         "limits": {"cpu": "16"},
         "offerings": [{"instanceType": "inf2.8xlarge", "allocatable": INF2}]},
    ],
})  # fmt: skip
PROFILES = {
    ("karpenter", "baseline"): STEADY,
    ("karpenter", "candidate"): profile(p50=0.24, p99=0.48),
    ("nodegroup", "baseline"): STEADY,
    ("nodegroup", "candidate"): profile(error_ratio=0.2),
    ("exhausted", "baseline"): STEADY,
    ("nodegroup-delete", "baseline"): STEADY,
    ("nodegroup-delete", "candidate"): STEADY,
}


@pytest.fixture(scope="module", params=BACKENDS)
def cluster(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """The real control plane when it is built (always in CI; its provisioner plays Karpenter
    and the managed node groups), else the emulator."""
    with control_plane(request.param, TOPOLOGY) as plane:
        yield plane


@pytest.fixture(scope="module")
def prometheus_url(cluster: Backend, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data = tmp_path_factory.mktemp("prom") / "data"
    with serving(cluster.access, PROFILES) as scrape, running_prometheus(data, scrape) as url:
        yield url


@pytest.fixture(scope="module")
def operator(
    cluster: Backend, api: Api, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """The operator as the chart runs it (with the chart's RBAC on the real control plane),
    reaching EKS through the default credential chain."""
    assert cluster.eks is not None
    folder = tmp_path_factory.mktemp("operator")
    identity = operator_kubeconfig(cluster, tmp_path_factory.mktemp("identity"))
    env = (
        os.environ
        | cluster.eks.environment()
        | {
            "KUBECONFIG": str(identity),
            "ACCELTRIAL_METRICS_PORT": "0",
            "ACCELTRIAL_TICK_SECONDS": "1",
            "HOME": str(folder),
        }
    )
    args = [sys.executable, "-m", "kopf", "run", "-m", "acceltrial.handlers", "--standalone"]
    scope = [f"--namespace={n}" for n in sorted({ns for ns, _ in PROFILES})]
    with (folder / "operator.log").open("a") as log:
        process = subprocess.Popen([*args, *scope], env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield
    finally:
        process.terminate()
        process.wait(timeout=30)


def start(api: Api, namespace: str, prometheus: str, capacity: dict[str, Any],
          pinned_to: dict[str, str]) -> str:  # fmt: skip
    """The baseline and a trial whose candidate pods select ``pinned_to`` node labels."""
    install_baseline(api, namespace)
    body = trial(namespace, prometheus)
    body["spec"]["capacity"] = capacity
    # kwok's pod stages at once: what is tested is where the nodes come from, not pod starts.
    body["spec"]["candidate"]["podTemplatePatch"] = {
        "metadata": {"annotations": IMMEDIATE},
        "spec": {"nodeSelector": pinned_to},
    }
    assert api.post(TRIALS.format(namespace), body).status == 201
    return f"{TRIALS.format(namespace)}/llama3-inf2"


def nodes(api: Api, label: str, value: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = api.get(NODES).body["items"]
    return [n for n in items if (n["metadata"].get("labels") or {}).get(label) == value]


def candidate_nodes(api: Api, namespace: str) -> set[str]:
    pods = api.get(f"/api/v1/namespaces/{namespace}/pods").body["items"]
    return {
        p["spec"].get("nodeName") for p in pods if p["metadata"]["name"].startswith("llama3-inf2")
    }


def size_becomes(cluster: Backend, size: int, timeout: float = 60) -> None:
    """Wait for the node group's desiredSize, polling moto (in this process, beside the sandbox)
    a few times a second rather than flat out."""
    deadline = time.monotonic() + timeout
    while desired_size(cluster) != size:
        assert time.monotonic() < deadline, f"desiredSize never became {size}"
        time.sleep(0.25)


def desired_size(cluster: Backend) -> int:
    assert cluster.eks is not None
    reply = cluster.eks.client().describe_nodegroup(
        clusterName="inference", nodegroupName="neuron-managed"
    )
    return int(reply["nodegroup"]["scalingConfig"]["desiredSize"])


def test_a_karpenter_nodepool_with_zero_nodes_provisions_the_candidate_which_promotes(
    api: Api, prometheus_url: str, operator: None
) -> None:
    assert nodes(api, "karpenter.sh/nodepool", "neuron") == [], "the pool starts empty"
    path = start(api, "karpenter", prometheus_url, {"provider": "karpenter"},
                 {"karpenter.sh/nodepool": "neuron"})  # fmt: skip
    status = wait_for(api, path, ("Promoted", "RolledBack", "Failed"), timeout=150)
    assert status["phase"] == "Promoted", why(status)
    assert status["capacity"]["source"] == "NodePool neuron"
    assert (status["capacity"]["addedNodes"], status["capacity"]["keptNodes"]) == (1, 1)
    launched = {n["metadata"]["name"] for n in nodes(api, "karpenter.sh/nodepool", "neuron")}
    assert launched, "Karpenter launched a node"
    assert candidate_nodes(api, "karpenter") <= launched
    assert backend_refs(api, "karpenter")[1]["weight"] == 100


def test_a_nodepool_without_room_fails_the_trial_with_that_reason_and_changes_nothing(
    api: Api, prometheus_url: str, operator: None
) -> None:
    capacity = {"provider": "karpenter", "karpenter": {"nodePool": "neuron-small"}}
    path = start(
        api, "exhausted", prometheus_url, capacity, {"karpenter.sh/nodepool": "neuron-small"}
    )
    status = wait_for(api, path, ("Failed", "Progressing", "Promoted"), timeout=60)
    assert status["phase"] == "Failed", why(status)
    assert "NodePool neuron-small limits are exhausted: cpu 0 of 16 in use" in status["message"]
    assert not candidate_exists(api, "exhausted")
    assert backend_refs(api, "exhausted") == [ROUTE], "the route was never touched"
    assert nodes(api, "karpenter.sh/nodepool", "neuron-small") == []
    assert "capacity" not in status


def test_a_managed_node_group_at_zero_is_raised_then_restored_exactly_after_a_rollback(
    api: Api, cluster: Backend, prometheus_url: str, operator: None
) -> None:
    assert desired_size(cluster) == 0
    capacity = {
        "provider": "eks-nodegroup",
        "eksNodegroup": {"clusterName": "inference", "nodegroupName": "neuron-managed",
                         "scale": True},
    }  # fmt: skip
    path = start(api, "nodegroup", prometheus_url, capacity,
                 {"eks.amazonaws.com/nodegroup": "neuron-managed"})  # fmt: skip
    size_becomes(cluster, 1)
    eventually(lambda: candidate_nodes(api, "nodegroup") & {
        n["metadata"]["name"] for n in nodes(api, "eks.amazonaws.com/nodegroup", "neuron-managed")
    }, timeout=60)  # fmt: skip
    status = wait_for(api, path, ("RolledBack", "Promoted", "Failed"), timeout=150)
    assert status["phase"] == "RolledBack", why(status)
    recorded = status["capacity"]
    assert (recorded["originalDesiredSize"], recorded["desiredSize"]) == (0, 1)
    assert recorded["addedNodes"] == 1
    assert recorded["addedAt"] <= recorded["releasedAt"]
    assert desired_size(cluster) == 0, "desiredSize restored exactly"
    assert backend_refs(api, "nodegroup") == [ROUTE]
    eventually(lambda: nodes(api, "eks.amazonaws.com/nodegroup", "neuron-managed") == [])


def test_deleting_a_running_trial_gives_the_node_group_size_back(
    api: Api, cluster: Backend, prometheus_url: str, operator: None
) -> None:
    assert desired_size(cluster) == 0
    capacity = {
        "provider": "eks-nodegroup",
        "eksNodegroup": {"clusterName": "inference", "nodegroupName": "neuron-managed",
                         "scale": True},
    }  # fmt: skip
    path = start(api, "nodegroup-delete", prometheus_url, capacity,
                 {"eks.amazonaws.com/nodegroup": "neuron-managed"})  # fmt: skip
    size_becomes(cluster, 1)
    assert api.delete(path).status == 200
    eventually(lambda: api.get(path).status == 404, timeout=60)
    assert desired_size(cluster) == 0, "desiredSize restored before the finalizer went"
    assert not candidate_exists(api, "nodegroup-delete")
