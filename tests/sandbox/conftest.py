"""Fixtures for the sandbox's contract tests: a running sandbox, a plain HTTP client, kubectl.

The client is deliberately dumb (urllib, JSON in and out) so the tests exercise the server's
HTTP surface exactly as any Kubernetes client would.

Every test that uses the ``cluster`` fixture (directly or through ``api`` and ``kubectl``) runs
against one Kubernetes: the real control plane (``[real]``, one per session, reset after each
test) when it is built, as always in CI; the emulator (``[emulator]``) on a machine without the
build. ``ACCELTRIAL_EMULATOR_FIDELITY=1`` runs each on both, to check the emulator against the
real server after a change to it (the emulator is frozen to what ``make demo`` needs without Go).
Mark a test ``@pytest.mark.emulator_only`` when it reads the emulator's internals: it runs on the
emulator always; ``@pytest.mark.known_difference(reason)`` marks where the emulator's behaviour
differs from the real server's (the emulator's run is then expected to fail; the list is in
docs/sandbox.md).
"""

from __future__ import annotations

import http.client
import json
import os
import ssl
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from acceltrial_testbed.sandbox.access import Access
from acceltrial_testbed.sandbox.cluster import Sandbox
from acceltrial_testbed.sandbox.realplane.binaries import (
    MissingBinaries,
    binaries_available,
    find_binaries,
)
from acceltrial_testbed.sandbox.realplane.plane import RealControlPlane
from tests.conftest import EXAMPLES, REPO, tool

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
TRIALS = "/apis/acceltrial.dev/v1alpha1/namespaces/default/acceleratortrials"
TRAINING_TRIALS = "/apis/acceltrial.dev/v1alpha1/namespaces/default/trainingtrials"


@dataclass
class Reply:
    status: int
    body: Any
    headers: dict[str, str]


class Api:
    """JSON over HTTP to the sandbox, returning the status code with the decoded body."""

    def __init__(self, url: str, context: ssl.SSLContext | None = None) -> None:
        self.url = url
        self.context = context

    @classmethod
    def to(cls, access: Access) -> Api:
        """A client of the cluster ``access`` reaches (HTTP, or HTTPS with client certs)."""
        return cls(access.url, access.ssl_context)

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = "application/json",
        **query: str,
    ) -> Reply:
        url = self.url + path + (("?" + urllib.parse.urlencode(query)) if query else "")
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(request, timeout=10, context=self.context) as response:
                return Reply(response.status, _decode(response.read()), dict(response.headers))
        except urllib.error.HTTPError as error:
            return Reply(error.code, _decode(error.read()), dict(error.headers))

    def get(self, path: str, **query: str) -> Reply:
        return self.request("GET", path, **query)

    def post(self, path: str, body: Any, **query: str) -> Reply:
        return self.request("POST", path, body, **query)

    def put(self, path: str, body: Any) -> Reply:
        return self.request("PUT", path, body)

    def merge(self, path: str, patch: Any) -> Reply:
        return self.request("PATCH", path, patch, "application/merge-patch+json")

    def json_patch(self, path: str, operations: Any) -> Reply:
        return self.request("PATCH", path, operations, "application/json-patch+json")

    def strategic(self, path: str, patch: Any) -> Reply:
        return self.request("PATCH", path, patch, "application/strategic-merge-patch+json")

    def delete(self, path: str, body: Any = None, **query: str) -> Reply:
        return self.request("DELETE", path, body, **query)

    def watch(self, path: str, count: int | None = None, **query: str) -> list[dict[str, Any]]:
        """The events of a watch until the server ends it (pass timeoutSeconds), or the first
        ``count`` of them."""
        parsed = urllib.parse.urlparse(self.url)
        connection: http.client.HTTPConnection
        if parsed.scheme == "https":
            connection = http.client.HTTPSConnection(
                parsed.hostname, parsed.port, timeout=30, context=self.context
            )
        else:
            connection = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=30)
        connection.request("GET", path + "?" + urllib.parse.urlencode({"watch": "1"} | query))
        response = connection.getresponse()
        events = []
        while count is None or len(events) < count:
            line = response.readline()
            if not line:
                break
            if line.strip():
                events.append(json.loads(line))
        connection.close()
        return events


Backend = Sandbox | RealControlPlane
IMMEDIATE = {
    f"{stage}.stage.kwok.x-k8s.io/{delay}": "0s"
    for stage in ("pod-create", "pod-ready")
    for delay in ("delay", "jitter-delay")
}
"""Pod annotations that take kwok's pod stages (1 to 6 s each on the real control plane) at
once, for pods that stand in for servers in tests of something else than their start."""


def _decode(body: bytes) -> Any:
    """JSON, or the text the real server sends for a path it does not serve at all."""
    try:
        return json.loads(body)
    except ValueError:
        return body.decode(errors="replace")


