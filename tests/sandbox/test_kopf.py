"""kopf runs against the sandbox: handlers fire once per change, timers tick, finalizers hold
deletion until the delete handler ran; nothing fires twice because of replayed events."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kopf
import pytest
import yaml

from acceltrial.api.trial import GROUP, PLURAL, VERSION
from acceltrial.handlers.startup import configure
from acceltrial_testbed.sandbox.access import EMULATOR_TOKEN, Access
from tests.conftest import EXAMPLES, REPO, environ_with
from tests.integration.http_stub import http_server
from tests.sandbox.conftest import Api, Backend, eventually

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
NAMESPACES = "/api/v1/namespaces"
TRIALS = f"/apis/{GROUP}/{VERSION}/namespaces/serving/{PLURAL}"
FINALIZER = "acceltrial.dev/finalizer"


def install_crd(api: Api) -> None:
    """Create the CRD and wait until its kind is served and discovered: on a real API server
    that is a moment after the create (Established, then the storage answers 429 for a while,
    and discovery lists it a little later). kopf scans discovery once as it starts: a scan
    before the kind is listed left it "unresolved" for the whole test."""
    crd = yaml.safe_load((REPO / "crds" / "acceltrial.dev_acceleratortrials.yaml").read_text())
    assert api.post(CRDS, crd).status == 201
    eventually(lambda: api.get(TRIALS).status == 200)
    eventually(lambda: _discovered(api.get("/apis/acceltrial.dev/v1alpha1").body))


def _discovered(body: Any) -> bool:
    resources = body.get("resources", []) if isinstance(body, dict) else []
    return any(r.get("name") == "acceleratortrials" for r in resources)


def connection_info(access: Access) -> kopf.ConnectionInfo:
    """kopf's login to the cluster: the real server's CA and admin client certificate, or the
    emulator's plain HTTP with any token."""
    if not access.secure:
        return kopf.ConnectionInfo(server=access.url, token=EMULATOR_TOKEN)
    return kopf.ConnectionInfo(
        server=access.url,
        ca_path=str(access.ca),
        certificate_path=str(access.client_cert),
        private_key_path=str(access.client_key),
    )


class Operator:
    """A kopf operator with counting handlers, run in-process on its own thread and loop."""

    def __init__(
        self, access: Access, initial_streaming: bool = False, tick_busy: float = 0.0
    ) -> None:
        self.initial_streaming = initial_streaming
        self.tick_busy = tick_busy
        """How long each timer run takes, as a tick reading a slow cluster does."""
        self.calls: Counter[str] = Counter()
        self.registry = kopf.OperatorRegistry()
        self._register(access)
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._task: asyncio.Task[None] | None = None

    def _register(self, access: Access) -> None:
        on = {"registry": self.registry}

        @kopf.on.startup(**on)
        def startup(settings: kopf.OperatorSettings, **_: Any) -> None:
            configure(settings)
            settings.posting.level = logging.WARNING
            settings.watching.server_timeout = 30
            settings.watching.initial_streaming = self.initial_streaming

        @kopf.on.login(**on)
        def login(**_: Any) -> kopf.ConnectionInfo:
            return connection_info(access)

        @kopf.on.create(GROUP, VERSION, PLURAL, **on)
        def created(patch: kopf.Patch, **_: Any) -> None:
            self.calls["create"] += 1
            patch.status["phase"] = "Pending"

        @kopf.on.update(GROUP, VERSION, PLURAL, field="spec", **on)
        def updated(**_: Any) -> None:
            self.calls["update"] += 1

        @kopf.on.delete(GROUP, VERSION, PLURAL, **on)
        def deleted(**_: Any) -> None:
            self.calls["delete"] += 1

        @kopf.timer(GROUP, VERSION, PLURAL, interval=0.2, **on)
        def ticked(**_: Any) -> None:
            self.calls["timer"] += 1
            time.sleep(self.tick_busy)

        @kopf.daemon(GROUP, VERSION, PLURAL, **on)
        async def watched(stopped: kopf.DaemonStopped, **_: Any) -> None:
            self.calls["daemon"] += 1
            await stopped.wait()
            self.calls["daemon-stopped"] += 1

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._task = self._loop.create_task(
            kopf.operator(registry=self.registry, clusterwide=True, standalone=True)
        )
        self._ready.set()
        try:
            self._loop.run_until_complete(self._task)
        except (asyncio.CancelledError, Exception):  # stopped by cancel()
            pass
        finally:
            self._loop.close()

    def start(self) -> None:
        self._thread.start()
        self._ready.wait(5)

    def stop(self) -> None:
        # Cancelling is how kopf's own tests end an operator quickly (stop_flag waits seconds).
        if self._task is not None:
            self._loop.call_soon_threadsafe(self._task.cancel)
        self._thread.join(timeout=15)


