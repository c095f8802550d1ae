"""Every shipped scenario through ``acceltrial demo --scenario NAME``, as a user runs it: it must
end as its ``expect`` says, leave routing as the trial left it, and leave no process behind.

All of them run on a busy machine (several demos at a time on few cores, see ``load.py``), and
the flagship ``promote`` scenario runs ``PROMOTE_RUNS`` times (10 in CI, 3 otherwise;
``ACCELTRIAL_PROMOTE_RUNS`` overrides it): a decision that flips with the machine's load is a bug.

A demo spends most of its minute waiting for its steps, so the module starts every demo its
selected tests need at once, at most ``DEMO_CONCURRENCY`` at a time (4;
``ACCELTRIAL_DEMO_CONCURRENCY`` overrides it), each a process of its own with its own control
plane, Prometheus and operator; each test then waits for its own demo. The
concurrent demos are load on one another too: the flagship's runs overlap every other scenario.

In CI every scenario runs once on the real control plane (``--control-plane real``; CI fails
when it is not built) and the flagship's repetitions on the emulator, which ``make demo`` uses
on a fresh machine. Elsewhere the flagship and the shadow scenarios run on the real control
plane when it is built, the others on the emulator; ``ACCELTRIAL_E2E_REAL=1`` runs them all on
the real one.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from acceltrial.api.spec import EconomicsSpec
from acceltrial.engine.economics import Throughput, VariantInput, compare
from acceltrial.providers.pricing.catalog import bundled_catalog
from acceltrial_testbed.sandbox.prometheus import PrometheusServer, find_prometheus
from acceltrial_testbed.sandbox.realplane.binaries import binaries_available
from tests.chart.test_monitoring import dashboard_queries
from tests.cli.browser import screenshot
from tests.conftest import REPO, TOOLS_BIN, environ_with
from tests.demo.load import sampled_load
from tests.demo.test_scenario_files import SHIPPED
from tests.sandbox.conftest import require_real_control_plane

pytestmark = pytest.mark.slow
# CI (.ci/run sets CI=1) runs the flagship 10 times, concurrently with the other scenarios;
# `make test` on a laptop 3 times.
PROMOTE_RUNS = int(os.environ.get("ACCELTRIAL_PROMOTE_RUNS", "10" if os.environ.get("CI") else "3"))
DEMO_CONCURRENCY = max(1, int(os.environ.get("ACCELTRIAL_DEMO_CONCURRENCY", "4")))
SCENARIOS = [p.stem for p in SHIPPED]
ALL_ON_REAL = os.environ.get("ACCELTRIAL_E2E_REAL") == "1" or bool(os.environ.get("CI"))
TRAINING = {"training-recommended", "training-loss-diverges", "training-compile-fails",
            "training-exported-throughput"}  # fmt: skip
REAL_ONLY = {"inference-pool", "inference-pool-rollback", *TRAINING}
"""Scenarios the emulator refuses (InferencePools, TrainingTrials): skipped where the real plane
is not built."""
ON_REAL = {"promote", "shadow-promote", "shadow-rollback", "quality-regression", "quality-parity",
           "capacity-measured", *REAL_ONLY}  # fmt: skip
"""Scenarios run on the real control plane outside CI when it is built (all in CI or with
ACCELTRIAL_E2E_REAL=1)."""
SCENARIO_TEST = "test_the_scenario_ends_as_expected_on_a_busy_machine"
FLAGSHIP_TEST = "test_promote_ends_promoted_every_time_on_a_busy_machine"
CAPPED_TEST = "test_without_scaling_for_production_the_same_scenario_fails_the_bake"
UNMEASURED_TEST = "test_without_a_capacity_test_the_same_candidate_fails_users_in_the_bake"
DASHBOARD_TEST = "test_every_dashboard_query_returns_data_from_a_demos_prometheus"
KEPT = "kept.json"
"""Where the flagship's first run says which folder the demo kept."""


def control_plane_for(name: str) -> str:
    """real when built (always in CI, where a missing build fails); else the emulator."""
    if not ALL_ON_REAL and name not in ON_REAL:
        return "emulator"
    if os.environ.get("CI") or binaries_available():
        return "real"
    return "emulator"


@dataclass(frozen=True)
class Demo:
    """One demo a selected test needs: ``check(scenario, folder, control_plane)``."""

    check: Callable[[str, Path, str], str | None]
    """What went wrong (None when nothing did); it may also raise what the test re-raises."""
    scenario: str
    control_plane: str