def contract_backends() -> list[str]:
    """Where a contract test runs: the real control plane when built (always in CI), else the
    emulator; both with ``ACCELTRIAL_EMULATOR_FIDELITY=1``."""
    if os.environ.get("ACCELTRIAL_EMULATOR_FIDELITY") == "1":
        return ["emulator", "real"]
    if os.environ.get("CI") or binaries_available():
        return ["real"]
    return ["emulator"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run each test that uses a cluster on the backends of ``contract_backends`` (emulator-only
    tests on the emulator)."""
    if "backend" not in metafunc.fixturenames:
        return
    emulator = pytest.param("emulator")
    difference = metafunc.definition.get_closest_marker("known_difference")
    if difference is not None:
        emulator = pytest.param(
            "emulator", marks=pytest.mark.xfail(reason=difference.args[0], strict=True)
        )
    if metafunc.definition.get_closest_marker("emulator_only") is not None:
        metafunc.parametrize("backend", [emulator])
        return
    params = {"emulator": emulator, "real": pytest.param("real", marks=pytest.mark.slow)}
    metafunc.parametrize("backend", [params[name] for name in contract_backends()])


@pytest.fixture(scope="session")
def real_plane() -> Iterator[RealControlPlane]:
    """One real control plane for the session's contract tests, with the Gateway API but not
    the AcceleratorTrial CRD (as the emulator starts); each test that used it resets it."""
    require_real_control_plane()
    with RealControlPlane(acceleratortrial_crd=False) as plane:
        yield plane


@pytest.fixture
def cluster(request: pytest.FixtureRequest, backend: str) -> Iterator[Backend]:
    """A sandbox; the API contract tests run the emulator without controllers, so nothing but
    the test writes. Mark a test ``@pytest.mark.controllers`` to run Deployments, scheduler and
    kubelet (pods turn Ready 0.05 s after binding). The real control plane always runs them."""
    if backend == "real":
        plane: RealControlPlane = request.getfixturevalue("real_plane")
        try:
            yield plane
        finally:
            plane.reset()
        return
    controllers = request.node.get_closest_marker("controllers") is not None
    with Sandbox(controllers=controllers, ready_delay=0.05) as sandbox:
        yield sandbox


@pytest.fixture
def api(cluster: Backend) -> Api:
    return Api.to(cluster.access)


def configmap(name: str, labels: dict[str, str] | None = None, **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels or {}},
        "data": data,
    }


CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
ROOT_CA = "kube-root-ca.crt"  # a real cluster's controller manager puts it in every namespace
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"


def why(status: dict[str, Any]) -> str:
    """What a trial's status says of how it ended: its message and its decision's reason (a
    failed assertion on the phase shows the numbers behind it)."""
    decision = status.get("decision") or {}
    code, reason = decision.get("reasonCode"), decision.get("reason")
    return f"{status.get('message')}; decision: {code}: {reason}"


def eventually(
    check: Callable[[], Any],
    timeout: float = 60.0,
    explain: Callable[[], Any] | None = None,
) -> Any:
    """Poll ``check`` until it returns something truthy (bounded), and return that. The pause
    between polls grows from 20 ms to a quarter of a second: a busy poll of the real API server
    takes the CPU its controllers need to make the condition true. ``explain`` says, on
    failure, what the cluster looked like."""
    deadline = time.monotonic() + timeout
    pause = 0.02
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            seen = f"; {explain()!r}" if explain is not None else ""
            pytest.fail(f"condition not met within {timeout}s: last result {result!r}{seen}")
        time.sleep(pause)
        pause = min(0.25, pause * 1.5)


@dataclass
class Kubectl:
    """The real kubectl v1.33 pointed at a sandbox, with its own cache directory."""

    binary: str
    env: dict[str, str]

    def __call__(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.binary, *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=self.env,
            timeout=60,
            check=False,
        )

    def ok(self, *args: str, stdin: str | None = None) -> str:
        result = self(*args, stdin=stdin)
        assert result.returncode == 0, result.stderr
        return result.stdout


@pytest.fixture
def kubectl(cluster: Backend, tmp_path: Path) -> Kubectl:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "KUBECONFIG": str(cluster.kubeconfig),
        "KUBECACHEDIR": str(tmp_path / "cache"),
    }
    return Kubectl(tool("kubectl"), env)


def require_real_control_plane() -> None:
    """Skip a test of the real control plane when it is not built, but never in CI (which sets
    CI and builds it with `make control-plane`): there a missing build fails the test."""
    try:
        find_binaries()
    except MissingBinaries as missing:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the real control plane: {missing}")
        pytest.skip(str(missing))


@pytest.fixture
def with_crd(api: Api) -> Api:
    """The API with the AcceleratorTrial CRD installed and its kind served."""
    crd = yaml.safe_load((REPO / "crds" / "acceltrial.dev_acceleratortrials.yaml").read_text())
    assert api.post(CRDS, crd).status == 201
    served(api, crd["metadata"]["name"], TRIALS)
    return api


@pytest.fixture
def with_training_crd(api: Api) -> Api:
    """The API with the TrainingTrial CRD installed and its kind served."""
    crd = yaml.safe_load((REPO / "crds" / "acceltrial.dev_trainingtrials.yaml").read_text())
    assert api.post(CRDS, crd).status == 201
    served(api, crd["metadata"]["name"], TRAINING_TRIALS)
    return api


def served(api: Api, crd: str, collection: str) -> None:
    """Wait until the new kind is served: a real API server establishes a CRD moments after the
    create and answers 429 while the kind's storage initializes (the emulator: at once)."""
    eventually(lambda: established(api, crd))
    eventually(lambda: api.get(collection).status == 200)


def established(api: Api, name: str) -> bool:
    conditions = (api.get(f"{CRDS}/{name}").body.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


def example() -> dict[str, Any]:
    """The shipped HTTPRoute example as the trial ``trial`` in the default namespace."""
    body: dict[str, Any] = yaml.safe_load((EXAMPLES / "llama3-8b-inf2-httproute.yaml").read_text())
    body["metadata"] = {"name": "trial"}
    return body
