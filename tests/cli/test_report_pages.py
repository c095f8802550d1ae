"""The decision report as a reader sees it, in Markdown and as the HTML page opened in headless
Chromium: the sections the README promises, the window each variant's figures come from, charts
with each criterion's limit, honest economics for a trial that did not promote, and GitOps
manifests without server defaults. Screenshots go to artifacts/report-<ending>.png."""

from __future__ import annotations

import copy
import functools
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from acceltrial.api.report import Report
from acceltrial.api.spec import TrialSpec
from acceltrial.api.status import (
    CriterionResult,
    Decision,
    EconomicsStatus,
    Phase,
    TrialStatus,
    VariantEconomics,
)
from acceltrial.cli.render import html_page, markdown
from acceltrial.engine.candidate import TrialRef, derive_deployment
from acceltrial.engine.gitops import committable
from acceltrial.engine.lifecycle import Measurement
from acceltrial.engine.report import ReportInputs, update_report
from tests.cli.browser import rendered_text, screenshot
from tests.conftest import REPO
from tests.unit.test_gitops import BASELINE, applied_and_read_back

T0 = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)
TRIAL = TrialRef("llama3-8b-inf2", "ml", "uid")
EXAMPLE = yaml.safe_load((REPO / "examples" / "llama3-8b-inf2-httproute.yaml").read_text())
SPEC = TrialSpec.model_validate(EXAMPLE["spec"])
SECTIONS = ("Workload", "Side by side", "Over time", "Timeline", "Compatibility",
            "The controlled test")  # fmt: skip
# (step, weight, candidate projected cost per 1M tokens); step 0 is the bake.
PLAYED = [(1, 5, 0.74), (1, 5, 0.70), (2, 25, 0.31), (3, 50, 0.30), (0, 100, 0.30)]


def figures(rate: float, latency: float) -> dict[str, float | None]:
    return {"request_rate": rate, "token_rate": rate * 150, "latency_mean": latency,
            "latency_p50": latency * 0.92, "latency_p99": latency * 2.2, "error_ratio": 0.001,
            "accelerator_utilization": 0.2 + rate / 20}  # fmt: skip


def measured(step: int, weight: int, cost: float, at: datetime, failing: bool) -> Measurement:
    ratio = cost / 0.45
    verdict = "Fail" if failing else "Pass"
    reason = f"{cost} is {ratio:.3f}x the baseline's 0.45 (limit max 0.8)"
    results = [CriterionResult(criterion="p99-latency", step=step, weight=weight, verdict="Pass",
                               reason="within max 1.1", at=at)]  # fmt: skip
    if weight >= 25:
        results.append(CriterionResult(criterion="cost", step=step, weight=weight,
                                       verdict=verdict, baseline=0.45, candidate=cost,
                                       ratio=ratio, reason=reason, at=at))  # fmt: skip
    economics = EconomicsStatus(
        baseline=VariantEconomics(projected_cost_per_million_tokens=0.45, cost_per_hour=2.01),
        candidate=VariantEconomics(projected_cost_per_million_tokens=cost, cost_per_hour=1.97),
        projected_monthly_savings=767 if cost < 0.45 else -40,
        payback_months=12.5 if cost < 0.45 else None,
    )
    base_rate = 12 * (100 - weight) / 100
    observed = {"baseline": figures(base_rate, 1.3) if base_rate else {},
                "candidate": figures(12 * weight / 100, 1.2)}  # fmt: skip
    outcome = "Fail" if failing else "Pass"
    why = f"cost: {reason}" if failing else "every criterion passed"
    return Measurement(outcome, why, tuple(results), economics, observed)


@functools.cache
def played(ending: str) -> Report:
    """The report the operator keeps, tick by tick, for a trial that ends as ``ending``."""
    report = None
    status = TrialStatus(phase="Progressing", criteria_hash="c0ffee" * 10, started_at=T0)
    plays = [] if ending == "preflight-failed" else PLAYED
    for i, (step, weight, cost) in enumerate(plays):
        at = T0 + timedelta(minutes=10 * i)
        failing = ending == "rolled-back" and weight == 100
        measurement = measured(step, weight, 0.44 if failing else cost, at, failing)
        status = status.model_copy(update={"step": step or 3, "canary_weight": weight,
                                           "analysis": list(measurement.results),
                                           "economics": measurement.economics})  # fmt: skip
        replicas = {"baseline": 2, "candidate": 1}
        inputs = ReportInputs(SPEC, status, TRIAL, at, measurement, replicas=replicas)
        report = update_report(report, inputs)
    final: dict[str, tuple[Phase, str, str]] = {
        "promoted": ("Promoted", "promote", "every step and the bake passed"),
        "rolled-back": ("RolledBack", "rollback", "cost: 0.44 is 0.978x the baseline's 0.45 "
                        "(limit max 0.8) at 100%"),
        "preflight-failed": ("Failed", "none", "preflight failed: no inf2.8xlarge node"),
    }  # fmt: skip
    phase, verdict, reason = final[ending]
    end = T0 + timedelta(hours=1)
    decision = Decision(verdict=verdict, reason=reason, at=end)  # type: ignore[arg-type]
    status = status.model_copy(update={"phase": phase, "decision": decision})
    gitops = None
    if ending == "promoted":
        candidate = derive_deployment(copy.deepcopy(BASELINE), None, SPEC, TRIAL)
        gitops = {"deployment": committable(applied_and_read_back(candidate))}
    return update_report(report, ReportInputs(SPEC, status, TRIAL, end, gitops=gitops))


