"""The replicas router's report: every weight it prints is the share the pods really gave, with
the weight the step asked beside it where they differ (steps asked 25% and 50% beside two
baseline pods give 33% and 50%; the bake, without the baseline's pods, 100%)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from acceltrial.api.report import Report
from acceltrial.api.spec import TrialSpec
from acceltrial.api.status import CriterionResult, Decision, TrialStatus
from acceltrial.engine.candidate import TrialRef
from acceltrial.engine.report import ReportInputs, update_report
from acceltrial.engine.ticks import Measurement
from acceltrial.pages.render import html_page, markdown
from tests.cli.test_report_pages import EXAMPLE, figures

T0 = datetime(2026, 12, 6, 9, 0, tzinfo=UTC)
SPEC = TrialSpec.model_validate(
    {
        **EXAMPLE["spec"],
        "traffic": {"router": "replicas"},
        "steps": [{"weight": 25, "duration": "10m"}, {"weight": 50, "duration": "10m"}],
    }
)
# (step, share the pods gave, weight asked); step 0 is the bake.
PLAYED = [(1, 33, 25), (2, 50, 50), (0, 100, 100)]


def promoted() -> Report:
    report = None
    status = TrialStatus(phase="Progressing", started_at=T0)
    for i, (step, share, asked) in enumerate(PLAYED):
        at = T0 + timedelta(minutes=10 * i)
        result = CriterionResult(
            criterion="p99-latency", step=step, weight=share, requested_weight=asked,
            verdict="Pass", reason="ok", at=at,
        )  # fmt: skip
        observed = {"baseline": figures(12 * (100 - share) / 100, 1.3) if share < 100 else {},
                    "candidate": figures(12 * share / 100, 1.2)}  # fmt: skip
        measurement = Measurement("Pass", "every criterion passed", (result,), None, observed)
        shares = {"canary_weight": share, "requested_weight": asked}
        status = status.model_copy(update={"step": step or 2, **shares, "analysis": [result]})
        inputs = ReportInputs(SPEC, status, TrialRef("t", "ml", "uid"), at, measurement)
        report = update_report(report, inputs)
    end = T0 + timedelta(hours=1)
    decision = Decision(verdict="promote", reason="every step and the bake passed", at=end)
    status = status.model_copy(update={"phase": "Promoted", "decision": decision})
    return update_report(report, ReportInputs(SPEC, status, TrialRef("t", "ml", "uid"), end))


def test_the_timeline_shows_the_share_with_the_weight_asked_beside_it() -> None:
    text = markdown(promoted())
    rows = [line for line in text.split("## Timeline")[1].split("##")[0].splitlines()
            if line.startswith("| 09:")]  # fmt: skip
    assert [row.split("|")[3].strip() for row in rows] == ["33% (asked 25%)", "50%", "100%"]
    assert [row.split("|")[2].strip() for row in rows] == ["1", "2", "bake"]


def test_the_controlled_test_reached_the_shares_the_pods_gave() -> None:
    report = promoted()
    assert report.controlled_test.planned_weights == [25, 50]
    assert report.controlled_test.weights_reached == [33, 50, 100]


def test_the_weight_chart_draws_the_share_and_the_weight_asked() -> None:
    page = html_page(promoted())
    assert "Candidate&#x27;s share of traffic" in page or "Candidate's share of traffic" in page
    assert ">asked<" in page, "a legend names the weight asked"
    assert ">share<" in page, "and the share given"
