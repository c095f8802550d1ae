"""Every shipped scenario through ``acceltrial demo --scenario NAME``, as a user runs it: it must
end as its ``expect`` says, leave routing as the trial left it, and leave no process behind."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from acceltrial.api.spec import EconomicsSpec
from acceltrial.engine.economics import Throughput, VariantInput, compare
from acceltrial.providers.pricing.catalog import bundled_catalog
from tests.cli.browser import screenshot
from tests.conftest import REPO, TOOLS_BIN
from tests.demo.test_scenario_files import SHIPPED

pytestmark = pytest.mark.slow


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it has stopped running all the same.
    status = Path(f"/proc/{pid}/stat")
    return status.exists() and status.read_text().split()[2] != "Z"


@pytest.mark.parametrize("name", [p.stem for p in SHIPPED])
def test_the_scenario_ends_as_expected(name: str, tmp_path: Path) -> None:
    result_file = tmp_path / "result.json"
    env = os.environ | {"PATH": f"{TOOLS_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(
        [sys.executable, "-m", "acceltrial.cli.main", "demo", "--scenario", name,
         "--result-file", str(result_file), "--report-dir", str(tmp_path / "report")],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "matched" in done.stdout
    assert_told_in_order(done.stdout)
    result = json.loads(result_file.read_text())
    status = result["status"]
    refs = result["route"]["spec"]["rules"][0]["backendRefs"]
    if status["phase"] == "Promoted":
        assert [r["weight"] for r in refs] == [0, 100]
        assert status["economics"]["projectedMonthlySavings"] > 0
    else:
        assert refs == status["original"]["httpRoute"]["backendRefs"], "routing as found"
    if name in ("promote", "low-utilization"):
        assert_report_economics_recompute(result["report"], status)
    if shutil.which("chromium"):
        screenshot(tmp_path / "report" / "report.html", f"report-demo-{name}")
    assert result["pids"], "the demo reports what it started"
    for what, pid in result["pids"].items():
        assert not alive(pid), f"{what} (pid {pid}) still runs after the demo"


def assert_told_in_order(stdout: str) -> None:
    """The measurement that decided comes before the rollback it caused; the bar only grows."""
    lines = stdout.splitlines()
    measured = [i for i, line in enumerate(lines) if "] measurement at " in line]
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
         "--result-file", str(result_file)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    status = json.loads(result_file.read_text())["status"]
    assert status["promotion"]["replicas"] == 1
    assert "promotion.maxReplicas (1)" in status["promotion"]["reason"]
