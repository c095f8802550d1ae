"""The gatewayapi router where the route sends the baseline's traffic to an InferencePool, on the
real kube-apiserver with the Inference Extension's own v1 CRD (scripts/control-plane.sh installs
it from ``sigs.k8s.io/gateway-api-inference-extension``, as the Gateway API CRDs).

The shapes follow the extension's ``inferencepool-rollout`` guide (an HTTPRoute whose
backendRefs are InferencePools) and llm-d's blue-green guide (each pool with an endpoint picker
of its own, a Deployment whose ``--pool-name`` names the pool, behind a Service the pool's
``endpointPickerRef`` names).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import config

from acceltrial.api.spec import TrialSpec
from acceltrial.api.status import GatewayApiOriginal
from acceltrial.engine.candidate import TrialRef, candidate_labels
from acceltrial.kube.gateway import Kube
from acceltrial.providers.routing.configure import gateway_router
from acceltrial.providers.routing.gatewayapi import GatewayApiRouter
from acceltrial.providers.routing.pools import PoolRouter
from tests.handlers.conftest import trial_spec
from tests.sandbox.conftest import TRIALS, Api, Backend, example

NS = "default"
POOLS = f"/apis/inference.networking.k8s.io/v1/namespaces/{NS}/inferencepools"
ALPHA = "inference.networking.x-k8s.io"
ROUTES = f"/apis/gateway.networking.k8s.io/v1/namespaces/{NS}/httproutes"
DEPLOYMENTS = f"/apis/apps/v1/namespaces/{NS}/deployments"
SERVICES = f"/api/v1/namespaces/{NS}/services"
POOL_REF = {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": "llama3-gpu"}
GPU_PODS = {"app": "llama3-gpu", "model": "llama3-8b", "accelerator": "gpu"}
PREFLIGHT_ONLY = TrialRef("llama3-inf2", NS, "0f6c1b8e-0000-4000-8000-0000000000aa")
"""The trial of tests that create nothing it would own."""


def deployment(name: str, labels: dict[str, str], args: list[str] | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": f"{name}:1"}
    if args is not None:
        container["args"] = args
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}}},
    }  # fmt: skip


def pool(name: str, selector: dict[str, str], picker: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "selector": {"matchLabels": selector},
        "targetPorts": [{"number": 8000}],
    }
    if picker is not None:
        spec["endpointPickerRef"] = {"name": picker, "port": {"number": 9002}}
    return {"apiVersion": "inference.networking.k8s.io/v1", "kind": "InferencePool",
            "metadata": {"name": name}, "spec": spec}  # fmt: skip


def route(*refs: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": "llama3"},
        "spec": {"parentRefs": [{"name": "inference-gateway"}],
                 "rules": [{"name": "chat", "backendRefs": list(refs)}]},
    }  # fmt: skip


@pytest.fixture
def served(cluster: Backend, backend: str) -> Backend:
    if backend != "real":
        pytest.skip("InferencePools are served by the real control plane: make control-plane")
    return cluster


@pytest.fixture
def trial(served: Backend, with_crd: Api) -> TrialRef:
    """A real AcceleratorTrial to own the candidate's pool and picker: the real plane's garbage
    collector deletes what names an owner it cannot find, once the kind is served."""
    body = example() | {"metadata": {"name": PREFLIGHT_ONLY.name}}
    uid = with_crd.post(TRIALS.replace("/default/", f"/{NS}/"), body).body["metadata"]["uid"]
    return TrialRef(PREFLIGHT_ONLY.name, NS, uid)


def install(api: Api, picker: bool = True) -> dict[str, Any]:
    """The GPU baseline, its pool (and endpoint picker) and the route; the baseline as stored."""
    baseline = deployment("llama3-gpu", GPU_PODS)
    assert api.post(DEPLOYMENTS, baseline).status == 201
    selector = {"model": "llama3-8b", "accelerator": "gpu"}
    assert (
        api.post(POOLS, pool("llama3-gpu", selector, "llama3-gpu-epp" if picker else None)).status
        == 201
    )
    if picker:
        epp = {"app": "llama3-gpu-epp"}
        args = ["--pool-name", "llama3-gpu", "--pool-namespace", NS, "--v=2"]
        assert api.post(DEPLOYMENTS, deployment("llama3-gpu-epp", epp, args)).status == 201
        ports = [{"name": "grpc", "port": 9002}]
        service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "llama3-gpu-epp"},
                   "spec": {"selector": epp, "ports": ports}}  # fmt: skip
        assert api.post(SERVICES, service).status == 201
    assert api.post(ROUTES, route(POOL_REF)).status == 201
    stored: dict[str, Any] = api.get(f"{DEPLOYMENTS}/llama3-gpu").body
    return stored


def router_for(
    kube: Kube,
    baseline: dict[str, Any],
    spec: TrialSpec | None = None,
    trial: TrialRef = PREFLIGHT_ONLY,
) -> Callable[[], Any]:
    """A router as one tick of the operator builds it."""
    return lambda: gateway_router(kube, spec or trial_spec(), trial, "llama3-gpu", lambda: baseline)


def test_a_route_to_the_baselines_pool_is_split_between_two_pools_and_restored_exactly(
    served: Backend, api: Api, trial: TrialRef
) -> None:
    baseline = install(api)
    kube = Kube(config.new_client_from_config(config_file=str(served.kubeconfig)))
    tick = router_for(kube, baseline, trial=trial)
    router = tick()
    assert isinstance(router, PoolRouter)
    assert router.problems() == []
    assert router.unselected_labels() == {"model", "accelerator"}
    found = api.get(f"{ROUTES}/llama3").body
    original = router.snapshot()
    assert isinstance(original, GatewayApiOriginal)

    tick().set_weight(5, original)
    refs = api.get(f"{ROUTES}/llama3").body["spec"]["rules"][0]["backendRefs"]
    assert refs == [
        {**POOL_REF, "weight": 95},
        {**POOL_REF, "name": "llama3-inf2-candidate", "weight": 5},
    ]
    created = api.get(f"{POOLS}/llama3-inf2-candidate").body
    assert created["spec"]["selector"]["matchLabels"] == candidate_labels(trial)
    assert created["spec"]["targetPorts"] == [{"number": 8000}]
    assert created["spec"]["endpointPickerRef"]["name"] == "llama3-inf2-candidate-epp"
    assert created["metadata"]["ownerReferences"][0]["uid"] == trial.uid
    picker = api.get(f"{DEPLOYMENTS}/llama3-inf2-candidate-epp").body
    args = picker["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args == ["--pool-name", "llama3-inf2-candidate", "--pool-namespace", NS, "--v=2"]
    labels = picker["spec"]["template"]["metadata"]["labels"]
    assert not candidate_labels(trial).items() <= labels.items(), "not in the candidate's pool"
    assert api.get(f"{SERVICES}/llama3-inf2-candidate-epp").status == 200
    assert tick().weight(original) == 5
    assert tick().conflict(5, original) is None
    tick().set_weight(50, original)
    assert tick().weight(original) == 50

    tick().restore(original)
    after = api.get(f"{ROUTES}/llama3").body
    assert after["spec"] == found["spec"], "the route exactly as found"
    assert api.get(f"{POOLS}/llama3-inf2-candidate").status == 404
    assert api.get(f"{DEPLOYMENTS}/llama3-inf2-candidate-epp").status in (404, 200)  # GC'd
    assert api.get(f"{SERVICES}/llama3-inf2-candidate-epp").status == 404


def test_at_promotion_the_candidates_pool_and_picker_are_handed_over(
    served: Backend, api: Api, trial: TrialRef
) -> None:
    baseline = install(api)
    kube = Kube(config.new_client_from_config(config_file=str(served.kubeconfig)))
    tick = router_for(kube, baseline, trial=trial)
    original = tick().snapshot()
    tick().set_weight(100, original)
    tick().release()
    handed = api.get(f"{POOLS}/llama3-inf2-candidate").body
    assert not handed["metadata"].get("ownerReferences"), "it outlives the trial"
    assert handed["metadata"]["labels"]["acceltrial.dev/promoted-by"] == trial.name
    picker = api.get(f"{DEPLOYMENTS}/llama3-inf2-candidate-epp").body
    assert not picker["metadata"].get("ownerReferences")
    assert "inferencePool" in tick().committed()


def test_a_pool_without_a_picker_gets_a_candidate_pool_without_one(
    served: Backend, api: Api, trial: TrialRef
) -> None:
    baseline = install(api, picker=False)
    kube = Kube(config.new_client_from_config(config_file=str(served.kubeconfig)))
    tick = router_for(kube, baseline, trial=trial)
    original = tick().snapshot()
    tick().set_weight(25, original)
    created = api.get(f"{POOLS}/llama3-inf2-candidate").body
    assert "endpointPickerRef" not in created["spec"]
    assert api.get(f"{DEPLOYMENTS}/llama3-inf2-candidate-epp").status == 404
    tick().restore(original)
    assert api.get(f"{POOLS}/llama3-inf2-candidate").status == 404


def test_preflight_refuses_what_the_setup_cannot_do_and_says_why(served: Backend, api: Api) -> None:
    baseline = install(api)
    kube = Kube(config.new_client_from_config(config_file=str(served.kubeconfig)))
    # Another model server whose pods the pool selects too.
    other = deployment("llama3-gpu-spare", {**GPU_PODS, "app": "spare"})
    assert api.post(DEPLOYMENTS, other).status == 201
    shadow = trial_spec().model_copy(deep=True)
    shadow_spec = TrialSpec.model_validate(
        {**shadow.model_dump(mode="json", by_alias=True, exclude_none=True),
         "steps": [{"mirror": 100, "duration": "6s"}, {"weight": 5, "duration": "6s"}]}
    )  # fmt: skip
    problems = router_for(kube, baseline, shadow_spec)().problems()
    assert any("also selects the pods of Deployment(s) llama3-gpu-spare" in p for p in problems)
    assert any("a mirror step copies requests to a pool" in p for p in problems)
    # Another rule sends to the baseline's Service: a trial splits the pool's rules or those.
    both = route(POOL_REF)
    both["spec"]["rules"].append(
        {"name": "completions", "backendRefs": [{"name": "llama3-gpu", "port": 8000}]}
    )
    assert (
        api.request(
            "PUT", f"{ROUTES}/llama3", {**api.get(f"{ROUTES}/llama3").body, "spec": both["spec"]}
        ).status
        == 200
    )
    problems = router_for(kube, baseline)().problems()
    assert any(
        "rule 'completions' send the baseline's traffic to Service llama3-gpu" in p
        for p in problems
    ), problems


def test_a_v1alpha2_or_missing_pool_is_refused_with_the_fix(served: Backend, api: Api) -> None:
    baseline = deployment("llama3-gpu", GPU_PODS)
    assert api.post(DEPLOYMENTS, baseline).status == 201
    legacy = copy.deepcopy(POOL_REF) | {"group": ALPHA}
    missing = copy.deepcopy(POOL_REF) | {"name": "gone"}
    assert api.post(ROUTES, route(legacy, missing)).status == 201
    kube = Kube(config.new_client_from_config(config_file=str(served.kubeconfig)))
    router = router_for(kube, api.get(f"{DEPLOYMENTS}/llama3-gpu").body)()
    assert isinstance(router, GatewayApiRouter)
    problems = router.problems()
    assert any("(v1alpha2, deprecated)" in p and "move the pool" in p for p in problems), problems
    assert any("InferencePool gone, which the route names, not found" in p for p in problems)