@dataclass
class Ran:
    """One demo process: what went wrong (None when nothing did), how long it took, the load."""

    problem: str | None
    seconds: float
    load: str
    kept: Path | None = None
    """``KEPT`` in the demo's folder, when its check kept the demo's data."""


Demos = dict[str, Future[Ran]]
"""The selected tests' demos by key, started at once; each test waits for its own."""


def demos_to_run(selected: set[str]) -> dict[str, Demo]:
    """The demos the selected tests of this module wait for, by key."""
    work: dict[str, Demo] = {}
    for name in SCENARIOS:
        if name in REAL_ONLY and control_plane_for(name) != "real":
            continue  # its test skips
        if f"{SCENARIO_TEST}[{name}]" in selected:
            work[name] = Demo(run_and_check, name, control_plane_for(name))
    if FLAGSHIP_TEST in selected:
        for run in range(1, PROMOTE_RUNS + 1):
            work[f"promote-run-{run}"] = Demo(run_and_check, "promote", "emulator")
    if DASHBOARD_TEST in selected:  # the flagship's first run keeps its Prometheus data
        work["promote-run-1"] = Demo(run_check_and_keep, "promote", "emulator")
    if CAPPED_TEST in selected:
        work["capped"] = Demo(run_capped, "scale-for-production", "emulator")
    if UNMEASURED_TEST in selected:
        work["unmeasured"] = Demo(run_unmeasured, "capacity-measured", "emulator")
    return work


@pytest.fixture(scope="module")
def demos(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Demos]:
    selected = {item.name for item in request.session.items if item.module is request.module}
    work = demos_to_run(selected)
    if any(demo.control_plane == "real" for demo in work.values()):
        require_real_control_plane()
    root = tmp_path_factory.mktemp("demos")
    # The longest first: the real control plane's scenarios, then the flagship's runs between.
    order = sorted(work, key=lambda key: work[key].control_plane != "real")
    # Started at once, DEMO_CONCURRENCY at a time; each test waits for its own.
    with sampled_load() as load, ThreadPoolExecutor(DEMO_CONCURRENCY, "demo") as pool:

        def timed(key: str) -> Ran:
            demo = work[key]
            since, started = len(load.samples), time.monotonic()
            problem = demo.check(demo.scenario, root / key, demo.control_plane)
            kept = root / key / KEPT
            seconds = time.monotonic() - started
            return Ran(problem, seconds, load.summary(since), kept if kept.exists() else None)

        futures = {key: pool.submit(timed, key) for key in order}
        try:
            yield futures
        finally:
            for future in futures.values():
                future.cancel()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it has stopped running all the same.
    status = Path(f"/proc/{pid}/stat")
    return status.exists() and status.read_text().split()[2] != "Z"


@pytest.mark.parametrize("name", SCENARIOS)
def test_the_scenario_ends_as_expected_on_a_busy_machine(
    name: str, demos: Demos, capsys: pytest.CaptureFixture[str]
) -> None:
    if name not in demos:
        pytest.skip(f"{name} needs the real control plane: make control-plane")
    ran = demos[name].result()
    with capsys.disabled():
        print(f"\n{name} ({control_plane_for(name)} control plane, {ran.seconds:.0f}s): "
              f"{ran.problem or 'ended as expected'}; {ran.load}")  # fmt: skip
    assert ran.problem is None, ran.problem


def test_promote_ends_promoted_every_time_on_a_busy_machine(
    demos: Demos, capsys: pytest.CaptureFixture[str]
) -> None:
    problems: dict[int, str] = {}
    for run in range(1, PROMOTE_RUNS + 1):
        ran = demos[f"promote-run-{run}"].result()
        with capsys.disabled():
            print(f"\npromote run {run}/{PROMOTE_RUNS}: {ran.problem or 'Promoted'} in "
                  f"{ran.seconds:.0f}s; {ran.load}")  # fmt: skip
        if ran.problem is not None:
            problems[run] = ran.problem
    promoted = PROMOTE_RUNS - len(problems)
    with capsys.disabled():
        print(f"\npromote: {promoted} of {PROMOTE_RUNS} runs promoted, {DEMO_CONCURRENCY} demos "
              f"at a time")  # fmt: skip
    assert not problems, problems


