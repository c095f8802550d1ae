"""The fault suite: trials run through seeded fault schedules, with figures per fault kind.

For every fault kind, three trials run in their own namespaces against the sandbox (emulated API
server), a simulated vLLM fleet and a real Prometheus, each kind with its own operator process
(``kopf run -m acceltrial.handlers``) whose API traffic, or whose trials' Prometheus traffic,
goes through a :class:`~bench.faultproxy.FaultProxy`:

- ``good``: the candidate serves as well as the baseline; fault-free, it is Promoted;
- ``bad``: the candidate fails 20% of requests; fault-free, it is RolledBack at 5%;
- ``silent``: the candidate is sent no requests (its series stay empty); fault-free it pauses
  (no data is never a pass), and the suite aborts it: Aborted, with the route restored.

Per kind it prints: trials run, outcomes equal to the fault-free run, other outcomes that are a
documented safe state (paused on missing data then aborted, or rolled back, with the route
restored), weights set twice or skipped (from a watch on the HTTPRoute), routes not restored
exactly after a rollback or abort, promotions on missing data (the silent trial reaching
Promoting), stuck trials (no end within the deadline) and the faults injected.

    .venv/bin/python -m bench.faults                      # every kind once, seed 1
    .venv/bin/python -m bench.faults --rounds 3 --seed 7  # the longer run (make bench-faults)
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.client
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from tests.conftest import REPO
from tests.integration.e2e_kit import (
    BACKENDS,
    ROUTE,
    backend_of,
    install_baseline,
    trial,
    without_defaults,
)
from tests.integration.prometheus_server import running_prometheus
from tests.integration.simulated import STEADY, profile, serving
from tests.sandbox.conftest import Api, served

from acceltrial_testbed.sandbox.access import Access
from acceltrial_testbed.sandbox.fleet.model import ServingProfile
from acceltrial_testbed.sandbox.kubeconfig import write_kubeconfig
from bench.faultproxy import FaultProxy, Schedule

Target = Literal["none", "api", "prometheus", "restart"]
Role = Literal["good", "bad", "silent"]
ROLES: tuple[Role, ...] = ("good", "bad", "silent")
FAULT_FREE: dict[Role, str] = {"good": "Promoted", "bad": "RolledBack", "silent": "Aborted"}
TERMINAL = ("Promoted", "RolledBack", "Failed", "Aborted")
STEPS = (0, 5, 25, 50, 100)
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
TRIALS = "/apis/acceltrial.dev/v1alpha1/namespaces/{}/acceleratortrials/llama3-inf2"
ROUTES = "/apis/gateway.networking.k8s.io/v1/namespaces/{}/httproutes"
API_TIMEOUT_SECONDS = 5.0
"""The operator's API request timeout under test; the proxy's delays are longer."""
DELAY_SECONDS = 6.0


@dataclass(frozen=True)
class FaultKind:
    """One row of the table: where faults are injected, which, and how often per request."""

    name: str
    target: Target
    faults: tuple[str, ...] = ()
    rate: float = 0.0


KINDS = (
    FaultKind("none", "none"),
    FaultKind("api-409-on-writes", "api", ("conflict",), 0.3),
    FaultKind("api-500", "api", ("error-500",), 0.1),
    FaultKind("api-503", "api", ("error-503",), 0.1),
    FaultKind("api-429", "api", ("throttle",), 0.1),
    FaultKind("api-delay", "api", ("delay",), 0.05),
    FaultKind("watch-dropped", "api", ("watch-drop",), 0.5),
    FaultKind("watch-410-gone", "api", ("watch-gone",), 0.5),
    FaultKind("prom-500-503-429", "prometheus", ("error-500", "error-503", "throttle"), 0.3),
    FaultKind("prom-delay", "prometheus", ("delay",), 0.1),
    FaultKind("prom-partial", "prometheus", ("partial",), 0.1),
    FaultKind("prom-stale", "prometheus", ("stale",), 0.2),
    FaultKind("prom-restart", "restart"),
)


@dataclass
class TrialRun:
    """What one trial did."""

    kind: str
    role: Role
    outcome: str = "stuck"
    phases: list[str] = field(default_factory=list)
    weights: list[int] = field(default_factory=list)
    restored: bool = True
    serving: bool = True
    """At the end, every backend the route sends traffic to has a Deployment with replicas."""
    paused: bool = False

    @property
    def same(self) -> bool:
        return self.outcome == FAULT_FREE[self.role]

    @property
    def safe(self) -> bool:
        """A documented safe end other than the fault-free one: rolled back or aborted (after
        a pause on missing data), with the route exactly as found."""
        return not self.same and self.outcome in ("RolledBack", "Aborted") and self.restored

    @property
    def weights_wrong(self) -> bool:
        return not walk_is_exact(self.weights)

    @property
    def missing_data_promotion(self) -> bool:
        promoted = {"Promoting", "BakingIn", "Promoted"}
        return self.role == "silent" and bool(promoted & set(self.phases))


@dataclass
class Row:
    kind: str
    runs: list[TrialRun]
    injected: Counter[str]
    operator_restarts: int = 0

    def figures(self) -> dict[str, int]:
        return {
            "trials": len(self.runs),
            "same outcome": sum(r.same for r in self.runs),
            "safe other": sum(r.safe for r in self.runs),
            "weights twice/skipped": sum(r.weights_wrong for r in self.runs),
            "routes not restored": sum(not r.restored for r in self.runs),
            "promotions on missing data": sum(r.missing_data_promotion for r in self.runs),
            "stuck": sum(r.outcome == "stuck" for r in self.runs),
            "left without serving": sum(not r.serving for r in self.runs),
            "faults injected": sum(self.injected.values()),
            "operator restarts": self.operator_restarts,
        }


def walk_is_exact(seen: list[int]) -> bool:
    """The candidate weights the route took go up the steps in order, none repeated after a
    later one nor skipped, and at most come back once to the original (0)."""
    drop = next((i for i in range(1, len(seen)) if seen[i] < seen[i - 1]), len(seen))
    up, down = seen[:drop], seen[drop:]
    return up == list(STEPS[: len(up)]) and down in ([], [0])


# -- the world the trials run in -------------------------------------------------------------


class World:
    """The sandbox, the fleet and one shared Prometheus, for every kind of the run."""

    def __init__(self, stack: contextlib.ExitStack, folder: Path, kinds: list[FaultKind]):
        # Two GPU replicas per baseline and up to two Neuron ones per candidate, every trial's
        # kept to the end: nodes for all of them, or the last kinds' baselines never schedule.
        nodes = 2 * len(ROLES) * len(kinds) + 6
        self.folder = folder
        # The real control plane when it is built (always in CI), else the emulator.
        plane = "real" if "real" in BACKENDS else "emulator"
        self.sandbox = stack.enter_context(backend_of(plane, nodes_per_group=nodes))
        self.api = Api.to(self.sandbox.access)
        crd = yaml.safe_load((REPO / "crds" / "acceltrial.dev_acceleratortrials.yaml").read_text())
        assert self.api.post(CRDS, crd).status == 201
        served(self.api, crd["metadata"]["name"], "/apis/acceltrial.dev/v1alpha1/acceleratortrials")
        profiles = {key: value for kind in kinds for key, value in fleet_profiles(kind).items()}
        self.scrape = stack.enter_context(serving(self.sandbox.access, profiles))
        self.prometheus_url = self.start_prometheus(stack, "shared")

    def start_prometheus(self, stack: contextlib.ExitStack, name: str) -> str:
        data = Path(tempfile.mkdtemp(prefix=f"prom-{name}-", dir=self.folder)) / "data"
        return stack.enter_context(running_prometheus(data, self.scrape))


def fleet_profiles(kind: FaultKind) -> dict[tuple[str, str], ServingProfile]:
    return {
        (namespace(kind, "good"), "baseline"): STEADY,
        (namespace(kind, "good"), "candidate"): profile(p50=0.24, p99=0.48),
        (namespace(kind, "bad"), "baseline"): STEADY,
        (namespace(kind, "bad"), "candidate"): profile(error_ratio=0.2),
        (namespace(kind, "silent"), "baseline"): STEADY,  # its candidate is sent nothing
    }


def namespace(kind: FaultKind, role: Role) -> str:
    return f"{kind.name}-{role}"


def run_kind(world: World, kind: FaultKind, seed: int, deadline: float) -> Row:
    """Run the three trials of ``kind`` under its own operator and proxies."""
    with contextlib.ExitStack() as stack:
        schedule = Schedule(kinds=kind.faults, rate=kind.rate, seed=seed)
        prometheus_url, proxies = world.prometheus_url, []
        if kind.target == "api":
            proxy = stack.enter_context(FaultProxy(world.sandbox.access, schedule, DELAY_SECONDS))
            proxies = [proxy]
        elif kind.target == "prometheus":
            proxy = stack.enter_context(FaultProxy(prometheus_url, schedule, DELAY_SECONDS))
            prometheus_url, proxies = proxy.url, [proxy]
        elif kind.target == "restart":
            proxy = stack.enter_context(FaultProxy(prometheus_url, Schedule()))
            prometheus_url, proxies = proxy.url, [proxy]
            restarts = Restarts(world, proxy, seed)
            stack.callback(restarts.stop)
        runs = [TrialRun(kind.name, role) for role in ROLES]
        watches = [start_trial(world, kind, run, prometheus_url) for run in runs]
        api_proxy = proxies[0] if kind.target == "api" else None
        operator = Supervised(lambda: start_operator(world, kind, api_proxy))
        try:
            follow(world, kind, runs, deadline, operator)
        finally:
            operator.stop()
        for run, watch in zip(runs, watches, strict=True):
            run.weights = list(watch.weights)
            watch.stop()
        injected = sum((p.injected for p in proxies), Counter[str]())
        if kind.target == "restart":
            injected["prometheus-restart"] = restarts.count
        row = Row(kind.name, runs, injected)
        row.operator_restarts = operator.restarts
        return row


class Restarts:
    """Restarts a Prometheus of its own on empty storage at seeded moments (10-25 s apart),
    pointing the proxy at each new one: recent data is lost, as after a crash without a
    persistent volume."""

    def __init__(self, world: World, proxy: FaultProxy, seed: int) -> None:
        self.world, self.proxy = world, proxy
        self.random = random.Random(seed)
        self.count = 0
        self._stop = threading.Event()
        self._stack = contextlib.ExitStack()
        self.proxy.retarget(world.start_prometheus(self._stack, "restart"))
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.random.uniform(10, 25)):
            self._stack.close()  # the old one is gone: requests meanwhile are refused
            self._stack = contextlib.ExitStack()
            self.proxy.retarget(self.world.start_prometheus(self._stack, "restart"))
            self.count += 1

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)
        self._stack.close()


def start_trial(world: World, kind: FaultKind, run: TrialRun, prometheus_url: str) -> RouteWatch:
    ns = namespace(kind, run.role)
    install_baseline(world.api, ns)
    watch = RouteWatch(world.sandbox.access, ns)
    analysis: dict[str, Any] = {"prometheus": {"address": prometheus_url}}
    if kind.name.startswith("prom-delay"):
        analysis["prometheus"]["timeout"] = "2s"  # the proxy's delay is longer
    # A loaded machine can take a minute before the baseline's first rate() answers.
    body = trial(ns, prometheus_url, analysis=analysis, progressDeadline="180s")
    path = TRIALS.format(ns).rsplit("/", 1)[0]
    assert world.api.post(path, body).status == 201
    return watch


def start_operator(
    world: World, kind: FaultKind, api_proxy: FaultProxy | None
) -> subprocess.Popen[bytes]:
    """The operator, through the API proxy when the kind injects API faults (plain HTTP: the
    proxy reaches the real control plane with its admin certificate), else as the cluster's
    kubeconfig says."""
    folder = world.folder / kind.name
    folder.mkdir(parents=True, exist_ok=True)
    kubeconfig = world.sandbox.kubeconfig
    if api_proxy is not None:
        kubeconfig = write_kubeconfig(folder / "kubeconfig", api_proxy.url)
    env = os.environ | {
        "KUBECONFIG": str(kubeconfig),
        "ACCELTRIAL_METRICS_PORT": "0",
        "ACCELTRIAL_TICK_SECONDS": "1",
        "ACCELTRIAL_API_TIMEOUT_SECONDS": f"{API_TIMEOUT_SECONDS:g}",
        "HOME": str(folder),
    }
    scope = [f"--namespace={namespace(kind, role)}" for role in ROLES]
    args = [sys.executable, "-m", "kopf", "run", "-m", "acceltrial.handlers", "--standalone"]
    with (folder / "operator.log").open("a") as log:
        return subprocess.Popen([*args, *scope], env=env, stdout=log, stderr=subprocess.STDOUT)


class Supervised:
    """The operator process, started again when it exits, as the Deployment's pod would be."""

    def __init__(self, start: Callable[[], subprocess.Popen[bytes]]) -> None:
        self.start, self.process, self.restarts = start, start(), 0

    def check(self) -> None:
        if self.process.poll() is not None:
            self.process, self.restarts = self.start(), self.restarts + 1

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 30 s, as the kubelet ends a pod past its grace period: a
        handler still asking a restarting Prometheus again can outlast the grace."""
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=30)


def follow(
    world: World, kind: FaultKind, runs: list[TrialRun], deadline: float, operator: Supervised
) -> None:
    """Poll the trials (directly, not through the proxy) until each ends or the deadline; a
    trial paused on missing data is aborted, as a person would."""
    ends = time.monotonic() + deadline
    pending = list(runs)
    while pending and time.monotonic() < ends:
        operator.check()
        for run in list(pending):
            path = TRIALS.format(namespace(kind, run.role))
            try:
                status = world.api.get(path).body.get("status") or {}
            except OSError:
                continue  # the sandbox shares this process; a slow answer is polled again
            phase = status.get("phase")
            if phase and (not run.phases or run.phases[-1] != phase):
                run.phases.append(phase)
            if phase == "Paused" and status.get("pauseReason") == "Inconclusive" and not run.paused:
                run.paused = True
                action = {"metadata": {"annotations": {"acceltrial.dev/action": "abort"}}}
                world.api.merge(path, action)
            if phase in TERMINAL:
                run.outcome = phase
                run.restored = phase == "Promoted" or route_refs(world, kind, run) == [ROUTE]
                run.serving = serves(world, kind, run)
                pending.remove(run)
        time.sleep(0.25)  # bounded poll of the trials' phases


def serves(world: World, kind: FaultKind, run: TrialRun) -> bool:
    """Whether every backend with traffic has a Deployment (named as its Service) with
    replicas: a rollback after the baseline was scaled to zero would route to nothing."""
    ns = namespace(kind, run.role)
    for ref in route_refs(world, kind, run):
        if ref.get("weight", 1) > 0:
            deployment = world.api.get(f"/apis/apps/v1/namespaces/{ns}/deployments/{ref['name']}")
            if deployment.status != 200 or not deployment.body["spec"].get("replicas"):
                return False
    return True


def route_refs(world: World, kind: FaultKind, run: TrialRun) -> list[dict[str, Any]]:
    route = world.api.get(f"{ROUTES.format(namespace(kind, run.role))}/llama3").body
    # Without the values the real API server's CRD defaults (group, kind, weight 1).
    return without_defaults(route["spec"]["rules"][0]["backendRefs"])


class RouteWatch:
    """Every candidate weight the HTTPRoute takes, from a watch on the sandbox itself."""

    def __init__(self, access: Access, ns: str) -> None:
        self._connection = access.connect(timeout=610)
        self._path = f"{ROUTES.format(ns)}?watch=true&timeoutSeconds=600"
        self.weights: list[int] = []
        self._thread = threading.Thread(target=self._follow, daemon=True)
        self._thread.start()

    def _follow(self) -> None:
        with contextlib.suppress(OSError, ValueError, http.client.HTTPException):
            self._connection.request("GET", self._path)
            stream = self._connection.getresponse()
            while line := stream.readline():
                refs = json.loads(line)["object"]["spec"]["rules"][0]["backendRefs"]
                weight = next((r["weight"] for r in refs if r["name"] != ROUTE["name"]), 0)
                if not self.weights or self.weights[-1] != weight:
                    self.weights.append(weight)

    def stop(self) -> None:
        """End the watch. Shutting the socket down wakes the reading thread; closing the
        response from here instead waits on the reader's lock until the server ends the watch
        (600 s)."""
        sock = self._connection.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(timeout=10)
        self._connection.close()


# -- running and printing ----------------------------------------------------------------------


def run(
    kinds: list[FaultKind],
    seed: int,
    *,
    rounds: int = 1,
    parallel: int = 4,
    deadline: float = 300,
    workdir: Path | None = None,
    on_row: Callable[[Row], None] | None = None,
) -> list[Row]:
    """Every kind ``rounds`` times (seeds ``seed``, ``seed + 1``, ...), ``parallel`` at once."""
    rows: dict[str, Row] = {k.name: Row(k.name, [], Counter()) for k in kinds}
    rounds_kinds = [
        [FaultKind(f"{k.name}-r{n}", k.target, k.faults, k.rate) for k in kinds]
        for n in range(rounds)
    ]
    with tempfile.TemporaryDirectory(prefix="faults-") as tmp:
        folder = workdir or Path(tmp)
        for n, round_kinds in enumerate(rounds_kinds):
            # A world of its own per round: one emulated API server holding every round's
            # trials and nodes slowed down until round 3's setup requests timed out.
            with contextlib.ExitStack() as stack, ThreadPoolExecutor(max_workers=parallel) as pool:
                world = World(stack, folder, round_kinds)
                seeds = [seed + n] * len(round_kinds)
                in_world = functools.partial(run_kind, world, deadline=deadline)
                done = pool.map(in_world, round_kinds, seeds)
                for kind, row in zip(kinds, done, strict=True):
                    if on_row is not None:
                        on_row(row)
                    rows[kind.name].runs += row.runs
                    rows[kind.name].injected += row.injected
                    rows[kind.name].operator_restarts += row.operator_restarts
    return list(rows.values())


COLUMNS = (
    "trials",
    "same outcome",
    "safe other",
    "weights twice/skipped",
    "routes not restored",
    "promotions on missing data",
    "stuck",
    "left without serving",
    "faults injected",
    "operator restarts",
)


def table(rows: list[Row]) -> str:
    """A Markdown table of the figures, one row per fault kind and a total."""
    lines = ["| fault kind | " + " | ".join(COLUMNS) + " |", "|---" * (len(COLUMNS) + 1) + "|"]
    total: Counter[str] = Counter()
    for row in rows:
        figures = row.figures()
        total.update(figures)
        lines.append(f"| {row.kind} | " + " | ".join(str(figures[c]) for c in COLUMNS) + " |")
    lines.append("| **all** | " + " | ".join(str(total[c]) for c in COLUMNS) + " |")
    return "\n".join(lines)


def details(rows: list[Row]) -> Iterator[str]:
    """One line per trial that did not end as the fault-free run did."""
    for row in rows:
        for r in row.runs:
            if not r.same or r.weights_wrong or not r.restored:
                yield (f"  {row.kind}/{r.role}: {r.outcome} via {' > '.join(r.phases)}; "
                       f"weights {r.weights}; restored {r.restored}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=1, help="runs of every kind (seed + n)")
    parser.add_argument("--parallel", type=int, default=4, help="kinds run at once")
    parser.add_argument("--kinds", default="", help="comma-separated kinds (default: all)")
    parser.add_argument("--deadline", type=float, default=300, help="seconds per trial")
    parser.add_argument("--workdir", type=Path, help="keep the operators' logs here")
    args = parser.parse_args(argv)
    wanted = set(filter(None, args.kinds.split(",")))
    kinds = [k for k in KINDS if not wanted or k.name in wanted]
    started = time.monotonic()
    rows = run(
        kinds,
        args.seed,
        rounds=args.rounds,
        parallel=args.parallel,
        deadline=args.deadline,
        workdir=args.workdir,
        on_row=lambda row: print(f"{row.kind}: {row.figures()}", flush=True),
    )
    print(table(rows))
    for line in details(rows):
        print(line)
    print(f"seed {args.seed}, {args.rounds} round(s), {time.monotonic() - started:.0f}s")
    guarantees = ("promotions on missing data", "routes not restored", "weights twice/skipped",
                  "left without serving")  # fmt: skip
    bad = sum(r.figures()[g] for r in rows for g in guarantees)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
