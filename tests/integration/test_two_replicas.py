"""Two replicas with kopf peering: one acts at a time, and killing the active one (SIGKILL) in
every phase hands the trial over within a bounded time, without any weight set twice or
skipped. A killed replica comes back (as its pod would) with a lower priority while the other
takes over; three processes run, so that a standby is always there while one restarts."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from acceltrial_testbed.sandbox.cluster import Sandbox
from tests.conftest import REPO, environ_with
from tests.integration.e2e_kit import (  # fixtures and helpers, one instance per module
    ROUTE,
    api,
    backend_refs,
    cluster,
    on_backend_of,
    prometheus_url,
    start,
)
from tests.integration.test_crash_safety import TERMINAL, RouteWatch
from tests.sandbox.conftest import Api
from tests.together import Batch, start_together, together

pytestmark = pytest.mark.slow
__all__ = ["api", "cluster", "prometheus_url"]  # re-exported fixtures
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
PEERING_CRDS = REPO / "charts" / "acceltrial" / "files" / "peering" / "kopf-peering-crds.yaml"
LIFETIME_SECONDS = 3
HANDOVER_BOUND_SECONDS = 15.0
"""An entry expires LIFETIME_SECONDS after its last keepalive; the rest is kopf's re-check, the
restart of the timers and a loaded 2-core machine."""
RESUMED = re.compile(r"^\[([\d\- :,]+)\].*Resuming operations", re.MULTILINE)


class Replicas:
    """Two operator processes in one peering; the active one has the highest priority."""

    def __init__(self, cluster: Sandbox, api: Api, folder: Path, namespace: str) -> None:
        self.cluster, self.api, self.folder, self.namespace = cluster, api, folder, namespace
        self.processes = {p: self._start(p) for p in (300, 200, 100)}
        self.killed_in: list[str] = []
        self.kills: list[tuple[float, int]] = []  # (when, the successor's priority)
        self._listed(200)
        self._listed(100)

    def _start(self, priority: int) -> subprocess.Popen[bytes]:
        env = environ_with(
            **{
                "KUBECONFIG": str(self.cluster.kubeconfig),
                "ACCELTRIAL_METRICS_PORT": "0",
                "ACCELTRIAL_TICK_SECONDS": "1",
                "ACCELTRIAL_PEERING_LIFETIME_SECONDS": str(LIFETIME_SECONDS),
                "HOME": str(self.folder),
            }
        )
        args = [sys.executable, "-m", "kopf", "run", "-m", "acceltrial.handlers",
                f"--namespace={self.namespace}", "--peering=acceltrial",
                f"--priority={priority}"]  # fmt: skip
        with self.log(priority).open("a") as log:
            return subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT)

    def log(self, priority: int) -> Path:
        return self.folder / f"replica-{priority}.log"

    def active(self) -> int:
        return max(self.processes)

    def kill_active(self, moment: str) -> None:
        """SIGKILL the active replica and start it again with the lowest priority (its pod
        restarting). Nothing waits here: the trial's next phase is the successor's doing, and
        the handover is timed afterwards from the logs."""
        if self.kills:
            # The last kill's successor is the active replica once it has resumed: the trial can
            # enter its next phase before that (the victim's last tick), and killing a replica
            # still paused would time no handover.
            at, successor = self.kills[-1]
            self._logged(successor, RESUMED, at)
        victim = self.active()
        self.processes.pop(victim).send_signal(signal.SIGKILL)
        self.kills.append((time.time(), self.active()))
        self.killed_in.append(moment)
        lowest = min(self.processes) - 1
        self.processes[lowest] = self._start(lowest)

    @property
    def handovers(self) -> list[float]:
        """Seconds from each kill to the successor's 'Resuming operations'."""
        return [self._logged(successor, RESUMED, at) - at for at, successor in self.kills]

    def _listed(self, priority: int) -> None:
        """Wait until replica ``priority`` keeps an entry in the peering object: it starts paused
        and, seeing a live peer of higher priority there, stays so (the standby)."""
        path = f"/apis/kopf.dev/v1/namespaces/{self.namespace}/kopfpeerings/acceltrial"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            peers = (self.api.get(path).body.get("status") or {}).values()
            if priority in {peer.get("priority") for peer in peers}:
                return
            time.sleep(0.1)  # bounded poll of the peering object
        pytest.fail(f"replica {priority} never joined the peering")

    def acted_only_when_active(self) -> bool:
        """No replica ticked before it resumed: a standby does nothing."""
        for log in self.folder.glob("replica-*.log"):
            text = log.read_text(errors="replace")
            ticked = text.find("Timer 'tick'")
            if ticked != -1 and not 0 <= text.find("Resuming operations") < ticked:
                return False
        return True

    def _logged(self, priority: int, line: re.Pattern[str], moment: float) -> float:
        """When replica ``priority`` first logged ``line`` at or after ``moment``."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for found in line.finditer(self.log(priority).read_text(errors="replace")):
                at = datetime.strptime(found.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
                if at >= moment - 1:  # log stamps have millisecond precision
                    return at
            time.sleep(0.1)  # bounded poll of the replica's log
        pytest.fail(f"replica {priority} never logged {line.pattern!r}")

    def run_until_done(self, api: Api, path: str, timeout: float = 400) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status: dict[str, Any] = api.get(path).body.get("status", {})
            moment = f"{status.get('phase')}/{status.get('step')}"
            if status.get("phase") in TERMINAL:
                return status
            if status.get("phase") and moment not in self.killed_in:
                self.kill_active(moment)
            time.sleep(0.05)  # bounded poll of the trial's phase
        pytest.fail(f"no outcome within {timeout}s; killed in {self.killed_in}")

    def stop(self) -> None:
        for process in self.processes.values():
            process.terminate()
            process.wait(timeout=30)


@pytest.fixture(scope="module")
def together_batch(
    request: pytest.FixtureRequest, cluster: Sandbox, api: Api, prometheus_url: str
) -> Iterator[Batch]:
    """Each test drives a trial in a namespace of its own with three replicas of its own: they
    run at once (tests/together.py), on the backend of this module's parameter."""
    for crd in yaml.safe_load_all(PEERING_CRDS.read_text()):
        api.post(CRDS, crd)
    shared = {"cluster": cluster, "api": api, "prometheus_url": prometheus_url}
    with start_together(request, shared, in_group=on_backend_of(cluster)) as batch:
        yield batch


