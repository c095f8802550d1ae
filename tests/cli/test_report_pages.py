"""The decision report as a reader sees it, in Markdown and as the HTML page opened in headless
Chromium: the sections the README promises, the window each variant's figures come from, charts
with each criterion's limit, honest economics for a trial that did not promote, and GitOps
manifests without server defaults. Screenshots go to artifacts/report-<ending>.png."""

from __future__ import annotations

import copy
import functools
import html
import re
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
from acceltrial.engine.candidate import TrialRef, derive_deployment
from acceltrial.engine.gitops import committable
from acceltrial.engine.report import ReportInputs, update_report
from acceltrial.engine.ticks import Measurement
from acceltrial.pages.render import html_page, markdown, side_by_side
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
    economics = priced(step, weight, at, cost, dearer=failing) if priced_window(weight) else None
    base_rate = 12 * (100 - weight) / 100
    observed = {"baseline": figures(base_rate, 1.3) if base_rate else {},
                "candidate": figures(12 * weight / 100, 1.2)}  # fmt: skip
    outcome = "Fail" if failing else "Pass"
    why = f"cost: {reason}" if failing else "every criterion passed"
    return Measurement(outcome, why, tuple(results), economics, observed, asked(weight))


def priced_window(weight: int) -> bool:
    """Whether a measurement at ``weight`` brings cost figures: not the aborted trial's 25% step
    (its cost inputs unmeasured), so its cost figures stay those of the 5% window."""
    return weight != 25 or not ABORTING


ABORTING: list[bool] = []


def priced(step: int, weight: int, at: datetime, cost: float, dearer: bool) -> EconomicsStatus:
    """status.economics of one window: 2 g5.xlarge against 1 inf2.8xlarge today; projected 3
    (2.07 rounded up, 2 to 3 within the band) against 1, or, for a dearer candidate, 2."""
    candidate_replicas = 2 if dearer else 1
    return EconomicsStatus(
        baseline=VariantEconomics(projected_cost_per_million_tokens=0.45, cost_per_hour=2.012,
                                  replicas=2, cost_per_replica_hour=1.006, replicas_needed=2.07,
                                  projected_replicas=3, projected_replicas_low=2,
                                  projected_replicas_high=3),
        candidate=VariantEconomics(projected_cost_per_million_tokens=cost,
                                   cost_per_hour=1.968 * candidate_replicas,
                                   replicas=candidate_replicas, cost_per_replica_hour=1.968,
                                   replicas_needed=1.4 if dearer else 0.91,
                                   projected_replicas=candidate_replicas,
                                   projected_replicas_low=candidate_replicas,
                                   projected_replicas_high=candidate_replicas),
        current_monthly_savings=(2.012 - 1.968 * candidate_replicas) * 730,
        projected_monthly_savings=(3.018 - 1.968 * candidate_replicas) * 730,
        projected_monthly_savings_low=(2.012 - 1.968 * candidate_replicas) * 730,
        projected_monthly_savings_high=(3.018 - 1.968 * candidate_replicas) * 730,
        measured_at=at, step=step, weight=weight,
    )  # fmt: skip


def asked(weight: int) -> dict[str, dict[str, str]]:
    """The queries of a measurement: the criterion and one cost input, per variant."""
    pods = {"baseline": "llama3-8b-gpu-.*", "candidate": "llama3-8b-inf2-candidate-.*"}
    return {
        "p99-latency": {v: f'histogram_quantile(0.99, x{{pod=~"{p}"}}) # at {weight}%'
                        for v, p in pods.items()},
        "economics:request_rate": {v: f'sum(rate(y{{pod=~"{p}"}}[1m]))' for v, p in pods.items()},
    }  # fmt: skip