@pytest.fixture(params=[False, True], ids=["list-then-watch", "streaming-list"])
def operator(cluster: Backend, api: Api, request: pytest.FixtureRequest) -> Iterator[Operator]:
    """kopf lists then watches, or (``initial_streaming``) takes the initial state from the
    watch itself (sendInitialEvents, ended by a bookmark)."""
    install_crd(api)
    api.post(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "serving"}})
    running = Operator(cluster.access, initial_streaming=request.param)
    running.start()
    yield running
    running.stop()


def test_kopf_handlers_fire_once_timers_tick_and_finalizers_hold(
    operator: Operator, api: Api
) -> None:
    """kopf's contract with the API server (resourceVersion, JSON-patch tests on it, watch
    resumption, finalizers): one create call per object, one update per spec change, timers on
    schedule, one daemon per object (stopped on deletion), and the delete handler before the
    object goes."""
    trial = yaml.safe_load((EXAMPLES / "llama3-8b-inf2-httproute.yaml").read_text())
    assert api.post(TRIALS, trial).status == 201
    path = f"{TRIALS}/{trial['metadata']['name']}"

    eventually(lambda: operator.calls["create"] == 1 and operator.calls["timer"] >= 3)
    # kopf writes the create handler's patch after the handler returns: on a busy machine the
    # timer (every 0.2 s) ticked three times before it landed.
    eventually(lambda: (api.get(path).body.get("status") or {}).get("phase") == "Pending")
    body = api.get(path).body
    assert FINALIZER in body["metadata"]["finalizers"]
    assert body["status"]["phase"] == "Pending"

    api.merge(path, {"spec": {"candidate": {"replicas": 3}}})
    eventually(lambda: operator.calls["update"] == 1)
    ticks = operator.calls["timer"]
    eventually(lambda: operator.calls["timer"] >= ticks + 3)

    api.delete(path)
    eventually(lambda: api.get(path).status == 404)

    eventually(lambda: operator.calls["daemon-stopped"] == 1)
    assert operator.calls["create"] == 1
    assert operator.calls["update"] == 1
    assert operator.calls["delete"] == 1
    assert operator.calls["daemon"] == 1


def test_a_trial_deleted_while_its_tick_runs_goes_once_the_tick_returns(
    cluster: Backend, api: Api
) -> None:
    """kopf holds its finalizer until a running timer returns, and by default looks again a
    minute later: with acceltrial's settings the trial goes within seconds of its tick."""
    install_crd(api)
    api.post(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "serving"}})
    busy = Operator(cluster.access, tick_busy=2.0)
    busy.start()
    try:
        trial = yaml.safe_load((EXAMPLES / "llama3-8b-inf2-httproute.yaml").read_text())
        assert api.post(TRIALS, trial).status == 201
        path = f"{TRIALS}/{trial['metadata']['name']}"
        eventually(lambda: busy.calls["timer"] >= 2)
        api.delete(path)
        eventually(lambda: api.get(path).status == 404, timeout=15)
        # kopf runs the delete handler again at each look (so it must be idempotent): what a
        # tick still running wrote meanwhile is undone by the next run.
        assert busy.calls["delete"] >= 1
    finally:
        busy.stop()


