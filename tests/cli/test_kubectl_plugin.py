"""``kubectl acceltrial ...`` with the real kubectl v1.33 against the local control plane:
kubectl finds the ``kubectl-acceltrial`` plugin on PATH and it uses the current context, as
kubectl does. The HTML report opens in headless Chromium without errors; a screenshot of it
goes to the artifacts folder (CI keeps it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from acceltrial.api.report import REPORT_KEY, report_name
from acceltrial.api.spec import TrialSpec
from acceltrial.api.status import CriterionResult, EconomicsStatus, TrialStatus, VariantEconomics
from acceltrial.engine.candidate import TrialRef
from acceltrial.engine.report import ReportInputs, update_report
from acceltrial.engine.ticks import Measurement
from tests.cli.browser import rendered_text, screenshot
from tests.conftest import REPO, tool
from tests.integration.e2e_kit import BACKENDS, backend_of
from tests.sandbox.conftest import Api, Backend, served

TRIALS = "/apis/acceltrial.dev/v1alpha1/namespaces/ml/acceleratortrials"
T0 = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)


def figures(rate: float, latency: float) -> dict[str, float | None]:
    return {"request_rate": rate, "token_rate": rate * 150, "latency_mean": latency,
            "latency_p50": latency * 0.92, "latency_p99": latency * 2.2, "error_ratio": 0.001,
            "accelerator_utilization": 0.2 + rate / 20}  # fmt: skip


def report_body(spec: TrialSpec, status: TrialStatus) -> dict[str, Any]:
    """A report as the operator writes it, after one measurement per step."""
    report = None
    trial = TrialRef("llama3-8b-inf2", "ml", "uid")
    for i, weight in enumerate((5, 25, 50)):
        at = T0 + timedelta(minutes=10 * i)
        result = CriterionResult(criterion="p99-latency", step=i + 1, weight=weight,
                                 verdict="Pass", reason="within max 1.1", at=at)  # fmt: skip
        economics = EconomicsStatus(
            baseline=VariantEconomics(projected_cost_per_million_tokens=0.45, cost_per_hour=2.01),
            candidate=VariantEconomics(projected_cost_per_million_tokens=0.30, cost_per_hour=1.97),
            projected_monthly_savings=767,
        )
        observed = {"baseline": figures(12 * (100 - weight) / 100, 1.3),
                    "candidate": figures(12 * weight / 100, 1.2)}  # fmt: skip
        measurement = Measurement("Pass", "ok", (result,), economics, observed)  # type: ignore[arg-type]
        report = update_report(report, ReportInputs(spec, status, trial, at, measurement))
    assert report is not None
    return report.model_dump(mode="json", by_alias=True, exclude_none=True)


@pytest.fixture(scope="module", params=BACKENDS)
def cluster(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """The real control plane when it is built (always in CI), else the emulator."""
    with backend_of(request.param, nodes_per_group=1) as sandbox:
        api = Api.to(sandbox.access)
        crd = yaml.safe_load((REPO / "crds" / "acceltrial.dev_acceleratortrials.yaml").read_text())
        assert (
            api.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd).status == 201
        )
        api.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                        "metadata": {"name": "ml"}})  # fmt: skip
        served(api, crd["metadata"]["name"], TRIALS)  # the real API server serves it shortly
        trial = yaml.safe_load((REPO / "examples" / "llama3-8b-inf2-httproute.yaml").read_text())
        trial["metadata"]["namespace"] = "ml"
        assert api.post(TRIALS, trial).status == 201
        result = {"criterion": "p99-latency", "step": 3, "weight": 50, "verdict": "Pass",
                  "reason": "ok", "at": "2026-12-03T09:20:00Z"}  # fmt: skip
        status = {"phase": "Progressing", "step": 3, "canaryWeight": 50, "message": "step 3",
                  "analysis": [result], "economics": {"projectedMonthlySavings": 767}}  # fmt: skip
        path = f"{TRIALS}/llama3-8b-inf2/status"
        assert api.merge(path, {"status": status}).status == 200
        spec = TrialSpec.model_validate(trial["spec"])
        body = report_body(spec, TrialStatus.model_validate(status))
        config_map = {"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": report_name("llama3-8b-inf2"), "namespace": "ml"},
                      "data": {REPORT_KEY: json.dumps(body)}}  # fmt: skip
        assert api.post("/api/v1/namespaces/ml/configmaps", config_map).status == 201
        yield sandbox


def kubectl(cluster: Backend, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    plugin_dir = str(Path(sys.executable).parent)  # where kubectl-acceltrial is installed
    env = {
        "PATH": os.pathsep.join([plugin_dir, os.environ.get("PATH", "")]),
        "HOME": str(home),
        "KUBECONFIG": str(cluster.kubeconfig),
        "KUBECACHEDIR": str(home / "cache"),
        # The code under test, when it is not the installed one (a checkout on PYTHONPATH).
        **({"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}),
    }
    return subprocess.run([tool("kubectl"), *args], capture_output=True, text=True, env=env,
                          timeout=60, check=False)  # fmt: skip


def test_status_is_a_table_of_phase_step_weight_and_verdicts(
    cluster: Backend, tmp_path: Path
) -> None:
    done = kubectl(cluster, tmp_path, "acceltrial", "status", "-n", "ml")
    assert done.returncode == 0, done.stderr
    header, row = done.stdout.splitlines()
    assert header.split()[:5] == ["NAME", "PHASE", "STEP", "WEIGHT", "VERDICTS"]
    assert row.split()[:5] == ["llama3-8b-inf2", "Progressing", "3/3", "50%", "p99-latency=Pass"]


def test_report_as_markdown_and_json(cluster: Backend, tmp_path: Path) -> None:
    done = kubectl(cluster, tmp_path, "acceltrial", "report", "llama3-8b-inf2", "-n", "ml")
    assert done.returncode == 0, done.stderr
    assert "| latency p99 | 2.86 s | 2.64 s |" in done.stdout
    assert "the candidate saves $767 per month" in done.stdout
    as_json = kubectl(cluster, tmp_path, "acceltrial", "report", "llama3-8b-inf2", "-n", "ml",
                      "-o", "json")  # fmt: skip
    assert [p["weight"] for p in json.loads(as_json.stdout)["timeline"]] == [5, 25, 50]


def test_an_action_is_an_annotation(cluster: Backend, tmp_path: Path) -> None:
    done = kubectl(cluster, tmp_path, "acceltrial", "pause", "llama3-8b-inf2", "-n", "ml")
    assert done.returncode == 0, done.stderr
    trial = Api.to(cluster.access).get(f"{TRIALS}/llama3-8b-inf2").body
    assert trial["metadata"]["annotations"]["acceltrial.dev/action"] == "pause"


def test_a_missing_trial_or_no_cluster_is_one_clear_line(cluster: Backend, tmp_path: Path) -> None:
    missing = kubectl(cluster, tmp_path, "acceltrial", "report", "nope", "-n", "ml")
    assert missing.returncode == 1
    assert missing.stderr.strip() == "acceltrial report: AcceleratorTrial ml/nope not found"
    unreachable = tmp_path / "unreachable.kubeconfig"
    unreachable.write_text(cluster.kubeconfig.read_text().replace(str(cluster.port), "1"))
    env = {"KUBECONFIG": str(unreachable), "HOME": str(tmp_path), "PATH": os.environ["PATH"]}
    plugin = str(Path(sys.executable).parent / "kubectl-acceltrial")
    done = subprocess.run([plugin, "status"], capture_output=True, text=True, env=env,
                          timeout=60, check=False)  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.startswith("acceltrial status: cannot reach the cluster")
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_the_html_report_opens_in_headless_chromium(cluster: Backend, tmp_path: Path) -> None:
    done = kubectl(cluster, tmp_path, "acceltrial", "report", "llama3-8b-inf2", "-n", "ml",
                   "-o", "html")  # fmt: skip
    assert done.returncode == 0, done.stderr
    page = tmp_path / "report.html"
    page.write_text(done.stdout)
    assert done.stdout.count("<svg") >= 3, "the weight and the criteria's charts, inline"
    for fetching in ("<script", "<link", 'src="', 'href="http'):
        assert fetching not in done.stdout, "self-contained: nothing to load, nothing to run"
    assert "Decision report: ml/llama3-8b-inf2" in rendered_text(page)
    screenshot(page, "report-kubectl")
