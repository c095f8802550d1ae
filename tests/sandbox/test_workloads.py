"""Contract: simulated Nodes and the workload controllers (Deployment, ReplicaSet, scheduler,
kubelet) behave like a real cluster's, as far as the operator can observe."""

from __future__ import annotations

import re
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from acceltrial_testbed.sandbox.cluster import Sandbox
from acceltrial_testbed.sandbox.topology import load_topology
from tests.sandbox.conftest import DEPLOYMENTS, Api, Kubectl, eventually
from tests.sandbox.test_metadata import deployment

pytestmark = pytest.mark.controllers

NODES = "/api/v1/nodes"
PODS = "/api/v1/namespaces/default/pods"
REPLICASETS = "/apis/apps/v1/namespaces/default/replicasets"


def items(api: Api, path: str, **query: str) -> list[dict[str, Any]]:
    reply = api.get(path, **query)
    assert reply.status == 200, reply.body
    result: list[dict[str, Any]] = reply.body["items"]
    return result


def quick_to_end(body: dict[str, Any], seconds: int = 1) -> dict[str, Any]:
    """``body`` with pods that end within ``seconds`` of being deleted: kwok, like a kubelet,
    lets a pod go at the end of its grace period (30 s by default), which the tests that scale
    down or roll out would otherwise wait for."""
    body["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = seconds
    return body


def neuron_deployment(name: str, replicas: int, cores: int) -> dict[str, Any]:
    body = deployment(name, replicas)
    pod = body["spec"]["template"]["spec"]
    pod["containers"][0]["resources"] = {
        "requests": {"aws.amazon.com/neuroncore": str(cores)},
        "limits": {"aws.amazon.com/neuroncore": str(cores)},
    }
    pod["nodeSelector"] = {"node.kubernetes.io/instance-type": "inf2.8xlarge"}
    pod["tolerations"] = [
        {"key": "aws.amazon.com/neuron", "operator": "Exists", "effect": "NoSchedule"}
    ]
    return body


def available(api: Api, name: str, replicas: int) -> dict[str, Any] | None:
    found = api.get(f"{DEPLOYMENTS}/{name}").body
    status = found.get("status", {})
    done = (
        status.get("availableReplicas", 0) == replicas
        and status.get("replicas", 0) == replicas
        and status.get("observedGeneration") == found["metadata"]["generation"]
    )
    return found if done else None


def test_default_topology_has_gpu_and_neuron_node_groups(api: Api) -> None:
    """EKS Nodes carry node.kubernetes.io/instance-type and eks.amazonaws.com/nodegroup labels,
    extended resources in status.allocatable (nvidia.com/gpu from the NVIDIA device plugin,
    aws.amazon.com/neuron and neuroncore from the Neuron device plugin), and Neuron node groups
    are usually tainted aws.amazon.com/neuron=true:NoSchedule."""
    nodes = items(api, NODES)
    by_type = {n["metadata"]["labels"]["node.kubernetes.io/instance-type"]: n for n in nodes}

    gpu, inf2 = by_type["g5.xlarge"], by_type["inf2.8xlarge"]
    assert gpu["status"]["allocatable"]["nvidia.com/gpu"] == "1"
    assert inf2["status"]["allocatable"]["aws.amazon.com/neuroncore"] == "2"
    assert inf2["status"]["allocatable"]["aws.amazon.com/neuron"] == "1"
    assert inf2["spec"]["taints"] == [
        {"key": "aws.amazon.com/neuron", "value": "true", "effect": "NoSchedule"}
    ]
    assert inf2["metadata"]["labels"]["eks.amazonaws.com/nodegroup"] == "neuron-inf2"
    assert re.fullmatch(r"ip-10-\d+-\d+-\d+\.ec2\.internal", inf2["metadata"]["name"])
    selected = items(api, NODES, labelSelector="eks.amazonaws.com/nodegroup=gpu-g5")
    assert len(selected) == 2


def test_a_topology_file_defines_the_nodes(tmp_path: Path) -> None:
    """A topology file replaces the default fleet."""
    path = tmp_path / "topology.yaml"
    path.write_text(
        textwrap.dedent(
            """
            nodeGroups:
              - name: trn
                instanceType: trn1.32xlarge
                count: 3
                taints: [{key: aws.amazon.com/neuron, value: "true", effect: NoSchedule}]
                allocatable: {cpu: "127", memory: 480Gi, aws.amazon.com/neuroncore: "32"}
            """
        )
    )
    with Sandbox(topology=load_topology(path), controllers=False) as cluster:
        nodes = items(Api(cluster.url), NODES)

    assert [n["metadata"]["labels"]["eks.amazonaws.com/nodegroup"] for n in nodes] == ["trn"] * 3


def test_a_deployment_creates_a_replicaset_and_pods_and_becomes_available(api: Api) -> None:
    """Deployments (kubernetes.io/docs/concepts/workloads/controllers/deployment): the
    controller creates a ReplicaSet named <deployment>-<pod-template-hash> owned by the
    Deployment, which creates pods named <replicaset>-<suffix> with the template's labels and
    an owner reference; status reports replicas, updatedReplicas, readyReplicas,
    availableReplicas and observedGeneration, and the Available condition (reason
    MinimumReplicasAvailable) and Progressing (reason NewReplicaSetAvailable) once complete."""
    created = api.post(DEPLOYMENTS, deployment("web", replicas=3)).body

    done = eventually(lambda: available(api, "web", 3))

    [replicaset] = items(api, REPLICASETS)
    owner = replicaset["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"], owner["controller"]) == (
        "Deployment",
        created["metadata"]["uid"],
        True,
    )
    template_hash = replicaset["metadata"]["labels"]["pod-template-hash"]
    assert replicaset["metadata"]["name"] == f"web-{template_hash}"
    pods = items(api, PODS, labelSelector="app=web")
    assert len(pods) == 3
    for pod in pods:
        assert re.fullmatch(rf"web-{template_hash}-[a-z0-9]{{5}}", pod["metadata"]["name"])
        assert pod["metadata"]["ownerReferences"][0]["uid"] == replicaset["metadata"]["uid"]
        assert pod["status"]["phase"] == "Running"
        assert pod["spec"]["nodeName"]
    status = done["status"]
    assert (status["replicas"], status["updatedReplicas"], status["readyReplicas"]) == (3, 3, 3)
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Available"]["status"] == "True"
    assert conditions["Available"]["reason"] == "MinimumReplicasAvailable"
    assert conditions["Progressing"]["reason"] == "NewReplicaSetAvailable"