def test_every_dashboard_query_returns_data_from_a_demos_prometheus(demos: Demos) -> None:
    """The chart's Grafana dashboard against what a demo's Prometheus scraped from the operator
    (as the chart's ServiceMonitor has it scraped): over the demo's span, as the dashboard's time
    range shows it, every panel's query answers with a series."""
    ran = demos["promote-run-1"].result()
    assert ran.problem is None, ran.problem
    kept = json.loads(ran.kept.read_text()) if ran.kept else None
    assert kept is not None, "the demo's folder was not kept"
    folder = Path(kept["folder"])
    prometheus = PrometheusServer(find_prometheus(), folder / "prometheus", []).start()
    try:
        head = prometheus_api(prometheus.url, "/api/v1/status/tsdb", {})["headStats"]
        span = {"start": head["minTime"] / 1000, "end": head["maxTime"] / 1000, "step": 1}
        empty = {
            title: query
            for title, query in dashboard_queries().items()
            if not prometheus_api(prometheus.url, "/api/v1/query_range", {"query": query, **span})[
                "result"
            ]
        }
    finally:
        prometheus.stop()
        shutil.rmtree(folder, ignore_errors=True)
    assert not empty, f"dashboard queries with no series over the demo: {empty}"


def prometheus_api(url: str, path: str, query: dict[str, Any]) -> Any:
    with urllib.request.urlopen(f"{url}{path}?{urllib.parse.urlencode(query)}", timeout=10) as r:
        body = json.loads(r.read())
    assert body["status"] == "success", body
    return body["data"]


def run_check_and_keep(name: str, folder: Path, control_plane: str) -> str | None:
    """``run_and_check`` with ``--keep``: the demo's folder (its Prometheus data) stays, and
    ``KEPT`` in ``folder`` says where it is."""
    problem = run_and_check(name, folder, control_plane, "--keep")
    told = KEPT_FOLDER.search((folder / "stdout.txt").read_text())
    if told is not None:
        (folder / KEPT).write_text(json.dumps({"folder": told.group(1)}))
    return problem


KEPT_FOLDER = re.compile(r"logs and Prometheus data kept in (\S+)")


def demo_command(scenario: str, result_file: Path, control_plane: str) -> list[str]:
    return [sys.executable, "-m", "acceltrial.cli.main", "demo", "--scenario", scenario,
            "--result-file", str(result_file), "--control-plane", control_plane]  # fmt: skip


def run_demo(command: list[str]) -> subprocess.CompletedProcess[str]:
    env = environ_with(**{"PATH": f"{TOOLS_BIN}{os.pathsep}{os.environ.get('PATH', '')}"})
    return subprocess.run(
        command, cwd=REPO, env=env, capture_output=True, text=True, timeout=420, check=False
    )


def run_and_check(name: str, folder: Path, control_plane: str, *more: str) -> str | None:
    """Run the scenario as a user does; what went wrong, or None when all is as expected."""
    folder.mkdir(parents=True, exist_ok=True)
    result_file = folder / "result.json"
    command = demo_command(name, result_file, control_plane)
    done = run_demo([*command, "--report-dir", str(folder / "report"), *more])
    (folder / "stdout.txt").write_text(done.stdout)
    seed = drawn_with(result_file)
    if done.returncode != 0 or "matched" not in done.stdout:
        return f"exit {done.returncode}{seed}:\n{done.stdout[-4000:]}{done.stderr[-2000:]}"
    if shutil.which("chromium") and (folder / "report" / "report.html").exists():
        screenshot(folder / "report" / "report.html", f"report-demo-{folder.name}")
    try:
        assert_told_in_order(done.stdout)
        check_result(name, json.loads(result_file.read_text()))
    except (AssertionError, KeyError, TypeError) as error:
        return f"{error!r}{seed}\n{done.stdout[-4000:]}"
    return None


def drawn_with(result_file: Path) -> str:
    """The fleet's seed as the demo's result gives it, to repeat the run's draws with."""
    try:
        return f" (fleet.seed {json.loads(result_file.read_text())['fleetSeed']})"
    except (OSError, ValueError, KeyError):
        return ""