@pytest.fixture(scope="module", params=["promoted", "rolled-back", "preflight-failed"])
def ending(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_markdown_and_html_carry_the_same_sections(ending: str) -> None:
    report = played(ending)
    text, page = markdown(report), html_page(report)
    for section in SECTIONS:
        if section != "Over time":  # the charts: HTML only; Markdown has the timeline table
            assert f"## {section}\n" in text
        assert f"<h2>{section}</h2>" in page
    assert "figures from" in text
    assert "figures from" in page
    assert "`c0ffeec0ffee`" in text, "the criteria hash, shortened"
    assert "c0ffee" * 10 not in text


def test_each_variant_says_which_window_its_figures_come_from() -> None:
    row = next(line for line in markdown(played("promoted")).splitlines()
               if line.startswith("| figures from"))  # fmt: skip
    baseline, candidate = row.split("|")[2:4]
    assert "step 3 (50% to the candidate)" in baseline, "the baseline serves nothing at 100%"
    assert "the bake (100% to the candidate)" in candidate


def test_the_timeline_lists_every_measurement() -> None:
    text = markdown(played("rolled-back"))
    rows = [line for line in text.split("## Timeline")[1].split("##")[0].splitlines()
            if line.startswith("| 09:")]  # fmt: skip
    assert [row.split("|")[3].strip() for row in rows] == ["5%", "5%", "25%", "50%", "100%"]
    assert "Fail" in rows[-1]
    assert "cost: 0.44" in rows[-1]
    assert "($0.740 / $0.450)" in rows[0], "below fromWeight: shown as not judged"


def test_a_rollback_does_not_claim_savings() -> None:
    text = markdown(played("rolled-back"))
    assert "saves $" not in text
    assert "pays back in" not in text
    assert "Had it been promoted, all traffic on the candidate would have" in text
    assert "Nothing is saved: the trial rolled back (cost: 0.44" in text


def test_a_failed_preflight_has_no_verdict_and_unknown_economics() -> None:
    text = markdown(played("preflight-failed"))
    assert "NONE (Failed): preflight failed" in text
    assert "Economics unknown" in text
    assert "does not pay back" not in text


def test_charts_draw_each_limit_and_leave_out_unjudged_points() -> None:
    page = html_page(played("rolled-back"))
    assert page.count("<svg") == 6, "the weight, then one chart per criterion"
    assert "limit: max 1.1x baseline" in page
    assert "limit: min 40.00%" in page, "an absolute limit (utilization), in the chart's unit"
    assert "limit: max 0.8x baseline" in page
    assert "2 measurement(s) below 25% not judged, not shown" in page
    assert "beyond the limit" in page, "the failing cost point is marked"


def test_gitops_manifests_are_yaml_without_server_defaults() -> None:
    text = markdown(played("promoted"))
    manifest = text.split("```yaml\n")[1].split("```")[0]
    body = yaml.safe_load(manifest)
    assert body["kind"] == "Deployment"
    defaults = ("strategy", "revisionHistoryLimit", "progressDeadlineSeconds", "dnsPolicy",
                "terminationMessagePath", "schedulerName", "status", "uid")  # fmt: skip
    for default in defaults:
        assert default not in manifest


@pytest.mark.slow
def test_the_page_renders_in_chromium_with_every_section(ending: str, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    page.write_text(html_page(played(ending)), encoding="utf-8")
    dom = rendered_text(page)
    for section in SECTIONS:
        assert f"<h2>{section}</h2>" in dom
    if ending == "promoted":
        assert "<h2>Commit these (GitOps)</h2>" in dom
    screenshot(page, f"report-{ending}")