def test_pods_turn_ready_after_the_delay() -> None:
    """A bound pod is Pending (PodScheduled=True) until its containers start, then Running
    with Ready=True; the sandbox's kubelet takes ready_delay seconds."""
    with Sandbox(ready_delay=1.0) as cluster:
        api = Api(cluster.url)
        started = time.monotonic()
        api.post(DEPLOYMENTS, deployment("web", replicas=1))
        pod = eventually(lambda: [p for p in items(api, PODS) if p["spec"].get("nodeName")])[0]
        ready = eventually(
            lambda: [p for p in items(api, PODS) if p["status"].get("phase") == "Running"]
        )[0]
        waited = time.monotonic() - started

    assert pod["status"]["phase"] == "Pending"
    assert pod["status"]["conditions"][0]["type"] == "PodScheduled"
    assert waited >= 1.0
    conditions = {c["type"]: c["status"] for c in ready["status"]["conditions"]}
    assert conditions == {
        "PodScheduled": "True",
        "Initialized": "True",
        "ContainersReady": "True",
        "Ready": "True",
    }
    assert ready["status"]["containerStatuses"][0]["ready"] is True


def test_pods_spread_over_the_nodes_that_fit(api: Api) -> None:
    """The scheduler's default scoring prefers the least allocated node, so pods without
    requests spread over the untainted nodes instead of piling onto one."""
    api.post(DEPLOYMENTS, deployment("web", replicas=3))
    eventually(lambda: available(api, "web", 3))

    nodes = {p["spec"]["nodeName"] for p in items(api, PODS)}
    assert len(nodes) == 3
    assert not any("10-2-" in node for node in nodes)  # the tainted inf2 group is 10.2.x.x


