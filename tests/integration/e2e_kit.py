"""What the end-to-end tests share: the control planes they run on (``BACKENDS``,
``backend_of``, ``control_plane``), their module-scoped fixtures (a cluster, its API, a real
Prometheus, the operator and its identity, a notification receiver), and the helpers that
install a baseline, start a trial and wait for its phase. A test module imports the fixtures it
uses, so each module gets its own instance."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from acceltrial_testbed.sandbox.cluster import Sandbox
from acceltrial_testbed.sandbox.realplane.binaries import binaries_available
from acceltrial_testbed.sandbox.realplane.plane import RealControlPlane
from acceltrial_testbed.sandbox.topology import Topology, load_topology
from tests.conftest import REPO, environ_with
from tests.integration.operator_account import operator_kubeconfig
from tests.integration.prometheus_server import running_prometheus
from tests.integration.simulated import STEADY, profile, serving
from tests.sandbox.conftest import (
    Api,
    Backend,
    eventually,
    require_real_control_plane,
)
from tests.together import Batch, start_together
from tests.unit.test_notifications import Receiver

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
ROUTE = {"name": "llama3-gpu", "port": 8000}
GATEWAY_DEFAULTS = {"group": "", "kind": "Service", "weight": 1}
PROFILES = {
    ("promote", "baseline"): STEADY,
    ("promote", "candidate"): profile(p50=0.24, p99=0.48),
    ("regress", "baseline"): STEADY,
    ("regress", "candidate"): profile(error_ratio=0.2),
    ("slow", "baseline"): STEADY,
    ("slow", "candidate"): profile(p50=0.45, p99=0.9),
    ("silent", "baseline"): STEADY,  # the candidate is sent nothing: its series stay empty
    ("manual", "baseline"): STEADY,
    ("manual", "candidate"): STEADY,
    ("frozen", "baseline"): STEADY,
    ("frozen", "candidate"): STEADY,
    ("deleted", "baseline"): STEADY,
    ("deleted", "candidate"): STEADY,
    ("replicas", "baseline"): STEADY,
    ("replicas", "candidate"): STEADY,
    ("twin", "baseline"): STEADY,
    ("twin", "candidate"): STEADY,
    ("handover", "baseline"): STEADY,
    ("handover", "candidate"): STEADY,
    ("bake-delete", "baseline"): STEADY,
    ("bake-delete", "candidate"): STEADY,
    ("pause-delete", "baseline"): STEADY,
    ("pause-delete", "candidate"): STEADY,
    ("ended-delete", "baseline"): STEADY,
    ("ended-delete", "candidate"): profile(error_ratio=0.2),
    ("hpa", "baseline"): STEADY,
    ("hpa", "candidate"): STEADY,
    ("hpa-abort", "baseline"): STEADY,
    ("hpa-abort", "candidate"): STEADY,
    ("no-metrics", "baseline"): STEADY,
    ("check-cluster", "baseline"): STEADY,
    ("check-quality", "baseline"): STEADY,
    ("crash", "baseline"): STEADY,
    ("crash", "candidate"): profile(p50=0.24, p99=0.48),
    ("crash-regress", "baseline"): STEADY,
    ("crash-regress", "candidate"): profile(error_ratio=0.2),
    ("two-replicas", "baseline"): STEADY,
    ("two-replicas", "candidate"): profile(p50=0.24, p99=0.48),
    ("two-replicas-regress", "baseline"): STEADY,
    ("two-replicas-regress", "candidate"): profile(error_ratio=0.2),
}
TRIALS = "/apis/acceltrial.dev/v1alpha1/namespaces/{}/acceleratortrials"
BACKENDS = (
    ["emulator", "real"]
    if os.environ.get("ACCELTRIAL_E2E_REAL") == "1"
    else ["real"]
    if os.environ.get("CI") or binaries_available()
    else ["emulator"]
)
"""The real control plane when it is built (always in CI): the operator's end-to-end tests run
on one Kubernetes, the one users have; the emulator only on a machine without Go; both with
ACCELTRIAL_E2E_REAL=1."""


@pytest.fixture(scope="module", params=BACKENDS)
def cluster(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """The emulator, then the real control plane (kube-apiserver, etcd, the controllers and
    kwok; the CRD is posted by ``api`` as on the emulator)."""
    # The default topology, with node groups large enough for every test's trial at once.
    with backend_of(request.param, nodes_per_group=32) as running:
        yield running


@contextlib.contextmanager
def backend_of(name: str, nodes_per_group: int) -> Iterator[Backend]:
    """A control plane of the default topology with ``nodes_per_group`` nodes in each group
    (at least): ``real`` or the emulator."""
    default = load_topology()
    groups = [g.model_copy(update={"count": max(g.count, nodes_per_group)})
              for g in default.node_groups]  # fmt: skip
    with control_plane(name, Topology(nodeGroups=groups)) as plane:
        yield plane


@contextlib.contextmanager
def control_plane(name: str, topology: Topology, ready_delay: float = 0.2) -> Iterator[Backend]:
    """``real`` (the CRD not installed: tests post the one they need) or the emulator (its
    pods Ready ``ready_delay`` seconds after they are placed), of ``topology``."""
    if name == "real":
        require_real_control_plane()
        with RealControlPlane(topology=topology, acceleratortrial_crd=False) as plane:
            yield plane
        return
    with Sandbox(ready_delay=ready_delay, topology=topology) as sandbox:
        yield sandbox


@pytest.fixture(scope="module")
def api(cluster: Backend) -> Api:
    api = Api.to(cluster.access)
    crd = yaml.safe_load((REPO / "crds" / "acceltrial.dev_acceleratortrials.yaml").read_text())
    assert api.post(CRDS, crd).status == 201
    return api


@pytest.fixture(scope="module")
def prometheus_url(cluster: Backend, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data = tmp_path_factory.mktemp("prom") / "data"
    with serving(cluster.access, PROFILES) as scrape, running_prometheus(data, scrape) as url:
        yield url


@pytest.fixture(scope="module")
def operator_identity(cluster: Backend, api: Api, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The kubeconfig the operator runs with: on the real control plane, the chart's
    ServiceAccount with exactly the chart's RBAC."""
    return operator_kubeconfig(cluster, tmp_path_factory.mktemp("identity"))


