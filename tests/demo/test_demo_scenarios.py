"""Every shipped scenario through ``acceltrial demo --scenario NAME``, as a user runs it: it must
end as its ``expect`` says, leave routing as the trial left it, and leave no process behind.

All of them run on a busy machine (a CPU hog on one core, see ``load.py``), and the flagship
``promote`` scenario runs ``PROMOTE_RUNS`` times (20 in CI, 3 otherwise;
``ACCELTRIAL_PROMOTE_RUNS`` overrides it): a decision that flips with the machine's load is a bug.

In CI every scenario runs once on the real control plane (``--control-plane real``; CI fails
when it is not built) and the flagship's repetitions on the emulator, which ``make demo`` uses
on a fresh machine. Elsewhere the flagship and the shadow scenarios run on the real control
plane when it is built, the others on the emulator; ``ACCELTRIAL_E2E_REAL=1`` runs them all on
the real one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from acceltrial.api.spec import EconomicsSpec
from acceltrial.engine.economics import Throughput, VariantInput, compare
from acceltrial.providers.pricing.catalog import bundled_catalog
from acceltrial.sandbox.realplane.binaries import binaries_available
from tests.cli.browser import screenshot
from tests.conftest import REPO, TOOLS_BIN
from tests.demo.load import Load, cpu_hog, one_minute_load
from tests.demo.test_scenario_files import SHIPPED
from tests.sandbox.conftest import require_real_control_plane

pytestmark = pytest.mark.slow
# CI (.ci/run sets CI=1) runs the flagship 20 times; `make test` on a laptop 3 times.
PROMOTE_RUNS = int(os.environ.get("ACCELTRIAL_PROMOTE_RUNS", "20" if os.environ.get("CI") else "3"))
SCENARIOS = [p.stem for p in SHIPPED]
ALL_ON_REAL = os.environ.get("ACCELTRIAL_E2E_REAL") == "1" or bool(os.environ.get("CI"))
ON_REAL = {"promote", "shadow-promote", "shadow-rollback"}
"""Scenarios run on the real control plane outside CI when it is built (all in CI or with
ACCELTRIAL_E2E_REAL=1)."""


@pytest.fixture(scope="module")
def control_plane() -> str:
    """real when built (always in CI, where a missing build fails); else the emulator."""
    if os.environ.get("CI") or binaries_available():
        require_real_control_plane()
        return "real"
    return "emulator"


@pytest.fixture(scope="module")
def busy_machine() -> Iterator[Load]:
    with cpu_hog() as load:
        yield load


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
    name: str,
    control_plane: str,
    tmp_path: Path,
    busy_machine: Load,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if not ALL_ON_REAL and name not in ON_REAL:
        control_plane = "emulator"
    since, started = len(busy_machine.samples), time.monotonic()
    problem = run_and_check(name, tmp_path, control_plane)
    with capsys.disabled():
        print(f"\n{name} ({control_plane} control plane, {time.monotonic() - started:.0f}s): "
              f"{problem or 'ended as expected'}; {busy_machine.summary(since)}")  # fmt: skip
    assert problem is None, problem


def test_promote_ends_promoted_every_time_on_a_busy_machine(
    tmp_path: Path, busy_machine: Load, capsys: pytest.CaptureFixture[str]
) -> None:
    problems: dict[int, str] = {}
    since = len(busy_machine.samples)
    for run in range(1, PROMOTE_RUNS + 1):
        before, started = one_minute_load(), time.monotonic()
        problem = run_and_check("promote", tmp_path / f"run-{run}", "emulator")
        with capsys.disabled():
            print(f"\npromote run {run}/{PROMOTE_RUNS}: {problem or 'Promoted'} in "
                  f"{time.monotonic() - started:.0f}s (load {before:.2f} -> "
                  f"{one_minute_load():.2f})")  # fmt: skip
        if problem is not None:
            problems[run] = problem
    promoted = PROMOTE_RUNS - len(problems)
    with capsys.disabled():
        print(
            f"\npromote: {promoted} of {PROMOTE_RUNS} runs promoted; {busy_machine.summary(since)}"
        )
    assert not problems, problems


def run_and_check(name: str, folder: Path, control_plane: str) -> str | None:
    """Run the scenario as a user does; what went wrong, or None when all is as expected."""
    folder.mkdir(parents=True, exist_ok=True)
    result_file = folder / "result.json"
    env = os.environ | {"PATH": f"{TOOLS_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(
        [sys.executable, "-m", "acceltrial.cli.main", "demo", "--scenario", name,
         "--result-file", str(result_file), "--report-dir", str(folder / "report"),
         "--control-plane", control_plane],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    if done.returncode != 0 or "matched" not in done.stdout:
        return f"exit {done.returncode}:\n{done.stdout[-4000:]}{done.stderr[-2000:]}"
    if shutil.which("chromium"):
        screenshot(folder / "report" / "report.html", f"report-demo-{name}")
    try:
        assert_told_in_order(done.stdout)
        check_result(name, json.loads(result_file.read_text()))
    except (AssertionError, KeyError, TypeError) as error:
        return f"{error!r}\n{done.stdout[-4000:]}"
    return None


def check_result(name: str, result: dict[str, Any]) -> None:
    status = result["status"]
    refs = result["route"]["spec"]["rules"][0]["backendRefs"]
    if status["phase"] == "Promoted":
        assert [r["weight"] for r in refs] == [0, 100]
        assert status["economics"]["projectedMonthlySavings"] > 0
    elif "original" not in status:  # stopped in preflight: nothing recorded, nothing changed
        assert status["decision"]["verdict"] == "none"
        assert not any(r["name"].endswith("-candidate") for r in refs), "the route as found"
    else:
        assert refs == status["original"]["httpRoute"]["backendRefs"], "routing as found"
    if name in ("promote", "low-utilization"):
        assert_report_economics_recompute(result["report"], status)
    assert result["pids"], "the demo reports what it started"
    for what, pid in result["pids"].items():
        assert not alive(pid), f"{what} (pid {pid}) still runs after the demo"


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


def test_without_scaling_for_production_the_same_scenario_fails_the_bake(tmp_path: Path) -> None:
    """scale-for-production promotes because the candidate is scaled before 100%: capped at its
    single trial replica, the candidate refuses most requests once it takes them all."""
    source = REPO / "examples" / "scenarios" / "scale-for-production.yaml"
    scenario = yaml.safe_load(source.read_text())
    scenario["trial"]["file"] = str(source.parent / scenario["trial"]["file"])
    scenario["topology"] = str(source.parent / scenario["topology"])
    scenario["trial"]["patch"]["spec"]["promotion"] = {"maxReplicas": 1}
    scenario["expect"] = {"phase": "RolledBack", "servedBy": "baseline"}
    capped = tmp_path / "capped.yaml"
    capped.write_text(yaml.safe_dump(scenario))
    result_file = tmp_path / "result.json"
    env = os.environ | {"PATH": f"{TOOLS_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(
        [sys.executable, "-m", "acceltrial.cli.main", "demo", "--scenario", str(capped),
         "--result-file", str(result_file), "--control-plane", "emulator"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    status = json.loads(result_file.read_text())["status"]
    assert status["promotion"]["replicas"] == 1
    assert "promotion.maxReplicas (1)" in status["promotion"]["reason"]