def test_neuron_pods_land_only_on_inf2_nodes(api: Api) -> None:
    """Scheduling (kubernetes.io "Assigning Pods to Nodes", "Taints and Tolerations"): a pod
    runs only on a node matching its nodeSelector, whose taints it tolerates and whose
    allocatable resources cover its requests."""
    api.post(DEPLOYMENTS, neuron_deployment("neuron", replicas=2, cores=2))
    eventually(lambda: available(api, "neuron", 2))

    nodes = {n["metadata"]["name"]: n for n in items(api, NODES)}
    placed = [nodes[p["spec"]["nodeName"]] for p in items(api, PODS)]
    types = {n["metadata"]["labels"]["node.kubernetes.io/instance-type"] for n in placed}
    assert types == {"inf2.8xlarge"}
    assert len({n["metadata"]["name"] for n in placed}) == 2  # 2 cores each: one pod per node


def test_a_pod_that_fits_nowhere_stays_pending_unschedulable(api: Api) -> None:
    """A pod no node can take stays Pending with condition PodScheduled=False, reason
    Unschedulable, and a message counting the nodes and why each was rejected."""
    api.post(DEPLOYMENTS, neuron_deployment("huge", replicas=1, cores=64))

    def unschedulable() -> dict[str, Any] | None:
        for pod in items(api, PODS):
            for condition in pod.get("status", {}).get("conditions", []):
                if condition["type"] == "PodScheduled" and condition["status"] == "False":
                    return pod
        return None

    pod = eventually(unschedulable)
    condition = pod["status"]["conditions"][0]
    assert condition["reason"] == "Unschedulable"
    assert condition["message"].startswith("0/5 nodes are available:")
    assert "2 Insufficient aws.amazon.com/neuroncore" in condition["message"]
    assert "nodeName" not in pod["spec"]

    def availability() -> dict[str, Any] | None:
        # The deployment controller writes its conditions on its own schedule (a real one may
        # not have yet when the scheduler has already answered).
        status = api.get(f"{DEPLOYMENTS}/huge").body.get("status", {})
        return next((c for c in status.get("conditions", []) if c["type"] == "Available"), None)

    assert eventually(availability)["status"] == "False"


def test_untolerated_taints_keep_pods_off_neuron_nodes(api: Api) -> None:
    """A pod without the aws.amazon.com/neuron toleration is not scheduled onto tainted inf2
    nodes, even when it asks for their resources."""
    body = neuron_deployment("no-toleration", replicas=1, cores=1)
    del body["spec"]["template"]["spec"]["tolerations"]
    api.post(DEPLOYMENTS, body)

    pod = eventually(lambda: [p for p in items(api, PODS) if p.get("status", {}).get("conditions")])
    message = pod[0]["status"]["conditions"][0]["message"]
    assert (
        "untolerated taint" in message
    )  # v1.36 counts nodes: "2 node(s) had untolerated taint(s)"


def test_scaling_and_deletion(api: Api) -> None:
    """Scaling a Deployment changes its ReplicaSet's replicas and the pod count; deleting it
    removes the ReplicaSet and pods by garbage collection."""
    api.post(DEPLOYMENTS, quick_to_end(deployment("web", replicas=3)))
    eventually(lambda: available(api, "web", 3))

    api.merge(f"{DEPLOYMENTS}/web", {"spec": {"replicas": 1}})
    eventually(lambda: available(api, "web", 1))
    # kwok, like a kubelet, lets a pod go within its grace period (1 s here)
    eventually(lambda: len(items(api, PODS)) == 1, timeout=60)

    api.request(
        "PATCH", f"{DEPLOYMENTS}/web/scale", {"spec": {"replicas": 4}},
        "application/merge-patch+json",
    )  # fmt: skip
    eventually(lambda: available(api, "web", 4))

    api.delete(f"{DEPLOYMENTS}/web")
    eventually(lambda: not items(api, PODS) and not items(api, REPLICASETS), timeout=60)