def start_operator(kubeconfig: Path, folder: Path, *namespaces: str) -> subprocess.Popen[bytes]:
    """``kopf run -m acceltrial.handlers`` as the chart runs it, logging into ``folder``."""
    env = environ_with(
        **{
            "KUBECONFIG": str(kubeconfig),
            "ACCELTRIAL_METRICS_PORT": "0",
            "ACCELTRIAL_TICK_SECONDS": "1",
            "HOME": str(folder),
        }
    )
    scope = [f"--namespace={n}" for n in namespaces] or ["--all-namespaces"]
    args = [sys.executable, "-m", "kopf", "run", "-m", "acceltrial.handlers", "--standalone"]
    with (folder / "operator.log").open("a") as log:
        return subprocess.Popen([*args, *scope], env=env, stdout=log, stderr=subprocess.STDOUT)


@pytest.fixture(scope="module")
def operator(operator_identity: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    others = {"crash", "crash-regress", "two-replicas", "two-replicas-regress"}
    namespaces = sorted({ns for ns, _ in PROFILES} - others)
    namespaces += ["no-baseline", "no-route", "no-node", "ended"]
    process = start_operator(operator_identity, tmp_path_factory.mktemp("operator"), *namespaces)
    try:
        yield
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    """A webhook receiver the operator's notifications reach: it records each POST by path."""
    served = Receiver()
    yield served
    served.server.shutdown()


@pytest.fixture(scope="module")
def together_batch(  # noqa: PLR0917
    request: pytest.FixtureRequest,
    cluster: Backend,
    api: Api,
    prometheus_url: str,
    operator: None,
    receiver: Receiver,
) -> Iterator[Batch]:
    """Every test of this module drives a trial in a namespace of its own: they run at once
    (tests/together.py), on the backend of this module's parameter."""
    shared = {
        "cluster": cluster,
        "api": api,
        "prometheus_url": prometheus_url,
        "operator": operator,
        "receiver": receiver,
    }
    with start_together(request, shared, in_group=on_backend_of(cluster)) as batch:
        yield batch


def on_backend_of(cluster: Backend) -> Callable[[pytest.Item], bool]:
    """Whether a test is of ``cluster``'s backend (this module's parameter): a module's batch
    starts the tests of its own backend only."""
    backend = "real" if isinstance(cluster, RealControlPlane) else "emulator"
    return lambda item: item.callspec.params["cluster"] == backend  # type: ignore[attr-defined]


def install_baseline(api: Api, namespace: str, *, serving: bool = True) -> None:
    """The GPU baseline (two replicas), its Service and its route; with ``serving``, once its
    Deployment is Available, as a user's baseline is when they apply a trial (a trial's
    preflight waits for it only within its progressDeadline)."""
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
                    "nodeSelector": {"node.kubernetes.io/instance-type": "g5.xlarge"},
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
    if serving:
        path = f"/apis/apps/v1/namespaces/{namespace}/deployments/llama3-gpu"
        eventually(lambda: available(api.get(path).body), timeout=120)


def available(deployment: dict[str, Any]) -> bool:
    conditions = (deployment.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Available" and c["status"] == "True" for c in conditions)


def trial(namespace: str, prometheus: str, **spec: Any) -> dict[str, Any]:
    body = {
        "apiVersion": "acceltrial.dev/v1alpha1",
        "kind": "AcceleratorTrial",
        "metadata": {"name": "llama3-inf2", "namespace": namespace},
        "spec": {
            "baseline": {"deploymentRef": {"name": "llama3-gpu"}, "instanceType": "g5.xlarge"},
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
    for key, value in spec.items():
        if isinstance(value, dict):  # merge, None removing a key, as a merge patch does
            merged = {**body["spec"][key], **value}  # type: ignore[index]
            body["spec"][key] = {k: v for k, v in merged.items() if v is not None}  # type: ignore[index]
        else:
            body["spec"][key] = value  # type: ignore[index]
    return body


def start(api: Api, namespace: str, prometheus: str, baseline: bool = True, **spec: Any) -> str:
    """Install the baseline (unless told not to) and the trial; return the trial's path."""
    if baseline:
        install_baseline(api, namespace)
    else:
        api.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                        "metadata": {"name": namespace}})  # fmt: skip
    assert api.post(TRIALS.format(namespace), trial(namespace, prometheus, **spec)).status == 201
    return f"{TRIALS.format(namespace)}/llama3-inf2"


def wait_for(api: Api, path: str, phases: tuple[str, ...], timeout: float = 120) -> dict[str, Any]:
    def reached() -> dict[str, Any] | None:
        status: dict[str, Any] = api.get(path).body.get("status", {})
        return status if status.get("phase") in phases else None

    result: dict[str, Any] = eventually(reached, timeout=timeout)
    return result


def act(api: Api, path: str, action: str) -> None:
    patch = {"metadata": {"annotations": {"acceltrial.dev/action": action}}}
    assert api.merge(path, patch).status == 200


def run_trial(api: Api, namespace: str, prometheus: str, **spec: Any) -> dict[str, Any]:
    path = start(api, namespace, prometheus, **spec)
    return wait_for(api, path, ("Promoted", "RolledBack", "Failed"), timeout=150)


def backend_refs(api: Api, namespace: str) -> list[dict[str, Any]]:
    route = api.get(f"/apis/gateway.networking.k8s.io/v1/namespaces/{namespace}/httproutes/llama3")
    return without_defaults(route.body["spec"]["rules"][0]["backendRefs"])


def without_defaults(refs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The refs without the values the Gateway API CRD's schema defaults (``group: ""``,
    ``kind: Service``, ``weight: 1``): the real API server adds them to every ref, the emulator
    does not."""
    defaults = GATEWAY_DEFAULTS.items()
    return [{k: v for k, v in ref.items() if (k, v) not in defaults} for ref in refs]


def candidate_exists(api: Api, namespace: str) -> bool:
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments/llama3-inf2-candidate"
    return api.get(path).status == 200


def notified(receiver: Receiver, path: str, until: str) -> list[str]:
    """The events ``path`` received, once the one named ``until`` came."""

    def events() -> list[str] | None:
        got = [body.get("event") or body.get("text", "").split("*")[1]
               for at, body in list(receiver.posts) if at == path]  # fmt: skip
        return got if until in got else None

    def received() -> list[Any]:
        return [body for at, body in list(receiver.posts) if at == path]

    found: list[str] = eventually(events, timeout=30, explain=received)
    return found


def labelled_secret(api: Api, namespace: str, name: str, url: str, readable: bool) -> None:
    """A Secret holding a webhook URL, opted in for trials to name it when ``readable``."""
    api.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                    "metadata": {"name": namespace}})  # fmt: skip
    labels = {"acceltrial.dev/trial-readable": "true"} if readable else {}
    secret = {"apiVersion": "v1", "kind": "Secret",
              "metadata": {"name": name, "namespace": namespace, "labels": labels},
              "stringData": {"url": url}}  # fmt: skip
    assert api.post(f"/api/v1/namespaces/{namespace}/secrets", secret).status == 201
