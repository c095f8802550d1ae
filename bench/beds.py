"""The clusters the scale benchmark runs on, behind one small interface.

- ``emulator``: the sandbox's API server (one Python process with its workload controllers,
  inside the benchmark's own process); the operator's requests are counted by a middleware
  on its app (every request but the benchmark's own, told by its User-Agent).
- ``real``: the real control plane (etcd, kube-apiserver, kube-controller-manager,
  kube-scheduler, kwok; ``make control-plane``); the operator runs as its own ServiceAccount
  and its requests are counted from the API server's audit log, which records that account's
  requests and nothing else.

Either way the topology has a g5 and an inf2 node per trial, and :class:`Bed` reports the CPU
the cluster's processes spent, so a run says what saturated.
"""

from __future__ import annotations

import json
import os
import threading
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from aiohttp import web

import acceltrial_testbed.sandbox.cluster as sandbox_cluster
import acceltrial_testbed.sandbox.server as sandbox_server
from acceltrial.api.crd import render_crd
from acceltrial_testbed.demo.cluster import TRIALS
from acceltrial_testbed.sandbox.cluster import Sandbox
from acceltrial_testbed.sandbox.realplane.client import AdminClient, ApiError
from acceltrial_testbed.sandbox.realplane.plane import RealControlPlane
from acceltrial_testbed.sandbox.topology import Topology, load_topology

ControlPlane = Literal["emulator", "real"]
NAMESPACE = "bench"
BENCH_AGENT = "acceltrial-bench"
OPERATOR_ACCOUNT = "acceltrial-operator"
OPERATOR_USER = f"system:serviceaccount:{NAMESPACE}:{OPERATOR_ACCOUNT}"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
NAMESPACES = "/api/v1/namespaces"
MAX_GROUP_NODES = 500


@dataclass
class Bed:
    """A running cluster for the benchmark."""

    create: Callable[[str, dict[str, Any]], None]
    """POST an object (a retry that finds it made is fine)."""
    trials: Callable[[], list[dict[str, Any]]]
    """The namespace's trials, as the API server has them."""
    operator_kubeconfig: Path
    operator_requests: Callable[[], int]
    """API requests the operator sent so far."""
    cluster_pids: dict[str, int]
    """The processes that serve the cluster (the emulator's is the benchmark's own)."""


class Counter:
    """A thread-safe count."""

    def __init__(self) -> None:
        self.value = 0
        self._lock = threading.Lock()

    def add(self) -> None:
        with self._lock:
            self.value += 1


_EMULATOR_REQUESTS = Counter()


@web.middleware
async def _count_requests(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    if request.headers.get("User-Agent") != BENCH_AGENT:
        _EMULATOR_REQUESTS.add()
    return await handler(request)


def _counting_app(build: Callable[..., web.Application]) -> Callable[..., web.Application]:
    def build_counting(*args: Any, **kwargs: Any) -> web.Application:
        app = build(*args, **kwargs)
        app.middlewares.append(_count_requests)
        return app

    return build_counting


# The sandbox builds its app when it starts: count every request it serves.
sandbox_cluster.build_app = _counting_app(sandbox_server.build_app)  # type: ignore[attr-defined]


def topology(trials: int) -> Topology:
    """The default topology with a g5 and an inf2 node per trial."""
    body = yaml.safe_load(
        load_topology().model_dump_json(by_alias=True, exclude_none=True)  # JSON is YAML
    )
    groups = []
    for group in body["nodeGroups"]:
        if group["name"] not in ("gpu-g5", "neuron-inf2"):
            groups.append(group)
            continue
        wanted = trials + 1
        for part in range(0, wanted, MAX_GROUP_NODES):  # a topology's group holds 500 at most
            count = min(MAX_GROUP_NODES, wanted - part)
            name = group["name"] + (f"-{part // MAX_GROUP_NODES}" if part else "")
            groups.append({**group, "name": name, "count": count})
    return Topology.model_validate({**body, "nodeGroups": groups})


@contextmanager
def bed(choice: ControlPlane, trials: int, folder: Path) -> Iterator[Bed]:
    """The chosen cluster, started for ``trials`` trials, with the namespace made."""
    if choice == "real":
        with _real(trials, folder) as made:
            yield made
        return
    with Sandbox(topology=topology(trials), ready_delay=0.2) as sandbox:
        url = sandbox.url

        def create(path: str, body: dict[str, Any]) -> None:
            _post(url, path, body)

        create(CRDS, yaml.safe_load(render_crd()))
        create(NAMESPACES, {"metadata": {"name": NAMESPACE}})
        yield Bed(
            create=create,
            trials=lambda: _get_items(url + TRIALS.format(NAMESPACE)),
            operator_kubeconfig=sandbox.kubeconfig,
            operator_requests=lambda: _EMULATOR_REQUESTS.value,
            cluster_pids={"emulator, stub Prometheus and benchmark": os.getpid()},
        )


@contextmanager
def _real(trials: int, folder: Path) -> Iterator[Bed]:
    with RealControlPlane(topology=topology(trials), audit_users=(OPERATOR_USER,)) as plane:
        assert plane.certificates is not None  # started
        client = AdminClient(plane.url, plane.certificates)

        def create(path: str, body: dict[str, Any]) -> None:
            try:
                client.create(path, body)
            except ApiError as error:
                if error.status != 409:
                    raise

        create(NAMESPACES, {"metadata": {"name": NAMESPACE}})
        create(
            f"{NAMESPACES}/{NAMESPACE}/serviceaccounts", {"metadata": {"name": OPERATOR_ACCOUNT}}
        )
        create("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", _cluster_admin())
        kubeconfig = plane.service_account_kubeconfig(
            NAMESPACE, OPERATOR_ACCOUNT, folder / "operator.kubeconfig"
        )
        yield Bed(
            create=create,
            trials=lambda: list(client.get(TRIALS.format(NAMESPACE))["items"]),
            operator_kubeconfig=kubeconfig,
            operator_requests=lambda: _answered(plane.audit_log),
            cluster_pids={c.name: c.process.pid for c in plane.components},
        )


def _cluster_admin() -> dict[str, Any]:
    """The benchmark measures cost, not permissions: the operator's account may do anything
    (the end-to-end tests run it with exactly the chart's RBAC)."""
    return {
        "metadata": {"name": "acceltrial-bench-operator"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "cluster-admin",
        },
        "subjects": [{"kind": "ServiceAccount", "name": OPERATOR_ACCOUNT, "namespace": NAMESPACE}],
    }


def _answered(audit_log: Path) -> int:
    """Requests of the audited user answered so far: one audit event each."""
    if not audit_log.exists():
        return 0
    with audit_log.open("rb") as log:
        return sum(1 for line in log if b'"ResponseComplete"' in line)


def _post(url: str, path: str, body: dict[str, Any]) -> None:
    """POST with patience (a busy machine); a retry that finds the object made is fine."""
    data = json.dumps(body).encode()
    for attempt in range(3):
        request = urllib.request.Request(url + path, data=data, method="POST", headers={
            "Content-Type": "application/json", "User-Agent": BENCH_AGENT})  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=60):
                return
        except urllib.error.HTTPError as error:
            if error.code == 409 and attempt > 0:
                return
            raise
        except TimeoutError:
            continue
    raise SystemExit(f"the sandbox did not answer POST {path} three times in a row")


def _get_items(url: str) -> list[dict[str, Any]]:
    request = urllib.request.Request(url, headers={"User-Agent": BENCH_AGENT})
    with urllib.request.urlopen(request, timeout=60) as response:
        items: list[dict[str, Any]] = json.load(response)["items"]
        return items