def check_result(name: str, result: dict[str, Any]) -> None:
    status = result["status"]
    if result.get("kind") == "TrainingTrial":
        check_training_result(name, result)
        return
    if name == "capacity-measured":
        assert_both_variants_swept(result)
    if name == "replicas-router":
        assert_replicas_router_shares(result)
    elif status["phase"] == "Promoted":
        refs = result["route"]["spec"]["rules"][0]["backendRefs"]
        assert [r["weight"] for r in refs] == [0, 100]
        # Projected replicas are whole pods: scale-for-production's candidate needs about 2.1
        # inf2 pods, 2 or 3 as a busy machine reads utilization a point lower, and 3 cost more
        # than the GPUs. The band 5 utilization points wide must hold a saving.
        economics = status["economics"]
        best = economics.get("projectedMonthlySavingsHigh", economics["projectedMonthlySavings"])
        assert best > 0, economics
    elif "original" not in status:  # stopped in preflight: nothing recorded, nothing changed
        refs = result["route"]["spec"]["rules"][0]["backendRefs"]
        assert status["decision"]["verdict"] == "none"
        assert not any(r["name"].endswith("-candidate") for r in refs), "the route as found"
    else:
        refs = result["route"]["spec"]["rules"][0]["backendRefs"]
        assert refs == status["original"]["httpRoute"]["backendRefs"], "routing as found"
    if status.get("decision", {}).get("reasonCode") == "QualityFailed":
        assert result["route"]["metadata"]["generation"] == 1, "the route was never written"
        assert (status["quality"]["verdict"], status["quality"]["step"]) == ("Fail", 0)
    if name == "quality-parity":
        assert (status["quality"]["verdict"], status["quality"]["step"]) == ("Pass", 0)
    if name in ("promote", "low-utilization"):
        assert_report_economics_recompute(result["report"], status)
    if "inferencePools" in result:  # a route to pools: the candidate's stays only if promoted
        pools = set(result["inferencePools"])
        assert ("llama3-8b-inf2-candidate" in pools) == (status["phase"] == "Promoted"), pools
        backends = result["route"]["spec"]["rules"][0]["backendRefs"]
        assert all(r.get("kind") == "InferencePool" for r in backends), backends
    assert result["pids"], "the demo reports what it started"
    for what, pid in result["pids"].items():
        assert not alive(pid), f"{what} (pid {pid}) still runs after the demo"


def assert_replicas_router_shares(result: dict[str, Any]) -> None:
    """Steps asked 25% and 50% beside two baseline pods: one candidate pod is 33%, two are 50%,
    and the bake, the baseline's pods out of the Service, 100%; the report says so."""
    status, report = result["status"], result["report"]
    assert (status["canaryWeight"], status["requestedWeight"]) == (100, 100)
    assert report["controlledTest"]["plannedWeights"] == [25, 50]
    assert report["controlledTest"]["weightsReached"] == [33, 50, 100]
    asked = {(p["weight"], p.get("requestedWeight")) for p in report["timeline"]}
    assert (33, 25) in asked, "the first step's share, with the weight it asked"
    assert status["economics"]["projectedMonthlySavings"] > 0


def check_training_result(name: str, result: dict[str, Any]) -> None:
    """A training scenario: nothing left running, a report written, and a full run's cost and
    time in the report equal a hand computation from the scenario's numbers (tokens per second
    per node, one node each, the catalog's price, the start-up the run measured) within 1%."""
    assert result["runningJobs"] == [], "a Job left running"
    status, report = result["status"], result["report"]
    assert report is not None, "no report written"
    assert report["phase"] == status["phase"]
    if status["phase"] == "Failed":
        assert status["runs"]["candidate"]["logLines"], "the failed Job's log lines"
        assert report["candidate"]["logLines"] == status["runs"]["candidate"]["logLines"]
        return
    catalog = bundled_catalog()
    scenario = yaml.safe_load((REPO / "examples" / "scenarios" / f"{name}.yaml").read_text())
    for variant, instance in (("baseline", "p4d.24xlarge"), ("candidate", "trn1.32xlarge")):
        tokens_per_second = scenario["trainers"][variant]["tokensPerSecond"]
        price = catalog.hourly_price(instance, "us-east-1").usd_per_hour
        hours = (2.0e9 / tokens_per_second + report[variant]["startupSeconds"]) / 3600
        within = hand_tolerance(status["runs"][variant])
        assert report[variant]["hoursPerRun"] == pytest.approx(hours, rel=within), variant
        assert report[variant]["costPerRun"] == pytest.approx(hours * price, rel=within), variant
        # Every training scenario's trial reads Prometheus: the exporters' utilization, and
        # the script's exported throughput where its log has none.
        trainer = scenario["trainers"][variant]
        run = status["runs"][variant]
        busy = run["prometheus"]["acceleratorUtilization"]["mean"]
        assert busy == pytest.approx(trainer.get("utilization", 0.9), abs=0.03), variant
        exported = trainer.get("logsThroughput", True) is False
        assert run["throughputSource"] == ("prometheus" if exported else "log"), variant
    saving = report["baseline"]["costPerRun"] - report["candidate"]["costPerRun"]
    assert report["payback"]["monthlySaving"] == pytest.approx(saving * 4)
    assert report["payback"]["months"] == pytest.approx(80 * 120 / (saving * 4))


