"""Deriving the Neuron candidate from the baseline GPU Deployment and Service."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from acceltrial.api.spec import TrialSpec
from acceltrial.engine.candidate import (
    NEURON_TOLERATION,
    DerivationError,
    TrialRef,
    derive_deployment,
    derive_service,
    merge_patch,
)

TRIAL = TrialRef("llama3-inf2", "serving", "5f1c")
BASELINE: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "llama3-gpu", "namespace": "serving", "resourceVersion": "42"},
    "spec": {
        "replicas": 4,
        "selector": {"matchLabels": {"app": "llama3"}},
        "template": {
            "metadata": {"labels": {"app": "llama3", "team": "ml"}},
            "spec": {
                "nodeSelector": {
                    "eks.amazonaws.com/nodegroup": "gpu",
                    "topology.kubernetes.io/zone": "a",
                },
                "tolerations": [
                    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
                ],
                "affinity": {
                    "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}
                },
                "containers": [
                    {"name": "proxy", "image": "envoy:1"},
                    {
                        "name": "vllm",
                        "image": "vllm/vllm-openai:0.11",
                        "env": [
                            {"name": "MODEL", "value": "llama3"},
                            {"name": "NEURON_RT_NUM_CORES", "value": "8"},
                        ],
                        "resources": {
                            "requests": {"cpu": "4", "nvidia.com/gpu": "1"},
                            "limits": {"nvidia.com/gpu": "1", "memory": "30Gi"},
                        },
                    },
                ],
            },
        },
    },
}
SERVICE = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "llama3-gpu", "namespace": "serving"},
    "spec": {
        "selector": {"app": "llama3"},
        "ports": [{"name": "http", "port": 8000, "targetPort": 8000, "nodePort": 30001}],
    },
}


def spec(router: str = "gatewayapi", **candidate: Any) -> TrialSpec:
    traffic: dict[str, Any] = {"router": router}
    if router == "gatewayapi":
        traffic["gatewayapi"] = {"httpRouteRef": {"name": "llama3"}}
    return TrialSpec.model_validate(
        {
            "baseline": {
                "deploymentRef": {"name": "llama3-gpu"},
                "instanceType": "g5.2xlarge",
                "container": "vllm",
            },
            "candidate": {
                "image": "llama3-neuron:2.21",
                "instanceType": "inf2.8xlarge",
                "replicas": 2,
                **candidate,
            },
            "traffic": traffic,
            "steps": [{"weight": 5, "duration": "10m"}],
            "analysis": {
                "prometheus": {"address": "http://p:9090"},
                "criteria": [{"name": "e", "metric": "error_ratio", "absolute": {"max": 0.01}}],
            },
        }
    )


def model_container(deployment: dict[str, Any]) -> dict[str, Any]:
    containers = deployment["spec"]["template"]["spec"]["containers"]
    return next(c for c in containers if c["name"] == "vllm")


def test_the_model_container_moves_to_neuroncores() -> None:
    derived = derive_deployment(
        BASELINE, SERVICE, spec(neuronCores=2, compiledArtifacts="s3://models/neff/"), TRIAL
    )
    container = model_container(derived)
    assert container["image"] == "llama3-neuron:2.21"
    assert container["resources"] == {
        "requests": {"cpu": "4", "aws.amazon.com/neuroncore": "2"},
        "limits": {"memory": "30Gi", "aws.amazon.com/neuroncore": "2"},
    }
    assert container["env"] == [
        {"name": "MODEL", "value": "llama3"},
        {"name": "NEURON_RT_NUM_CORES", "value": "2"},
        {"name": "NEURON_COMPILED_ARTIFACTS", "value": "s3://models/neff/"},
    ]
    proxy = derived["spec"]["template"]["spec"]["containers"][0]
    assert proxy == {"name": "proxy", "image": "envoy:1"}


def test_whole_devices_are_requested_as_aws_amazon_com_neuron() -> None:
    container = model_container(derive_deployment(BASELINE, SERVICE, spec(neuronDevices=1), TRIAL))
    assert container["resources"]["limits"]["aws.amazon.com/neuron"] == "1"
    assert all(e["name"] != "NEURON_RT_NUM_CORES" for e in container["env"])


def test_pods_are_pinned_to_the_candidate_instance_type_and_tolerate_neuron() -> None:
    pod = derive_deployment(BASELINE, SERVICE, spec(neuronCores=2), TRIAL)["spec"]["template"][
        "spec"
    ]
    assert pod["nodeSelector"] == {
        "topology.kubernetes.io/zone": "a",
        "node.kubernetes.io/instance-type": "inf2.8xlarge",
    }
    assert pod["tolerations"] == [NEURON_TOLERATION]
    assert "affinity" not in pod


def test_the_neuron_taint_is_tolerated_whatever_its_value() -> None:
    """Node groups taint aws.amazon.com/neuron with various values (true, present, ...); an
    Equal toleration the baseline carried for one value is replaced by Exists."""
    baseline = copy.deepcopy(BASELINE)
    baseline["spec"]["template"]["spec"]["tolerations"] = [
        {
            "key": "aws.amazon.com/neuron",
            "operator": "Equal",
            "value": "true",
            "effect": "NoSchedule",
        }
    ]
    pod = derive_deployment(baseline, SERVICE, spec(neuronCores=2), TRIAL)["spec"]["template"]
    assert pod["spec"]["tolerations"] == [{"key": "aws.amazon.com/neuron", "operator": "Exists"}]


def test_with_gatewayapi_the_baseline_service_does_not_select_the_candidate() -> None:
    derived = derive_deployment(BASELINE, SERVICE, spec(neuronCores=2), TRIAL)
    labels = derived["spec"]["template"]["metadata"]["labels"]
    assert labels == {
        "team": "ml",
        "acceltrial.dev/trial": "llama3-inf2",
        "acceltrial.dev/variant": "candidate",
    }
    assert derived["spec"]["selector"]["matchLabels"] == {
        "acceltrial.dev/trial": "llama3-inf2",
        "acceltrial.dev/variant": "candidate",
    }
    owner = derived["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("AcceleratorTrial", "5f1c", True)


def test_with_replicas_the_candidate_joins_the_baseline_service() -> None:
    derived = derive_deployment(BASELINE, SERVICE, spec("replicas", neuronCores=2), TRIAL)
    assert derived["spec"]["template"]["metadata"]["labels"]["app"] == "llama3"


def test_the_baseline_is_never_modified() -> None:
    before = copy.deepcopy(BASELINE)
    derive_deployment(
        BASELINE,
        SERVICE,
        spec(neuronCores=2, podTemplatePatch={"spec": {"hostNetwork": True}}),
        TRIAL,
    )
    assert before == BASELINE


def test_pod_template_patch_is_merged_last() -> None:
    patch = {
        "metadata": {"annotations": {"a": "1"}},
        "spec": {"tolerations": None, "priorityClassName": "high"},
    }
    template = derive_deployment(
        BASELINE, SERVICE, spec(neuronCores=2, podTemplatePatch=patch), TRIAL
    )["spec"]["template"]
    assert template["metadata"]["annotations"] == {"a": "1"}
    assert "tolerations" not in template["spec"]
    assert template["spec"]["priorityClassName"] == "high"


def test_the_service_copies_ports_and_selects_the_candidate() -> None:
    service = derive_service(SERVICE, TRIAL)
    assert service["metadata"]["name"] == "llama3-inf2-candidate"
    assert service["spec"]["ports"] == [{"name": "http", "port": 8000, "targetPort": 8000}]
    assert service["spec"]["selector"] == {
        "acceltrial.dev/trial": "llama3-inf2",
        "acceltrial.dev/variant": "candidate",
    }


def test_a_missing_container_is_named() -> None:
    broken = spec(neuronCores=2).model_copy(
        update={"baseline": spec().baseline.model_copy(update={"container": "triton"})}
    )
    with pytest.raises(
        DerivationError, match="no container named 'triton' \\(the pod has: proxy, vllm\\)"
    ):
        derive_deployment(BASELINE, SERVICE, broken, TRIAL)


@pytest.mark.parametrize(
    ("target", "patch", "result"),
    [  # RFC 7386 appendix A examples
        ({"a": "b"}, {"a": "c"}, {"a": "c"}),
        ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
        ({"a": "b"}, {"a": None}, {}),
        ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
        ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
        ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
        ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
        ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
    ],
)
def test_merge_patch_follows_rfc_7386(target: Any, patch: Any, result: Any) -> None:
    assert merge_patch(target, patch) == result
