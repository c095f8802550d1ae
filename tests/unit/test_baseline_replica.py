"""The baseline's temporary replica for the capacity sweep, as manifests: outside every route
(none of the labels the Service, the Deployment or the router select by), owned by the trial,
and kept to the existing nodes of the baseline's instance types, so the scheduler finds it room
or says it has none and no autoscaler adds a node for it."""

from __future__ import annotations

from typing import Any

from acceltrial.engine.baseline_replica import (
    derive_replica,
    derive_replica_service,
    hostnames,
    replica_name,
    unschedulable,
)
from acceltrial.engine.candidate import TrialRef

TRIAL = TrialRef("llama3-inf2", "ml", "uid-1")
BASELINE: dict[str, Any] = {
    "metadata": {"name": "llama3-gpu"},
    "spec": {
        "selector": {"matchLabels": {"app": "llama3", "tier": "serving"}},
        "template": {
            "metadata": {"labels": {"app": "llama3", "tier": "serving", "pool": "llm",
                                    "team": "search"}},
            "spec": {
                "containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.8.5",
                                "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]},
                    ]}],
                }}},
            },
        },
    },
}  # fmt: skip
SERVICE = {"metadata": {"name": "llama3"},
           "spec": {"selector": {"app": "llama3"}, "ports": [{"name": "http", "port": 8000,
                                                              "nodePort": 30080}]}}  # fmt: skip


def node(name: str, instance_type: str, hostname: str | None = None) -> dict[str, Any]:
    labels = {"node.kubernetes.io/instance-type": instance_type}
    if hostname:
        labels["kubernetes.io/hostname"] = hostname
    return {"metadata": {"name": name, "labels": labels}}


def test_the_replica_carries_no_label_that_routes_production_traffic() -> None:
    replica = derive_replica(BASELINE, SERVICE, TRIAL, ["gpu-a"], frozenset({"pool"}))
    assert replica["metadata"]["name"] == replica_name(TRIAL) == "llama3-inf2-baseline-sweep"
    assert replica["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    assert replica["spec"]["replicas"] == 1
    labels = replica["spec"]["template"]["metadata"]["labels"]
    assert labels == {"team": "search", "acceltrial.dev/trial": "llama3-inf2",
                      "acceltrial.dev/variant": "baseline-sweep"}  # fmt: skip
    assert replica["spec"]["selector"]["matchLabels"].items() <= labels.items()
    container = replica["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "vllm/vllm-openai:v0.8.5", "the baseline's own build"
    assert BASELINE["spec"]["template"]["metadata"]["labels"]["app"] == "llama3", "not modified"


def test_the_replica_is_kept_to_the_given_hosts_within_each_of_the_templates_terms() -> None:
    replica = derive_replica(BASELINE, SERVICE, TRIAL, ["gpu-a", "gpu-b"])
    required = replica["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]  # fmt: skip
    assert required["nodeSelectorTerms"] == [{"matchExpressions": [
        {"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]},
        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["gpu-a", "gpu-b"]},
    ]}]  # fmt: skip
    bare = {"spec": {"template": {"spec": {"containers": [{"name": "x"}]}}}}
    terms = derive_replica(bare, None, TRIAL, ["gpu-a"])["spec"]["template"]["spec"]["affinity"]
    assert terms["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["gpu-a"]}]}]
    }  # fmt: skip


def test_the_replica_service_selects_only_the_replica_on_the_baselines_ports() -> None:
    service = derive_replica_service(SERVICE, TRIAL)
    assert service["spec"]["selector"] == {"acceltrial.dev/trial": "llama3-inf2",
                                           "acceltrial.dev/variant": "baseline-sweep"}  # fmt: skip
    assert service["spec"]["ports"] == [{"name": "http", "port": 8000}]
    assert service["metadata"]["ownerReferences"][0]["kind"] == "AcceleratorTrial"


def test_the_hosts_are_every_node_of_the_baselines_instance_types() -> None:
    nodes = [node("n1", "g5.xlarge", "ip-10-0-0-1"), node("n2", "g5.xlarge"),
             node("n3", "g5.xlarge", "ip-10-0-0-3"), node("n4", "inf2.8xlarge"),
             node("n5", "m5.xlarge")]  # fmt: skip
    pods = [{"spec": {"nodeName": "n1"}}, {"spec": {"nodeName": "n1"}}, {"spec": {}}]
    assert hostnames(pods, nodes) == ["ip-10-0-0-1", "ip-10-0-0-3", "n2"]
    assert hostnames([{"spec": {}}], nodes) == [], "no baseline pod placed: nowhere"


def test_the_schedulers_refusal_is_read_from_the_pod() -> None:
    refused = {"status": {"conditions": [{"type": "PodScheduled", "status": "False",
               "reason": "Unschedulable",
               "message": "0/5 nodes are available: 2 Insufficient nvidia.com/gpu."}]}}  # fmt: skip
    pending = {"status": {"conditions": [{"type": "PodScheduled", "status": "True"}]}}
    assert unschedulable([pending, refused]) == (
        "0/5 nodes are available: 2 Insufficient nvidia.com/gpu."
    )
    assert unschedulable([pending, {}]) is None
