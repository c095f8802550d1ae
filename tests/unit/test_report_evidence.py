"""The report's evidence section: per criterion and step the requests judged, and how sure each
figure is, in the report's JSON, Markdown and HTML."""

from __future__ import annotations

from datetime import UTC, datetime

from acceltrial.api.report import Report
from acceltrial.api.spec import TrialSpec
from acceltrial.api.status import CriterionEvidence, TrialStatus
from acceltrial.engine.candidate import TrialRef
from acceltrial.engine.report import ReportInputs, update_report
from acceltrial.pages.render import html_page, markdown
from tests.unit.test_lifecycle import ORIGINAL, make_spec

T0 = datetime(2026, 12, 6, 9, 0, tzinfo=UTC)
TRIAL = TrialRef("llama3", "ml", "uid-1")


def spec_with_p99() -> TrialSpec:
    return make_spec(
        analysis={
            "criteria": [
                {"name": "errors", "metric": "error_ratio", "absolute": {"max": 0.01}},
                {"name": "p99", "metric": "latency_p99", "relative": {"max": 1.2}},
                {"name": "rate", "metric": "request_rate", "relative": {"min": 0.9}},
            ]
        }
    )


def evidence(
    criterion: str, step: int, weight: int, served: float, **more: float
) -> CriterionEvidence:
    return CriterionEvidence(
        criterion=criterion, step=step, weight=weight, windows=2, thin_windows=1,
        candidate_requests=served, baseline_requests=served * 3, **more,
    )  # fmt: skip


def report_of(rows: list[CriterionEvidence]) -> Report:
    status = TrialStatus(phase="Progressing", step=2, canary_weight=25, criteria_hash="abc",
                         original=ORIGINAL, evidence=rows)  # fmt: skip
    spec = spec_with_p99()
    return update_report(None, ReportInputs(spec, status, TRIAL, T0))


def test_each_step_says_how_many_requests_were_judged_and_how_sure_the_figure_is() -> None:
    report = report_of(
        [
            evidence("errors", 1, 5, 25, candidate_errors=0),
            evidence("errors", 2, 25, 150, candidate_errors=0),
            evidence("p99", 1, 5, 25),
            evidence("rate", 2, 25, 150),
            evidence("errors", 0, 100, 600, candidate_errors=3),
        ]
    )
    rows = {(r.criterion, r.step): r for r in report.evidence}
    assert [(r.criterion, r.step) for r in report.evidence][-1] == ("errors", 0), "bake last"
    # 0 of 150: 1 - 0.05 ** (1/150) = 1.98%.
    assert rows[("errors", 2)].how_sure == "0 of 150 failed; 95% upper bound 1.98%"
    assert rows[("errors", 0)].how_sure.startswith("3 of 600 failed; 95% interval 0.10% to ")
    assert rows[("p99", 1)].how_sure == "a p99 of 25 requests (a p99 needs 100 requests: thin)"
    # 150 requests in 2 windows of 1m: Garwood chi2(0.025, 300) / 2 = 126.96 to chi2(0.975, 302) / 2
    # = 176.02 requests, over 120 s.
    assert rows[("rate", 2)].how_sure == "150 requests; 95% interval 1.06 to 1.47 requests/s"
    summary = {c.name: c for c in report.controlled_test.criteria}
    assert (summary["errors"].requests_judged, summary["errors"].requests_needed) == (775, 100)
    assert (summary["p99"].requests_judged, summary["p99"].requests_needed) == (25, 100)

    text = markdown(report)
    assert "## Evidence" in text
    assert "- errors: judged on 775 of the candidate's requests; needs 100 (enough)" in text
    assert (
        "- p99: judged on 25 of the candidate's requests; needs 100 (not enough to promote)" in text
    )
    assert (
        "| errors | step 2 (25%) | 2 (1) | 150 | 450 | 0 of 150 failed; 95% upper bound 1.98% |"
        in text
    )
    assert "| errors | bake (100%) |" in text
    page = html_page(report)
    assert "<h2>Evidence</h2>" in page
    assert "<td>0 of 150 failed; 95% upper bound 1.98%</td>" in page


def test_a_report_before_any_count_says_so() -> None:
    report = report_of([])
    assert report.evidence == []
    assert "No request was counted for any criterion yet." in markdown(report)


def test_a_costs_step_says_its_ratio_with_the_interval_its_requests_give() -> None:
    """A unit cost is a price times utilization over a rate, and a rate of n requests varies by
    1/sqrt(n): the ratio's logarithm by sqrt(1/n_candidate + 1/n_baseline). By hand: 0.19/0.32 =
    0.59375, sqrt(1/125 + 1/130) = 0.125269, times 1.959964 = 0.245523, e^0.245523 = 1.27829:
    0.46449 to 0.75898. The bake, the baseline serving nothing: 0.19 on 120 requests,
    e^(1.959964 / sqrt(120)) = 1.195923: 0.15887 to 0.22723."""
    spec = make_spec(
        analysis={
            "criteria": [
                {"name": "cost", "metric": "cost_per_million_tokens", "relative": {"max": 0.9}}
            ]
        }
    )
    rows = [
        CriterionEvidence(
            criterion="cost", step=2, weight=25, windows=2, candidate_requests=125,
            baseline_requests=130, candidate_value_sum=0.19 * 125, baseline_value_sum=0.32 * 130,
        ),
        CriterionEvidence(
            criterion="cost", step=0, weight=100, windows=2, candidate_requests=120,
            baseline_requests=0, candidate_value_sum=0.19 * 120,
        ),
    ]  # fmt: skip
    status = TrialStatus(phase="BakingIn", step=3, canary_weight=100, criteria_hash="abc",
                         original=ORIGINAL, evidence=rows)  # fmt: skip

    report = update_report(None, ReportInputs(spec, status, TRIAL, T0))

    said = {r.step: r.how_sure for r in report.evidence}
    assert said[2] == (
        "0.59x the baseline's on 125 and 130 requests; 95% interval 0.46x to 0.76x from the counts"
    )
    assert said[0] == "0.19 on 120 requests; 95% interval 0.1589 to 0.2272 from the count"