@functools.cache
def played(ending: str) -> Report:
    """The report the operator keeps, tick by tick, for a trial that ends as ``ending``."""
    report = None
    status = TrialStatus(phase="Progressing", criteria_hash="c0ffee" * 10, started_at=T0)
    plays = {"preflight-failed": [], "aborted-early": [], "aborted": PLAYED[:3]}.get(ending, PLAYED)
    ABORTING[:] = [ending == "aborted"]
    for i, (step, weight, cost) in enumerate(plays):
        at = T0 + timedelta(minutes=10 * i)
        failing = ending == "rolled-back" and weight == 100
        measurement = measured(step, weight, 0.44 if failing else cost, at, failing)
        status = status.model_copy(update={"step": step or 3, "canary_weight": weight,
                                           "analysis": list(measurement.results),
                                           "economics": measurement.economics or status.economics,
                                           "step_started_at": at})  # fmt: skip
        replicas = {"baseline": 2, "candidate": 1}
        inputs = ReportInputs(SPEC, status, TRIAL, at, measurement, replicas=replicas)
        report = update_report(report, inputs)
    final: dict[str, tuple[Phase, str, str]] = {
        "promoted": ("Promoted", "promote", "every step and the bake passed"),
        "rolled-back": ("RolledBack", "rollback", "cost: 0.44 is 0.978x the baseline's 0.45 "
                        "(limit max 0.8) at 100%"),
        "preflight-failed": ("Failed", "none", "preflight failed: no inf2.8xlarge node"),
        "aborted": ("Aborted", "abort", "aborted by a person"),
        "aborted-early": ("Aborted", "abort", "aborted by a person"),
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


ENDINGS = ["promoted", "rolled-back", "aborted", "aborted-early", "preflight-failed"]


@pytest.fixture(scope="module", params=ENDINGS)
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


def test_a_rollback_does_not_claim_savings_and_says_more() -> None:
    text = markdown(played("rolled-back"))
    assert "saves $" not in text
    assert "pays back in" not in text
    # 2 x 1.006 - 2 x 1.968 = -1.924/h x 730 = $1,405 more a month; 3 g5: -0.918/h, $670 more.
    assert (
        "At today's replicas, 2 g5.xlarge ($2.012/h) against 2 inf2.8xlarge ($3.936/h): the "
        "candidate would have cost $1,405 more per month."
    ) in text
    assert (
        "against 2 inf2.8xlarge (1.40 rounded up): the candidate would have cost $670 to $1,405 "
        "more per month ($670 more at the measured utilization)."
    ) in text
    assert "would have cost $670 per month" not in text
    assert "Migration effort $9,600: at today's replicas, would never have paid back" in text
    assert (
        "| cost figures from | its last window with traffic, before the bake (priced in the bake"
        in text
    )
    assert "Nothing is saved: the trial rolled back (cost: 0.44" in text


def test_every_figure_carries_the_window_it_came_from(ending: str) -> None:
    report = played(ending)
    for text in (markdown(report), html_page(report)):
        rows = list(side_by_side(report))
        # The measured figures after "figures from", the cost figures after "cost figures from".
        names = [row[0] for row in rows]
        assert names[1] == "figures from"
        if report.economics is None:
            assert not [n for n in names if "cost" in n], "no cost rows without cost figures"
        else:
            assert names.index("cost figures from") < names.index("cost per hour")
            assert "Cost figures from " in text
        for query in report.queries:
            assert query.query in text or html.escape(query.query) in text
        assert "window ending" in text or not report.timeline


def test_the_workload_says_whose_traffic_and_which_window() -> None:
    assert (
        "requests in flight (the candidate alone, from the bake (100% to the candidate), window "
        "ending 09:40:00 UTC)"
    ) in markdown(played("promoted"))
    assert (
        "requests in flight (both variants together, from step 2 (25% to the candidate), window "
        "ending 09:20:00 UTC)"
    ) in markdown(played("aborted"))


def test_during_the_bake_the_baseline_is_priced_from_its_last_window_with_traffic() -> None:
    text = markdown(played("promoted"))
    assert (
        "Cost figures from the bake (100% to the candidate), window ending 09:40:00 UTC; the "
        "baseline's from its last window with traffic, before the bake."
    ) in text
    assert "At today's replicas, 2 g5.xlarge ($2.012/h) against 1 inf2.8xlarge ($1.968/h)" in text
    assert "the candidate saves $32 to $766 per month ($766 saved at the measured" in text


def test_an_abort_labels_its_cost_figures_with_the_5_percent_window() -> None:
    report = played("aborted")
    rows = {row[0]: row[1:] for row in side_by_side(report)}
    assert rows["figures from"][1].startswith("step 2 (25% to the candidate)")
    assert rows["cost figures from"][1].startswith("step 1 (5% to the candidate)")
    text = markdown(report)
    assert "Cost figures from step 1 (5% to the candidate), window ending 09:10:00 UTC." in text
    assert "would have saved $32 per month" in text
    assert "Nothing is saved: the trial was aborted (aborted by a person)." in text


@pytest.mark.parametrize("ending", ["aborted-early", "preflight-failed"])
def test_a_candidate_never_deployed_has_no_health_verdict_and_no_na_table(ending: str) -> None:
    report = played(ending)
    for text in (markdown(report), html_page(report)):
        assert not re.search(r"healthy: (yes|no)\b", text)
        assert "not judged (the candidate served no measured request)" in text
        assert "removed" not in text
        assert "what the candidate would have cost" not in text
        assert "cost per hour" not in text, "no table of n/a"
    rows = side_by_side(report)
    assert all(row[1:] != ("n/a", "n/a") for row in rows)


def test_the_queries_each_reading_used_are_named_with_their_window() -> None:
    text = markdown(played("promoted"))
    section = text.split("## Queries")[1].split("\n## ")[0]
    assert (
        "- `p99-latency`, candidate, the bake (100% to the candidate), window ending 09:40:00 "
        'UTC: ``histogram_quantile(0.99, x{pod=~"llama3-8b-inf2-candidate-.*"}) # at 100%``'
    ) in section
    assert (
        "- `p99-latency`, baseline, its last window with traffic, ending 09:40:00 UTC as the "
        "bake began"
    ) in section
    assert "`economics:request_rate`, baseline" in section


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
