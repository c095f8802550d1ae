"""Fixtures for the sandbox's contract tests: a running sandbox, a plain HTTP client, kubectl.

The client is deliberately dumb (urllib, JSON in and out) so the tests exercise the server's
HTTP surface exactly as any Kubernetes client would.
"""

from __future__ import annotations

import http.client
import json
import os
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

from acceltrial.sandbox.cluster import Sandbox
from acceltrial.sandbox.realplane.binaries import MissingBinaries, find_binaries
from tests.conftest import tool


@dataclass
class Reply:
    status: int
    body: Any
    headers: dict[str, str]


class Api:
    """JSON over HTTP to the sandbox, returning the status code with the decoded body."""

    def __init__(self, url: str) -> None:
        self.url = url

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
            with urllib.request.urlopen(request, timeout=10) as response:
                return Reply(response.status, json.loads(response.read()), dict(response.headers))
        except urllib.error.HTTPError as error:
            return Reply(error.code, json.loads(error.read()), dict(error.headers))

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


@pytest.fixture
def cluster(request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    """A sandbox; the API contract tests run it without controllers, so nothing but the test
    writes. Mark a test ``@pytest.mark.controllers`` to run Deployments, scheduler and kubelet
    (pods turn Ready 0.05 s after binding)."""
    controllers = request.node.get_closest_marker("controllers") is not None
    with Sandbox(controllers=controllers, ready_delay=0.05) as sandbox:
        yield sandbox


@pytest.fixture
def api(cluster: Sandbox) -> Api:
    return Api(cluster.url)


def configmap(name: str, labels: dict[str, str] | None = None, **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels or {}},
        "data": data,
    }


CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"


def eventually(check: Callable[[], Any], timeout: float = 10.0) -> Any:
    """Poll ``check`` until it returns something truthy (bounded), and return that."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {timeout}s: last result {result!r}")
        time.sleep(0.02)


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
def kubectl(cluster: Sandbox, tmp_path: Path) -> Kubectl:
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
