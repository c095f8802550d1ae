"""Fixtures for the operator's parts against a control plane (the real one when it is built,
always in CI; the emulator on a machine without Go): one shared by the modules, or a module's
own when it needs a topology of its own; a namespace per test holding a GPU baseline
(Deployment, Service, HTTPRoute), and a kube gateway whose client records every request it
sends."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from kubernetes import client, config

from acceltrial.api.spec import TrialSpec
from acceltrial.api.trial import TRIAL_GVR
from acceltrial.engine.candidate import TrialRef
from acceltrial.kube.gateway import Kube
from tests.conftest import REPO
from tests.integration.e2e_kit import BACKENDS, backend_of
from tests.sandbox.conftest import IMMEDIATE, Api, Backend, served

PLANE = "real" if "real" in BACKENDS else "emulator"

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
ROUTE = {"name": "llama3-gpu", "port": 8000}
LABELS = {"app": "llama3"}
_NAMESPACES = itertools.count()


class RecordingClient(client.ApiClient):  # type: ignore[misc]
    """An API client that keeps (method, path) of every request it sends."""

    def __init__(self, configuration: client.Configuration) -> None:
        super().__init__(configuration)
        self.sent: list[tuple[str, str]] = []
        send = self.rest_client.request

        def recorded(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
            self.sent.append((method, url.removeprefix(configuration.host).split("?")[0]))
            return send(method, url, *args, **kwargs)

        self.rest_client.request = recorded

    def count(self, method: str, path: str) -> int:
        return self.sent.count((method, path))


@pytest.fixture(scope="session")
def shared_cluster() -> Iterator[Backend]:
    """One control plane for the modules that need nothing special of it (a namespace per
    test): the real one when it is built (always in CI), else the emulator."""
    with backend_of(PLANE, nodes_per_group=16) as sandbox:
        yield sandbox


@pytest.fixture(scope="module")
def cluster(shared_cluster: Backend) -> Backend:
    """The module's control plane (a module needing its own topology overrides this)."""
    return shared_cluster


@pytest.fixture(scope="module")
def api(cluster: Backend) -> Api:
    """The cluster, which serves AcceleratorTrials."""
    api = Api.to(cluster.access)
    crd = yaml.safe_load((REPO / "crds" / "acceltrial.dev_acceleratortrials.yaml").read_text())
    assert api.post(CRDS, crd).status in (201, 409)  # 409: installed for an earlier module
    served(api, crd["metadata"]["name"], "/apis/acceltrial.dev/v1alpha1/acceleratortrials")
    return api


@pytest.fixture
def recorder(cluster: Backend) -> RecordingClient:
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(cluster.kubeconfig), client_configuration=configuration)
    return RecordingClient(configuration)


@pytest.fixture
def kube(recorder: RecordingClient) -> Kube:
    return Kube(recorder)


@pytest.fixture
def namespace(api: Api) -> Iterator[str]:
    """A fresh namespace with the baseline: 2 replicas, its Service and an HTTPRoute to it;
    deleted after the test, so the next ones find room on the shared plane's nodes."""
    name = f"t{next(_NAMESPACES)}"
    api.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                    "metadata": {"name": name}})  # fmt: skip
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "llama3-gpu", "namespace": name},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": LABELS},
            "template": {
                # kwok's pod stages at once: these tests are of the operator, not of pod starts.
                "metadata": {"labels": LABELS, "annotations": IMMEDIATE},
                "spec": {
                    "nodeSelector": {"node.kubernetes.io/instance-type": "g5.xlarge"},
                    "containers": [{"name": "vllm", "image": "vllm/vllm-openai:0.11",
                                    "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
                },
            },
        },
    }  # fmt: skip
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "llama3-gpu", "namespace": name},
        "spec": {"selector": LABELS, "ports": [{"name": "http", "port": 8000}]},
    }
    route = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "llama3", "namespace": name},
        "spec": {"parentRefs": [{"name": "inference"}], "rules": [{"backendRefs": [ROUTE]}]},
    }
    assert api.post(f"/apis/apps/v1/namespaces/{name}/deployments", deployment).status == 201
    assert api.post(f"/api/v1/namespaces/{name}/services", service).status == 201
    routes = f"/apis/gateway.networking.k8s.io/v1/namespaces/{name}/httproutes"
    assert api.post(routes, route).status == 201
    yield name
    api.delete(f"/api/v1/namespaces/{name}")


def trial_spec(router: str = "gatewayapi", prometheus: str = "http://127.0.0.1:9") -> TrialSpec:
    """The trial the end-to-end tests run, with either router; Prometheus is unreachable unless
    one is given (the API requests of a tick do not depend on its answers)."""
    traffic: dict[str, Any] = {"router": router}
    if router == "gatewayapi":
        traffic["gatewayapi"] = {"httpRouteRef": {"name": "llama3"}}
    return TrialSpec.model_validate({
        "baseline": {"deploymentRef": {"name": "llama3-gpu"}, "instanceType": "g5.xlarge"},
        "candidate": {"image": "llama3-neuron:2.21", "instanceType": "inf2.8xlarge",
                      "neuronCores": 2, "replicas": 1},
        "traffic": traffic,
        "steps": [{"weight": 5, "duration": "6s"}, {"weight": 25, "duration": "6s"}],
        "analysis": {
            "interval": "3s",
            "prometheus": {"address": prometheus, "timeout": "1s"},
            "criteria": [
                {"name": "errors", "metric": "error_ratio", "absolute": {"max": 0.01}},
                {"name": "p99-latency", "metric": "latency_p99", "relative": {"max": 1.2}},
            ],
        },
        "promotion": {"bakeTime": "3s"},
    })  # fmt: skip


def trial_ref(namespace: str, uid: str = "0f6c1b8e-0000-4000-8000-000000000001") -> TrialRef:
    return TrialRef("llama3-inf2", namespace, uid)


def create_trial(api: Api, namespace: str, spec: TrialSpec) -> TrialRef:
    """The AcceleratorTrial ``llama3-inf2`` in ``namespace`` (owner of what the trial creates)."""
    body = {"apiVersion": "acceltrial.dev/v1alpha1", "kind": "AcceleratorTrial",
            "metadata": {"name": "llama3-inf2", "namespace": namespace},
            "spec": spec.model_dump(mode="json", by_alias=True, exclude_none=True)}  # fmt: skip
    created = api.post(TRIAL_GVR.collection_path(namespace), body)
    assert created.status == 201, created.body
    return trial_ref(namespace, created.body["metadata"]["uid"])
