"""InferencePools on plain values (engine/pools.py): which pool is the baseline's, what preflight
refuses, the candidate's pool and the copy of the endpoint picker."""

from __future__ import annotations

from typing import Any

import pytest

from acceltrial.engine.pools import (
    baseline_pool_name,
    candidate_pool,
    picker_for_pool,
    picker_service_name,
    pool_problems,
)
from acceltrial.engine.routes import RouteShape, Service, split_rule

V1 = "inference.networking.k8s.io"
GPU_PODS = {"app": "llama3-gpu", "model": "llama3-8b", "accelerator": "gpu"}
OWNER = {"kind": "AcceleratorTrial", "name": "llama3-inf2", "uid": "u"}


def ref(name: str, group: str = V1, weight: int | None = None) -> dict[str, Any]:
    found: dict[str, Any] = {"group": group, "kind": "InferencePool", "name": name}
    return found if weight is None else {**found, "weight": weight}


def pool(selector: dict[str, str], picker: str | None = "gpu-epp") -> dict[str, Any]:
    spec: dict[str, Any] = {"selector": {"matchLabels": selector},
                            "targetPorts": [{"number": 8000}], "appProtocol": "http"}  # fmt: skip
    if picker:
        spec["endpointPickerRef"] = {"name": picker, "port": {"number": 9002},
                                     "failureMode": "FailOpen"}  # fmt: skip
    return {"metadata": {"name": "gpu", "namespace": "serving"}, "spec": spec}


def deployment(name: str, labels: dict[str, str], args: list[str] | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "epp", "image": "epp:v1.6.0", "args": args or []}
    template = {"metadata": {"labels": labels}, "spec": {"containers": [container]}}
    return {"metadata": {"name": name, "namespace": "serving"},
            "spec": {"replicas": 2, "template": template}}  # fmt: skip


BASELINE = deployment("llama3-gpu", GPU_PODS)
RULES = [{"name": "chat", "backendRefs": [ref("other"), ref("gpu")]}]


def test_the_baselines_pool_is_the_one_selecting_its_pods() -> None:
    pools = {"gpu": pool({"model": "llama3-8b"}), "other": pool({"model": "mistral"})}
    assert baseline_pool_name(RULES, pools, BASELINE) == "gpu"
    assert baseline_pool_name(RULES, {"other": pools["other"]}, BASELINE) is None
    assert baseline_pool_name(RULES, {"gpu": pool({})}, BASELINE) is None, "empty selects none"


def test_preflight_names_a_v1alpha2_pool_a_missing_one_a_shared_one_and_a_mirror() -> None:
    rules = [{"backendRefs": [ref("gpu"), ref("legacy", "inference.networking.x-k8s.io"),
                              ref("gone")]}]  # fmt: skip
    spare = deployment("llama3-spare", {**GPU_PODS, "app": "spare"})
    pools = {"gpu": pool({"model": "llama3-8b"}), "gone": None}
    problems = pool_problems(rules, pools, BASELINE, [BASELINE, spare], mirrors=True)
    assert len(problems) == 4, problems
    assert "InferencePool legacy is of inference.networking.x-k8s.io (v1alpha2" in problems[0]
    assert problems[1] == "InferencePool gone, which the route names, not found"
    assert "also selects the pods of Deployment(s) llama3-spare" in problems[2]
    assert "use weighted steps only" in problems[3]
    alone = pool_problems(RULES[:1], {"gpu": pools["gpu"], "other": pool({"m": "x"})}, BASELINE,
                          [BASELINE], mirrors=False)  # fmt: skip
    assert alone == []


def test_the_candidates_pool_is_the_baselines_spec_with_its_own_pods_and_picker() -> None:
    baseline = pool({"model": "llama3-8b"})
    made = candidate_pool(baseline, "llama3-inf2-candidate", selector={"variant": "candidate"},
                          labels={"part": "pool"}, owner=OWNER, picker="cand-epp")  # fmt: skip
    assert made["apiVersion"] == "inference.networking.k8s.io/v1"
    assert made["metadata"] == {"name": "llama3-inf2-candidate", "namespace": "serving",
                                "labels": {"part": "pool"}, "ownerReferences": [OWNER]}  # fmt: skip
    assert made["spec"]["selector"] == {"matchLabels": {"variant": "candidate"}}
    assert made["spec"]["targetPorts"] == [{"number": 8000}]
    assert made["spec"]["appProtocol"] == "http"
    assert made["spec"]["endpointPickerRef"] == {"name": "cand-epp", "port": {"number": 9002},
                                                 "failureMode": "FailOpen"}  # fmt: skip
    assert baseline["spec"]["selector"] == {"matchLabels": {"model": "llama3-8b"}}, "not changed"
    bare = candidate_pool(pool({"m": "x"}, picker=None), "c", selector={"v": "c"}, labels={},
                          owner=OWNER, picker=None)  # fmt: skip
    assert "endpointPickerRef" not in bare["spec"]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--pool-name", "gpu", "--v=2"], ["--pool-name", "cand", "--v=2"]),
        (
            ["--pool-name=gpu", "--pool-namespace=serving"],
            ["--pool-name=cand", "--pool-namespace=serving"],
        ),
        (["-poolName", "gpu"], ["-poolName", "cand"]),
    ],
    ids=["separate", "equals", "older-flag"],
)
def test_the_picker_copy_serves_the_candidates_pool(args: list[str], expected: list[str]) -> None:
    copy = picker_for_pool(deployment("gpu-epp", {"app": "gpu-epp"}, args), "cand", "cand-epp",
                           {"part": "endpoint-picker"}, OWNER)  # fmt: skip
    container = copy["spec"]["template"]["spec"]["containers"][0]
    assert container["args"] == expected
    assert container["image"] == "epp:v1.6.0"
    assert copy["spec"]["selector"] == {"matchLabels": {"part": "endpoint-picker"}}
    assert copy["spec"]["template"]["metadata"]["labels"] == {"part": "endpoint-picker"}
    assert copy["spec"]["replicas"] == 2


def test_a_picker_naming_no_pool_is_refused_with_the_flags_looked_for() -> None:
    with pytest.raises(ValueError, match="names no pool with --pool-name"):
        picker_for_pool(deployment("gpu-epp", {"app": "e"}, ["--v=2"]), "c", "c-epp", {}, OWNER)


def test_only_a_service_picker_is_copied() -> None:
    assert picker_service_name(pool({"m": "x"})) == "gpu-epp"
    assert picker_service_name(pool({"m": "x"}, picker=None)) is None
    other = pool({"m": "x"})
    other["spec"]["endpointPickerRef"]["kind"] = "Backend"
    other["spec"]["endpointPickerRef"]["group"] = "example.com"
    assert picker_service_name(other) is None


def test_a_rule_to_the_baselines_pool_splits_like_a_service_rule() -> None:
    shape = RouteShape(
        "serving",
        Service("gpu", "serving", kind="InferencePool", group=V1),
        Service("llama3-inf2-candidate", "serving", kind="InferencePool", group=V1),
    )
    assert split_rule([ref("gpu", weight=3), ref("other")], shape, 25) == [
        ref("gpu", weight=225),
        ref("other", weight=100),
        ref("llama3-inf2-candidate", weight=75),
    ]
    assert split_rule([ref("gpu"), ref("other")], shape, 0) == [ref("gpu"), ref("other")]
    service = {"name": "gpu", "port": 8000}
    assert not shape.baseline.matches(service, "serving"), "a Service of that name is not the pool"