def run_replicas(
    cluster: Sandbox, api: Api, folder: Path, namespace: str, path: str
) -> tuple[dict[str, Any], Replicas]:
    """The trial at ``path`` run to its end by peered replicas, the active one killed in each
    of its phases."""
    peering = {"apiVersion": "kopf.dev/v1", "kind": "KopfPeering",
               "metadata": {"name": "acceltrial", "namespace": namespace}}  # fmt: skip
    assert api.post(f"/apis/kopf.dev/v1/namespaces/{namespace}/kopfpeerings", peering).status == 201
    pair = Replicas(cluster, api, folder, namespace)
    try:
        return pair.run_until_done(api, path), pair
    finally:
        pair.stop()


@together
def test_killing_the_active_replica_in_every_phase_still_promotes_once(
    api: Api, cluster: Sandbox, prometheus_url: str, tmp_path: Path
) -> None:
    path = start(api, "two-replicas", prometheus_url)
    watch = RouteWatch(cluster.access, "two-replicas")
    status, pair = run_replicas(cluster, api, tmp_path, "two-replicas", path)
    assert status["phase"] == "Promoted", status.get("decision")
    assert watch.weights == [0, 5, 25, 50, 100], "each weight set once, none skipped"
    phases = {"Preflight/None", "Progressing/0", "Progressing/1", "Progressing/2",
              "Progressing/3", "Promoting/3", "BakingIn/3"}  # fmt: skip
    assert phases <= set(pair.killed_in), pair.killed_in
    assert max(pair.handovers) < HANDOVER_BOUND_SECONDS, pair.handovers
    assert pair.acted_only_when_active(), "a standby replica ticked"
    print(f"handovers after SIGKILL: {[round(h, 1) for h in pair.handovers]} s")


@together
def test_killing_the_active_replica_while_rolling_back_restores_exactly(
    api: Api, cluster: Sandbox, prometheus_url: str, tmp_path: Path
) -> None:
    path = start(api, "two-replicas-regress", prometheus_url)
    watch = RouteWatch(cluster.access, "two-replicas-regress")
    status, pair = run_replicas(cluster, api, tmp_path, "two-replicas-regress", path)
    assert status["phase"] == "RolledBack"
    assert backend_refs(api, "two-replicas-regress") == [ROUTE]
    # Rolled back at the first step whose requests made the errors decisive: the 5% step's
    # dozens, or a later one's when those held too few failures to tell from chance.
    step = len(watch.weights) - 2
    assert watch.weights in ([0, 5, 0], [0, 5, 25, 0], [0, 5, 25, 50, 0]), watch.weights
    assert {f"Progressing/{step}", f"RollingBack/{step}"} <= set(pair.killed_in), pair.killed_in
    assert max(pair.handovers) < HANDOVER_BOUND_SECONDS, pair.handovers
    assert pair.acted_only_when_active(), "a standby replica ticked"
    print(f"handovers after SIGKILL: {[round(h, 1) for h in pair.handovers]} s")
