"""The report's quality section (output parity): status.quality carried into the report with
the limits of spec.quality, and rendered in Markdown and HTML: the verdict, how the answers were
scored, each criterion's figure, interval and limit, and the worst prompts side by side with
their first difference marked; text from the model servers escaped."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from acceltrial.api.quality import QualityCriterionResult, QualityExample, QualityStatus
from acceltrial.api.report import CriterionLimit, Report
from acceltrial.api.status import TrialStatus
from acceltrial.engine.candidate import TrialRef
from acceltrial.engine.report import ReportInputs, update_report
from acceltrial.pages.render import html_page, markdown
from tests.unit.test_lifecycle import ORIGINAL, make_spec

T0 = datetime(2026, 12, 6, 9, 0, tzinfo=UTC)
TRIAL = TrialRef("llama3", "ml", "uid-1")
QUALITY = {
    "prompts": {"configMapRef": {"name": "prompts", "key": "set.jsonl"}},
    "criteria": [
        {"name": "agreement", "metric": "token_agreement", "absolute": {"min": 0.98}},
        {"name": "tasks", "metric": "expected_match", "relative": {"min": 0.95}},
    ],
}
WORST = QualityExample(
    prompt="The capital of France is",
    baseline=" Paris. It is known for the Eiffel Tower.",
    candidate=" Paris, which is known for the Louvre.",
    agreement=0.4375,
    diverges_at=6,
)


def checked(**changes: object) -> QualityStatus:
    """A failed check before step 1: agreement below its limit, tasks unmeasured."""
    status = QualityStatus(
        verdict="Fail", step=0, checked_at=T0, prompts=120, unanswered=2, scoring="reprompting",
        reason="quality agreement: token_agreement 0.9612 (95% interval 0.9433 to 0.9741 over "
        "118 prompts): beyond min 0.98",
        criteria=[
            QualityCriterionResult(
                name="agreement", metric="token_agreement", verdict="Fail", value=0.9612,
                low=0.9433, high=0.9741, confidence=0.95, reason="beyond min 0.98",
            ),
            QualityCriterionResult(
                name="tasks", metric="expected_match", verdict="Inconclusive",
                reason="no prompt with expected was answered by both variants",
            ),
        ],
        examples=[WORST],
    )  # fmt: skip
    return status.model_copy(update=changes)


def report_of(quality: QualityStatus | None, with_spec: bool = True) -> Report:
    spec = make_spec(quality=QUALITY) if with_spec else make_spec()
    status = TrialStatus(phase="Failed", step=0, original=ORIGINAL, quality=quality)
    return update_report(None, ReportInputs(spec, status, TRIAL, T0))


def section(text: str, start: str, end: str) -> str:
    return text[text.index(start) : text.index(end, text.index(start))]


def test_the_report_carries_status_quality_with_the_limits_of_spec_quality() -> None:
    report = report_of(checked())

    assert report.quality == checked()
    limits = {q.name: q.limit for q in report.quality_limits}
    assert limits == {
        "agreement": CriterionLimit(kind="absolute", min=0.98),
        "tasks": CriterionLimit(kind="relative", min=0.95),
    }
    again = Report.model_validate_json(report.model_dump_json(by_alias=True))
    assert again.quality == report.quality, "the report's JSON keeps the check"


def test_the_markdown_gives_the_verdict_figures_interval_limit_and_the_worst_prompt() -> None:
    text = section(markdown(report_of(checked())), "## Quality", "## The controlled test")

    assert "FAIL (before any user request reached the candidate, checked 09:00:00 UTC)" in text
    assert "120 prompts asked of both variants, 2 unanswered" in text
    assert "by re-prompting at each divergence" in text
    rows = [line for line in text.splitlines() if line.startswith("| agreement")]
    assert rows == [
        "| agreement | token_agreement | 0.9612 | 0.9433 to 0.9741 (95%) | min 0.98 | Fail |"
    ]
    assert (
        "| tasks | expected_match | n/a: no prompt with expected was answered by both variants "
        "| n/a | candidate / baseline min 0.95 | Inconclusive |"
    ) in text
    assert '1. prompt ` "The capital of France is" `' in text
    assert "agreed at 43.8% of the answer's positions; the answers part at character 6" in text
    assert '- baseline:  ` " Paris. It is known for the Eiffel Tower." `' in text
    assert '- candidate: ` " Paris, which is known for the Louvre." `' in text
    assert (
        '- from there: baseline ` ". It is known for the Eiffel Tower." `, candidate '
        '` ", which is known for the Louvre." `'
    ) in text


def test_the_html_marks_both_answers_from_their_first_difference() -> None:
    page = html_page(report_of(checked()))
    text = section(page, "<h2>Quality (output parity)</h2>", "<h2>Queries</h2>")

    assert "by re-prompting at each divergence" in text
    assert "<td>0.9612</td><td>0.9433 to 0.9741 (95%)</td><td>min 0.98</td><td>Fail</td>" in text
    assert " Paris<mark>, which is known for the Louvre.</mark>" in text
    assert " Paris<mark>. It is known for the Eiffel Tower.</mark>" in text
    assert page.index("<h2>Compatibility</h2>") < page.index("<h2>Quality")


def test_prompt_log_probabilities_are_named_as_the_way_of_scoring() -> None:
    report = report_of(checked(scoring="promptLogprobs"))

    assert "teacher-forced by prompt log-probabilities" in markdown(report)
    assert "teacher-forced by prompt log-probabilities" in html_page(report)


def test_text_from_the_model_servers_is_escaped() -> None:
    hostile = QualityExample(
        prompt="<img src=x onerror=alert(1)>",
        baseline="ok </td><script>alert('b')</script>",
        candidate="ok <script>alert('c')</script> | `tick` ``",
        agreement=0.1,
        diverges_at=3,
    )
    report = report_of(checked(examples=[hostile]))
    page = html_page(report)

    assert "<script>" not in page
    assert "<img" not in page
    assert "ok <mark>&lt;script&gt;alert(&#x27;c&#x27;)&lt;/script&gt; | `tick` ``</mark>" in page
    assert "ok <mark>&lt;/td&gt;&lt;script&gt;" in page
    # In Markdown every text stays inside a code span, fenced longer than its backticks.
    lines = section(markdown(report), "## Quality", "## The controlled test").splitlines()
    candidate = next(line for line in lines if "- candidate:" in line)
    assert candidate.endswith("``` \"ok <script>alert('c')</script> | `tick` ``\" ```")
    assert not any(re.search(r"<script>", line) and "`" not in line for line in lines)


def test_long_answers_are_cut_where_they_part_in_the_markdown() -> None:
    long = QualityExample(
        prompt="p", baseline="x" + "b" * 100, candidate="x" + "c" * 100, agreement=0.0,
        diverges_at=1,
    )  # fmt: skip
    text = markdown(report_of(checked(examples=[long])))

    assert f'from there: baseline ` "{"b" * 40}..." `, candidate ` "{"c" * 40}..." `' in text


def test_a_divergence_past_the_kept_text_or_agreeing_answers_mark_nothing() -> None:
    kept = QualityExample(prompt="p", baseline="same", candidate="same", agreement=1.0)
    beyond = QualityExample(
        prompt="q", baseline="a" * 10, candidate="a" * 10, agreement=0.9, diverges_at=40
    )
    page = html_page(report_of(checked(examples=[kept, beyond])))

    assert "<mark>" not in page
    assert "from there" not in markdown(report_of(checked(examples=[kept, beyond])))


def test_a_trial_asking_quality_says_it_was_not_checked_yet_and_one_without_has_no_section() -> (
    None
):
    waiting = report_of(None)
    assert "The candidate has not answered the prompt set yet." in markdown(waiting)
    assert "<h2>Quality (output parity)</h2><p>The candidate" in html_page(waiting)

    without = report_of(None, with_spec=False)
    assert without.quality_limits == []
    assert "Quality" not in markdown(without)
    assert "Quality (output parity)" not in html_page(without)


def test_a_check_that_could_not_run_gives_its_reason_and_no_table() -> None:
    failed = checked(
        prompts=0, unanswered=0, scoring=None, criteria=[], examples=[],
        reason="the quality check cannot run: ConfigMap ml/prompts not found",
    )  # fmt: skip
    text = section(markdown(report_of(failed)), "## Quality", "## The controlled test")

    assert "the quality check cannot run: ConfigMap ml/prompts not found" in text
    assert "0 prompts asked of both variants, 0 unanswered; no answer was scored." in text
    assert "| criterion |" not in text