def test_a_template_change_rolls_out_a_new_replicaset(api: Api) -> None:
    """Changing the pod template creates a new ReplicaSet (new pod-template-hash, revision 2);
    the old one is scaled to 0 once the new pods are available."""
    api.post(DEPLOYMENTS, quick_to_end(deployment("rollout", replicas=2)))
    eventually(lambda: available(api, "rollout", 2))

    patch = {"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "nginx:2"}]}}}}
    api.strategic(f"{DEPLOYMENTS}/rollout", patch)

    def rolled() -> bool:
        sets = items(api, REPLICASETS)
        replicas = sorted((rs["spec"]["replicas"], _revision(rs)) for rs in sets)
        return replicas == [(0, "1"), (2, "2")] and bool(available(api, "rollout", 2))

    # kwok starts a pod in 1-6 s and reports it Ready 1-6 s later; the two new pods come one
    # after the other (maxSurge 1, maxUnavailable 0). A name no other test uses: its
    # ReplicaSets' names are new to the controllers.
    eventually(rolled, timeout=120, explain=lambda: rollout_state(api, "rollout"))

    def images() -> set[str]:
        return {p["spec"]["containers"][0]["image"] for p in items(api, PODS)}

    eventually(lambda: images() == {"nginx:2"}, timeout=90)  # old pods end within their grace


def rollout_state(api: Api, name: str) -> dict[str, Any]:
    """What a rollout that did not finish looked like: each ReplicaSet's desired, current and
    available replicas, the Deployment's status, and each pod's image, phase and readiness."""
    sets = items(api, REPLICASETS)
    pods = items(api, PODS)
    return {
        "replicasets": sorted(
            (_revision(rs), rs["spec"]["replicas"], rs.get("status", {}).get("replicas"),
             rs.get("status", {}).get("availableReplicas"))
            for rs in sets
        ),
        "deployment": api.get(f"{DEPLOYMENTS}/{name}").body.get("status"),
        "pods": sorted(
            (p["metadata"]["name"], p["spec"]["containers"][0]["image"],
             p["status"].get("phase"), "deleting" if p["metadata"].get("deletionTimestamp") else "",
             [c["status"] for c in p["status"].get("conditions", []) if c["type"] == "Ready"])
            for p in pods
        ),
    }  # fmt: skip


def _revision(replicaset: dict[str, Any]) -> str:
    return str(replicaset["metadata"]["annotations"]["deployment.kubernetes.io/revision"])


def test_kubectl_waits_for_a_deployment_to_be_available(kubectl: Kubectl) -> None:
    """kubectl wait --for=condition=Available works on the simulated Deployment; kubectl get
    shows the Ready column."""
    manifest = textwrap.dedent(
        """
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: web}
        spec:
          replicas: 3
          selector: {matchLabels: {app: web}}
          template:
            metadata: {labels: {app: web}}
            spec: {containers: [{name: main, image: "nginx:1"}]}
        """
    )
    kubectl.ok("apply", "-f", "-", stdin=manifest)

    kubectl.ok("wait", "--for=condition=Available", "deployment/web", "--timeout=20s")

    assert kubectl.ok("get", "deployment", "web").split()[5:7] == ["web", "3/3"]
    assert len(kubectl.ok("get", "pods", "-l", "app=web", "-o", "name").split()) == 3


def test_services_get_endpoints_of_their_ready_pods(api: Api) -> None:
    """Services (kubernetes.io "Service", "EndpointSlices"): a Service with a selector gets an
    Endpoints object of the same name and an EndpointSlice labelled
    kubernetes.io/service-name, listing the IPs of the pods it selects, with the target port."""
    api.post(DEPLOYMENTS, deployment("web", replicas=2))
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web"},
        "spec": {
            "selector": {"app": "web"},
            "ports": [{"name": "http", "port": 80, "targetPort": 8080}],
        },
    }
    created = api.post("/api/v1/namespaces/default/services", service).body
    eventually(lambda: available(api, "web", 2))

    def addresses() -> list[str]:
        reply = api.get("/api/v1/namespaces/default/endpoints/web")
        subsets = (reply.body.get("subsets") or [{}]) if reply.status == 200 else [{}]
        return sorted(a["ip"] for a in subsets[0].get("addresses", []))

    ips = sorted(p["status"]["podIP"] for p in items(api, PODS))
    eventually(lambda: addresses() == ips)
    [endpoint_slice] = items(
        api,
        "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
        labelSelector="kubernetes.io/service-name=web",
    )
    assert endpoint_slice["ports"] == [{"port": 8080, "protocol": "TCP", "name": "http"}]
    assert sorted(e["addresses"][0] for e in endpoint_slice["endpoints"]) == ips
    assert created["spec"]["clusterIP"].startswith("10.100.")
