"""A training trial's report: figures from the status, the payback worked out, the checklist
answered, and the pages (Markdown, HTML with both loss curves on one chart)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from acceltrial.api.training.report import TrainingReport
from acceltrial.engine.training.report import training_report
from acceltrial.pages.training import training_html, training_markdown
from tests.unit.test_training_lifecycle import T0, log, run_through, spec


def decided() -> TrainingReport:
    trial = spec()
    done = run_through(trial, log(60, 40_000, T0 + timedelta(seconds=30)),
                       log(60, 60_000, T0 + timedelta(seconds=90), loss_end=2.02))  # fmt: skip
    return training_report("llama", "training", trial, done.status)


def test_the_report_carries_both_runs_and_the_payback() -> None:
    report = decided()
    assert report.verdict == "Recommended"
    assert report.full_run == "2e+09 tokens"
    saving = report.baseline.cost_per_run - report.candidate.cost_per_run
    assert report.payback.monthly_saving == pytest.approx(saving * 4)
    assert report.payback.months == pytest.approx(80 * 120 / (saving * 4))
    assert len(report.candidate.loss_curve) == 50
    answers = {a.question: a.answer for a in report.checklist}
    assert answers["Does the job run on Trainium?"] == "yes: 60 steps on 2 x trn1.32xlarge"
    assert answers["When does the migration pay for itself?"].startswith("after ")


def test_the_pages_show_the_figures_and_the_loss_chart() -> None:
    report = decided()
    text = training_markdown(report)
    assert "| cost per full run |" in text
    assert "**Pass** loss-parity" in text
    page = training_html(report)
    assert "<svg" in page, "both loss curves on one chart"
    assert "tokens per dollar" in page
