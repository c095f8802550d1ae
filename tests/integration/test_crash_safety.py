"""Crash safety: the operator is killed (SIGKILL) as soon as a trial enters each phase and is
started again. Every trial ends as an uninterrupted run does, and the HTTPRoute's candidate
weight goes through each step exactly once: never set twice, never skipped."""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from acceltrial.api.reasons import CRITERION_FAILED
from acceltrial_testbed.sandbox.access import Access
from tests.integration.e2e_kit import (  # fixtures and helpers, one instance per module
    ROUTE,
    api,
    backend_refs,
    cluster,
    on_backend_of,
    operator_identity,
    prometheus_url,
    start,
    start_operator,
)
from tests.sandbox.conftest import Api, Backend
from tests.together import Batch, start_together, together

pytestmark = pytest.mark.slow
__all__ = ["api", "cluster", "operator_identity", "prometheus_url"]  # re-exported fixtures
TERMINAL = ("Promoted", "RolledBack", "Failed", "Aborted")


class RouteWatch:
    """Records every candidate weight the HTTPRoute takes, from a watch on the sandbox."""

    def __init__(self, access: Access, namespace: str) -> None:
        route = f"/apis/gateway.networking.k8s.io/v1/namespaces/{namespace}/httproutes"
        self.access = access
        self.path = f"{route}?watch=true&fieldSelector=metadata.name%3Dllama3&timeoutSeconds=300"
        self.weights: list[int] = []
        threading.Thread(target=self._follow, daemon=True).start()

    def _follow(self) -> None:
        with self.access.open(self.path, timeout=310) as stream:
            for line in stream:
                event = json.loads(line)
                refs = event["object"]["spec"]["rules"][0]["backendRefs"]
                weight = next((r["weight"] for r in refs if r["name"] != ROUTE["name"]), 0)
                # Other writes (metadata, status) are not steps, and re-applying the same weights
                # is a no-op the API server does not record. What must never show is a step
                # repeated after a later one (5, 25, 5) or one skipped (5, 50).
                if not self.weights or self.weights[-1] != weight:
                    self.weights.append(weight)


class CrashingOperator:
    """Runs the operator and SIGKILLs it whenever the trial reaches a phase not yet crashed in."""

    def __init__(self, kubeconfig: Path, folder: Path, namespace: str) -> None:
        self.kubeconfig, self.folder, self.namespace = kubeconfig, folder, namespace
        self.process = start_operator(kubeconfig, folder, namespace)
        self.crashed_in: list[str] = []

    def run_until_done(self, api: Api, path: str, timeout: float = 400) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status: dict[str, Any] = api.get(path).body.get("status", {})
            moment = f"{status.get('phase')}/{status.get('step')}"
            if status.get("phase") in TERMINAL:
                return status
            if status.get("phase") and moment not in self.crashed_in:
                self.crashed_in.append(moment)
                self._crash_and_restart()
            time.sleep(0.05)  # bounded poll of the trial's phase
        pytest.fail(f"no outcome within {timeout}s; crashed in {self.crashed_in}")

    def _crash_and_restart(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)
        self.process = start_operator(self.kubeconfig, self.folder, self.namespace)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


@pytest.fixture(scope="module")
def together_batch(
    request: pytest.FixtureRequest,
    cluster: Backend,
    api: Api,
    prometheus_url: str,
    operator_identity: Path,
) -> Iterator[Batch]:
    """Each test drives a trial in a namespace of its own with an operator of its own (the one
    it kills): they run at once (tests/together.py), on the backend of this module's parameter."""
    shared = {
        "cluster": cluster,
        "api": api,
        "prometheus_url": prometheus_url,
        "operator_identity": operator_identity,
    }
    with start_together(request, shared, in_group=on_backend_of(cluster)) as batch:
        yield batch


def run_crashing(
    api: Api, operator_identity: Path, folder: Path, namespace: str, path: str
) -> tuple[dict[str, Any], CrashingOperator]:
    """The trial at ``path`` run to its end by an operator killed in each of its phases."""
    operator = CrashingOperator(operator_identity, folder, namespace)
    try:
        return operator.run_until_done(api, path), operator
    finally:
        operator.stop()


@together
def test_killed_in_every_phase_a_good_candidate_is_still_promoted(
    api: Api, cluster: Backend, prometheus_url: str, operator_identity: Path, tmp_path: Path
) -> None:
    path = start(api, "crash", prometheus_url)
    watch = RouteWatch(cluster.access, "crash")
    status, operator = run_crashing(api, operator_identity, tmp_path, "crash", path)
    assert status["phase"] == "Promoted", status.get("decision")
    assert watch.weights == [0, 5, 25, 50, 100], "each weight set once, none skipped"
    steps = {"Preflight/None", "Progressing/0", "Progressing/1", "Progressing/2", "Progressing/3"}
    assert steps <= set(operator.crashed_in), operator.crashed_in
    assert {"Promoting/3", "BakingIn/3"} <= set(operator.crashed_in), operator.crashed_in


@together
def test_killed_in_every_phase_a_bad_candidate_is_still_rolled_back_exactly(
    api: Api, cluster: Backend, prometheus_url: str, operator_identity: Path, tmp_path: Path
) -> None:
    path = start(api, "crash-regress", prometheus_url)
    watch = RouteWatch(cluster.access, "crash-regress")
    status, operator = run_crashing(api, operator_identity, tmp_path, "crash-regress", path)
    assert status["phase"] == "RolledBack"
    assert status["decision"]["reason"].startswith("errors: ")
    assert status["decision"]["reasonCode"] == CRITERION_FAILED
    assert backend_refs(api, "crash-regress") == [ROUTE]
    # Rolled back at the first step whose requests made the errors decisive: the 5% step's
    # dozens, or a later one's when those held too few failures to tell from chance.
    step = len(watch.weights) - 2
    assert watch.weights in ([0, 5, 0], [0, 5, 25, 0], [0, 5, 25, 50, 0]), watch.weights
    assert {f"Progressing/{step}", f"RollingBack/{step}"} <= set(operator.crashed_in), (
        operator.crashed_in
    )