def test_the_operator_as_a_kopf_run_subprocess_admits_trials(
    cluster: Backend, api: Api, tmp_path: Path
) -> None:
    """The real operator (``kopf run -m acceltrial.handlers``, as the chart runs it) logs in
    through the sandbox's kubeconfig, admits the trial and reports it in status (valid, waiting
    to start) through the status subresource."""
    install_crd(api)
    api.post(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "serving"}})
    trial = yaml.safe_load((EXAMPLES / "llama3-8b-inf2-httproute.yaml").read_text())
    api.post(TRIALS, trial)
    env = environ_with(
        **{
            "KUBECONFIG": str(cluster.kubeconfig),
            "ACCELTRIAL_METRICS_PORT": "0",
            "HOME": str(tmp_path),
        }
    )
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kopf",
            "run",
            "-m",
            "acceltrial.handlers",
            "--standalone",
            "--all-namespaces",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    path = f"{TRIALS}/{trial['metadata']['name']}"
    try:

        def admitted() -> dict[str, Any] | None:
            status: dict[str, Any] = api.get(path).body.get("status", {})
            return status if status.get("conditions") else None

        status = eventually(admitted)  # kopf starts slowly on a loaded machine
        assert status["observedGeneration"] == 1
        assert status["phase"] == "Pending"
        kinds = {c["type"]: c for c in status["conditions"]}
        assert (kinds["Ready"]["status"], kinds["Ready"]["reason"]) == ("False", "Pending")
        assert kinds["Reconciling"]["status"] == "True", "kstatus reads it as in progress"
    finally:
        process.terminate()
        process.wait(timeout=30)
        # The operator is gone: release its finalizer, or the trial (and on the real server its
        # namespace and CRD) would wait for it forever.
        api.merge(path, {"metadata": {"finalizers": None}})


def test_an_operator_stopped_right_after_a_decision_still_tells_it(
    cluster: Backend, api: Api, tmp_path: Path
) -> None:
    """SIGTERM while a trial's final notification is on its way: the real operator (``kopf
    run``) waits for it (at most 20 s, the cleanup handler's flush) before it exits, so the
    receiver hears of the decision and the operator logs it delivered."""
    install_crd(api)
    api.post(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "serving"}})
    arrived = threading.Event()
    bodies: list[dict[str, Any]] = []

    def slow_receiver(_handler: object, body: bytes) -> tuple[int, bytes]:
        bodies.append(json.loads(body))
        arrived.set()
        time.sleep(HELD_SECONDS)  # the POST is still in flight when SIGTERM comes
        return 200, b"{}"

    with http_server(slow_receiver) as url:
        trial = yaml.safe_load((EXAMPLES / "llama3-8b-inf2-httproute.yaml").read_text())
        trial["spec"]["candidate"].pop("compiledArtifacts")
        # No baseline Deployment: preflight fails the trial on its first tick.
        trial["spec"]["notifications"] = [{"name": "hook", "webhook": {"url": url}}]
        api.post(TRIALS, trial)
        log = tmp_path / "operator.log"
        process = start_operator(cluster, tmp_path, log)
        path = f"{TRIALS}/{trial['metadata']['name']}"
        try:
            assert arrived.wait(120), f"no notification arrived:\n{log.read_text()[-3000:]}"
            process.send_signal(signal.SIGTERM)
            stopped = time.monotonic()
            assert process.wait(timeout=40) == 0
            waited = time.monotonic() - stopped
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
            api.merge(path, {"metadata": {"finalizers": None}})
    assert [b["event"] for b in bodies] == ["Failed"]
    assert bodies[0]["phase"] == "Failed"
    assert "llama3-8b-inf2 hook (Failed) delivered" in log.read_text(), log.read_text()[-3000:]
    assert waited < 20 + HELD_SECONDS, "the flush is bounded"


HELD_SECONDS = 3.0


def start_operator(cluster: Backend, home: Path, log: Path) -> subprocess.Popen[bytes]:
    """``kopf run -m acceltrial.handlers`` as the chart runs it, logging into ``log``."""
    env = environ_with(
        **{
            "KUBECONFIG": str(cluster.kubeconfig),
            "ACCELTRIAL_METRICS_PORT": "0",
            "ACCELTRIAL_TICK_SECONDS": "1",
            "ACCELTRIAL_LOG_LEVEL": "INFO",
            "AWS_EC2_METADATA_DISABLED": "true",
            "HOME": str(home),
        }
    )
    command = [sys.executable, "-m", "kopf", "run", "-m", "acceltrial.handlers", "--standalone"]
    with log.open("ab") as out:
        return subprocess.Popen(
            [*command, "--all-namespaces"], env=env, stdout=out, stderr=subprocess.STDOUT
        )