def hand_tolerance(run: dict[str, Any]) -> float:
    """How near a run's cost and time must be to the hand computation: 1% when the log's
    throughput decides (every step's figure, exact); when Prometheus' rate() of the exported
    counter does, twice the half-width of the 95% interval the operator states for it (Student's
    t over its samples: four standard errors of their mean or more), and at least 1%. A fixed 5%
    failed on a busy machine (5.3% off), where the counter's increments come in larger lumps and
    the samples, and so the interval, spread accordingly; on a quiet one the interval is about
    +-0.8% and the figure within 0.3%."""
    if run.get("throughputSource") != "prometheus":
        return 0.01
    read = run["prometheus"]["tokensPerSecond"]
    half = (read["high"] - read["low"]) / 2 / read["mean"]
    assert half < 0.25, f"the exported throughput's interval is too wide to test anything: {read}"
    return max(0.01, 2 * half)


def assert_told_in_order(stdout: str) -> None:
    """The measurement that decided comes before the rollback it caused; the bar only grows."""
    lines = stdout.splitlines()
    measured = [i for i, line in enumerate(lines) if "] measurement " in line]
    bars = [lines[i].count("#") for i in measured]
    assert bars == sorted(bars), "the progress bar never goes backwards"
    rolling = next((i for i, line in enumerate(lines) if "  RollingBack: " in line), None)
    if rolling is not None:
        assert all(i < rolling for i in measured), "a measurement printed after RollingBack"


def assert_report_economics_recompute(report: dict[str, Any], status: dict[str, Any]) -> None:
    """The report's cost figures follow from the figures it says Prometheus measured (request and
    token rates, utilization, replicas) and the catalog's prices, through the cost model."""
    variants = report["variants"]
    last = report["timeline"][-1]
    catalog = bundled_catalog()

    def variant(name: str, per_pod: int, resource: str) -> VariantInput:
        figures = last[name]
        spec = catalog.spec(variants[name]["instanceType"])
        assert spec is not None
        price = catalog.hourly_price(variants[name]["instanceType"], "us-east-1").usd_per_hour
        return VariantInput(
            replicas=variants[name]["replicas"],
            price_per_instance_hour=price,
            accelerators_per_pod=per_pod,
            accelerators_per_instance=spec.per_instance(resource),
            observed=Throughput(figures["request_rate"], figures["token_rate"]),
            utilization=figures["accelerator_utilization"],
        )

    baseline = variant("baseline", 1, "nvidia.com/gpu")
    candidate = variant("candidate", 2, "aws.amazon.com/neuroncore")
    production = candidate.observed if last["weight"] == 100 else None
    recomputed = compare(baseline, candidate, EconomicsSpec(), production)
    economics = status["economics"]
    for name, cost in (("baseline", recomputed.baseline), ("candidate", recomputed.candidate)):
        assert economics[name]["projectedCostPerMillionTokens"] == pytest.approx(
            cost.projected_per_million_tokens, rel=1e-6
        )
        assert last[name]["cost_per_million_tokens"] == pytest.approx(
            cost.projected_per_million_tokens, rel=1e-6
        )
    assert economics["projectedMonthlySavings"] == pytest.approx(recomputed.monthly_savings)
    # Both savings: at today's replicas and at the projected ones, within the utilization band.
    assert economics["currentMonthlySavings"] == pytest.approx(recomputed.current_monthly_savings)
    low, high = recomputed.savings_range or (None, None)
    assert economics.get("projectedMonthlySavingsLow") == pytest.approx(low)
    assert economics.get("projectedMonthlySavingsHigh") == pytest.approx(high)


def test_without_scaling_for_production_the_same_scenario_fails_the_bake(demos: Demos) -> None:
    """scale-for-production promotes because the candidate is scaled before 100%: capped at its
    single trial replica, the candidate refuses most requests once it takes them all."""
    ran = demos["capped"].result()
    assert ran.problem is None, ran.problem


