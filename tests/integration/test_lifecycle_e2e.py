"""The operator end to end: `kopf run -m acceltrial.handlers` against the sandbox, judging a
simulated vLLM fleet through a real Prometheus. A good candidate is promoted; an erroring one
is rolled back with the HTTPRoute exactly as it was found."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from acceltrial.sandbox.cluster import Sandbox
from tests.conftest import REPO
from tests.integration.fleet import Fleet, Profile, serving
from tests.integration.prometheus_server import running_prometheus
from tests.sandbox.conftest import Api, eventually

pytestmark = pytest.mark.slow

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
ROUTE = {"name": "llama3-gpu", "port": 8000}
PROFILES = {
    ("promote", "baseline"): Profile(),
    ("promote", "candidate"): Profile(median=0.24),
    ("regress", "baseline"): Profile(),
    ("regress", "candidate"): Profile(error_ratio=0.2),
}


@pytest.fixture(scope="module")
def cluster() -> Iterator[Sandbox]:
    with Sandbox(ready_delay=0.2) as sandbox:
        yield sandbox


@pytest.fixture(scope="module")
def api(cluster: Sandbox) -> Api:
    api = Api(cluster.url)
    crd = yaml.safe_load((REPO / "crds" / "acceltrial.dev_acceleratortrials.yaml").read_text())
    assert api.post(CRDS, crd).status == 201
    return api


@pytest.fixture(scope="module")
def prometheus_url(cluster: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serving(Fleet(cluster.url, PROFILES)) as port:
        scrape = (
            "scrape_configs:\n  - job_name: fleet\n"
            f"    static_configs: [{{targets: ['127.0.0.1:{port}']}}]\n"
        )
        with running_prometheus(tmp_path_factory.mktemp("prom") / "data", scrape) as url:
            yield url


@pytest.fixture(scope="module")
def operator(
    cluster: Sandbox, api: Api, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    env = os.environ | {
        "KUBECONFIG": str(cluster.kubeconfig),
        "ACCELTRIAL_METRICS_PORT": "0",
        "ACCELTRIAL_TICK_SECONDS": "0.5",
        "HOME": str(tmp_path_factory.mktemp("home")),
    }
    args = [sys.executable, "-m", "kopf", "run", "-m", "acceltrial.handlers", "--standalone", "-A"]
    log = (tmp_path_factory.mktemp("operator") / "operator.log").open("w")
    process = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


def install_baseline(api: Api, namespace: str) -> None:
    api.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                    "metadata": {"name": namespace}})  # fmt: skip
    labels = {"app": "llama3"}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "llama3-gpu", "namespace": namespace},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": {"node.kubernetes.io/instance-type": "g5.2xlarge"},
                    "containers": [{
                        "name": "vllm", "image": "vllm/vllm-openai:0.11",
                        "resources": {"limits": {"nvidia.com/gpu": "1"}},
                    }],
                },
            },
        },
    }  # fmt: skip
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "llama3-gpu", "namespace": namespace},
        "spec": {"selector": labels, "ports": [{"name": "http", "port": 8000}]},
    }
    route = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "llama3", "namespace": namespace},
        "spec": {"parentRefs": [{"name": "inference"}], "rules": [{"backendRefs": [ROUTE]}]},
    }
    assert api.post(f"/apis/apps/v1/namespaces/{namespace}/deployments", deployment).status == 201
    assert api.post(f"/api/v1/namespaces/{namespace}/services", service).status == 201
    routes = f"/apis/gateway.networking.k8s.io/v1/namespaces/{namespace}/httproutes"
    assert api.post(routes, route).status == 201


def trial(namespace: str, prometheus: str) -> dict[str, Any]:
    return {
        "apiVersion": "acceltrial.dev/v1alpha1",
        "kind": "AcceleratorTrial",
        "metadata": {"name": "llama3-inf2", "namespace": namespace},
        "spec": {
            "baseline": {"deploymentRef": {"name": "llama3-gpu"}, "instanceType": "g5.2xlarge"},
            "candidate": {"image": "llama3-neuron:2.21", "instanceType": "inf2.8xlarge",
                          "neuronCores": 2, "replicas": 1},
            "traffic": {"router": "gatewayapi",
                        "gatewayapi": {"httpRouteRef": {"name": "llama3"}}},
            "steps": [{"weight": 5, "duration": "6s"}, {"weight": 25, "duration": "6s"},
                      {"weight": 50, "duration": "6s"}],
            "analysis": {
                "interval": "3s",
                "prometheus": {"address": prometheus},
                "criteria": [
                    {"name": "errors", "metric": "error_ratio", "absolute": {"max": 0.01}},
                    {"name": "p99-latency", "metric": "latency_p99", "relative": {"max": 1.2}},
                ],
                "inconclusiveLimit": 4,
            },
            "promotion": {"bakeTime": "3s"},
            "progressDeadline": "60s",
        },
    }  # fmt: skip


def run_trial(api: Api, namespace: str, prometheus: str) -> dict[str, Any]:
    install_baseline(api, namespace)
    path = f"/apis/acceltrial.dev/v1alpha1/namespaces/{namespace}/acceleratortrials"
    assert api.post(path, trial(namespace, prometheus)).status == 201

    def finished() -> dict[str, Any] | None:
        status: dict[str, Any] = api.get(f"{path}/llama3-inf2").body.get("status", {})
        return status if status.get("phase") in ("Promoted", "RolledBack", "Failed") else None

    result: dict[str, Any] = eventually(finished, timeout=150)
    return result


def backend_refs(api: Api, namespace: str) -> list[dict[str, Any]]:
    route = api.get(f"/apis/gateway.networking.k8s.io/v1/namespaces/{namespace}/httproutes/llama3")
    refs: list[dict[str, Any]] = route.body["spec"]["rules"][0]["backendRefs"]
    return refs


def test_a_good_candidate_is_promoted(api: Api, prometheus_url: str, operator: None) -> None:
    status = run_trial(api, "promote", prometheus_url)
    assert status["phase"] == "Promoted", status.get("message")
    assert status["decision"]["verdict"] == "promote"
    assert backend_refs(api, "promote") == [
        {**ROUTE, "weight": 0},
        {"name": "llama3-inf2-candidate", "port": 8000, "weight": 100},
    ]
    baseline = api.get("/apis/apps/v1/namespaces/promote/deployments/llama3-gpu").body
    assert baseline["spec"]["replicas"] == 0, "scaled to zero, never deleted"
    assert {r["criterion"] for r in status["analysis"]} == {"errors", "p99-latency"}


def test_an_erroring_candidate_is_rolled_back_exactly(
    api: Api, prometheus_url: str, operator: None
) -> None:
    status = run_trial(api, "regress", prometheus_url)
    assert status["phase"] == "RolledBack", status.get("message")
    assert "errors: " in status["decision"]["reason"]
    assert status["decision"]["reason"].endswith("at 5%")
    assert backend_refs(api, "regress") == [ROUTE], "routing restored exactly as found"
    assert status["original"]["httpRoute"]["backendRefs"] == [ROUTE]
    gone = api.get("/apis/apps/v1/namespaces/regress/deployments/llama3-inf2-candidate")
    assert gone.status == 404
    baseline = api.get("/apis/apps/v1/namespaces/regress/deployments/llama3-gpu").body
    assert baseline["spec"]["replicas"] == 2, "the baseline was never touched"