def run_capped(name: str, folder: Path, control_plane: str) -> None:
    """The scenario ``name`` with ``promotion.maxReplicas: 1``: it must roll back, saying why.
    Its assertions fail the test that waits for it."""
    source = REPO / "examples" / "scenarios" / f"{name}.yaml"
    scenario = yaml.safe_load(source.read_text())
    scenario["trial"]["file"] = str(source.parent / scenario["trial"]["file"])
    scenario["topology"] = str(source.parent / scenario["topology"])
    scenario["trial"]["patch"]["spec"]["promotion"] = {"maxReplicas": 1}
    scenario["expect"] = {"phase": "RolledBack", "servedBy": "baseline"}
    _, status = run_changed(scenario, folder / "capped.yaml", control_plane)
    assert status["promotion"]["replicas"] == 1
    assert "promotion.maxReplicas (1)" in status["promotion"]["reason"]


def test_without_a_capacity_test_the_same_candidate_fails_users_in_the_bake(demos: Demos) -> None:
    """capacity-measured ends before any user's request reaches the candidate. Without its
    capacityTest the utilization projection (35% busy at full load: about 57 requests/s a pod)
    finds it cheaper, promotes it at one replica, and once all traffic is on it that one pod
    refuses what it cannot carry: users get errors and slow answers, and the bake rolls back on
    whichever of the two a sequential test tells first (errors more often; p99 latency in one
    developer run, mt60)."""
    ran = demos["unmeasured"].result()
    assert ran.problem is None, ran.problem


def assert_both_variants_swept(result: dict[str, Any]) -> None:
    """capacity-measured's spare GPU node lets the baseline's temporary replica be swept beside
    the candidate, with requests shaped like the baseline's own; the replica is gone after."""
    swept = result["status"]["capacityTest"]
    assert swept["baselineFrom"] == "sweep", swept.get("baselineNote")
    assert swept["baseline"]["rpsPerPod"] == pytest.approx(16, rel=0.15), swept["baseline"]
    assert swept["cost"]["baselineRpsPerPod"] == swept["baseline"]["rpsPerPod"]
    # The fleet draws prompts and answers around 512 and 75 tokens (fleet.tokens), gamma-
    # distributed with a coefficient of variation of 1/2: a mean over n requests is within four
    # standard errors (2/sqrt(n) of the mean) but for one draw in about 16,000.
    shape = swept["requests"]
    assert shape["source"] == "baseline"
    counted = shape["baselineRequests"]
    assert counted >= 20, f"the shape rests on {counted} of the baseline's requests"
    within = 2 / math.sqrt(counted) + 0.01  # and the rounding to whole tokens
    assert shape["promptTokens"] == pytest.approx(512, rel=within), shape
    assert shape["generatedTokens"] == pytest.approx(75, rel=within), shape
    assert result["deployments"] == ["llama3-8b-gpu"], "the replica and the candidate are gone"


def run_unmeasured(name: str, folder: Path, control_plane: str) -> None:
    """The scenario ``name`` without ``spec.capacityTest``: its candidate must fail in the bake,
    having answered users. Its assertions fail the test that waits for it."""
    source = REPO / "examples" / "scenarios" / f"{name}.yaml"
    scenario = yaml.safe_load(source.read_text())
    scenario["trial"] = {"file": str(source.parent / scenario["trial"]["file"])}
    scenario["topology"] = str(source.parent / scenario["topology"])
    scenario["expect"] = {"phase": "RolledBack", "servedBy": "baseline"}
    done, status = run_changed(scenario, folder / "unmeasured.yaml", control_plane)
    assert status["promotion"]["replicas"] == 1, "the projection asked for one pod"
    reason = status["decision"]["reason"]
    assert "at 100%" in reason, "users were exposed"
    harmed = ("errors:", "p99-latency:", "mean-latency:")
    assert reason.startswith(harmed), f"rolled back on what users met, not on {reason!r}"
    assert "Users' requests the candidate answered: 0" not in done.stdout


def run_changed(
    scenario: dict[str, Any], path: Path, control_plane: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """Run a shipped scenario changed by a test (written to ``path``), which must end as its
    ``expect`` says; the demo's output and the trial's final status."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(scenario))
    result_file = path.parent / "result.json"
    done = run_demo(demo_command(str(path), result_file, control_plane))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    status: dict[str, Any] = json.loads(result_file.read_text())["status"]
    return done, status
