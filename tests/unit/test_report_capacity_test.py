"""The report's measured-capacity section: status.capacityTest carried into the report and
rendered in Markdown and HTML: the measured capacity beside the utilization projection, the
cost at those capacities, and every stair of the sweep."""

from __future__ import annotations

from datetime import UTC, datetime

from acceltrial.api.capacity_test import (
    CapacityCost,
    CapacityTestStatus,
    SweepStair,
    VariantCapacityTest,
)
from acceltrial.api.report import Report
from acceltrial.api.status import TrialStatus
from acceltrial.engine.candidate import TrialRef
from acceltrial.engine.report import ReportInputs, update_report
from acceltrial.pages.render import html_page, markdown
from tests.unit.test_lifecycle import ORIGINAL, make_spec

T0 = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)
SWEPT = CapacityTestStatus(
    verdict="Fail",
    reason="at the capacity measured before any user's request reached it (19.6 requests/s per "
    "pod within its SLO, the baseline at its production operating point): cost: 0.06 is 1.6x "
    "the baseline's 0.0376 (limit max 0.9)",
    measured_at=T0,
    candidate=VariantCapacityTest(
        rps_per_pod=19.6, tokens_per_second_per_pod=1470, concurrency=32, latency_p50=1.4,
        latency_p99=3.1, error_ratio=0.0, pods=1, stopped_because="errors",
        reason="error ratio 0.21 above 0.01 at concurrency 36", utilization=0.34,
        utilization_rps_per_pod=57.6, seconds=40,
        stairs=[
            SweepStair(concurrency=16, rps=12.9, error_ratio=0.0, latency_p99=1.9,
                       within_slo=True),
            SweepStair(concurrency=32, rps=19.6, error_ratio=0.0, latency_p99=3.1,
                       within_slo=True),
            SweepStair(concurrency=64, rps=20.1, error_ratio=0.4, latency_p99=3.3,
                       within_slo=False),
        ],
    ),
    cost=CapacityCost(
        baseline_per_million_tokens=0.0376, candidate_per_million_tokens=0.0601,
        baseline_per_thousand_requests=0.0028, candidate_per_thousand_requests=0.0045,
        baseline_rps_per_pod=15.2,
    ),
    baseline_from="production",
    baseline_note="no GPU node that serves the baseline has room for one more pod (the "
    "scheduler: 0/5 nodes are available: 2 Insufficient nvidia.com/gpu)",
)  # fmt: skip
BASELINE = VariantCapacityTest(
    rps_per_pod=15.8, concurrency=16, latency_p50=1.2, latency_p99=2.6, error_ratio=0.0, pods=1,
    stopped_because="errors", reason="error ratio 0.3 above 0.01 at concurrency 24",
    seconds=38,
    stairs=[SweepStair(concurrency=16, rps=15.8, error_ratio=0.0, latency_p99=2.6,
                       within_slo=True)],
)  # fmt: skip


def report_of(swept: CapacityTestStatus | None) -> Report:
    status = TrialStatus(phase="Failed", step=0, original=ORIGINAL, capacity_test=swept)
    return update_report(None, ReportInputs(make_spec(), status, TrialRef("t", "ml", "u"), T0))


def test_the_report_shows_measured_and_projected_capacity_side_by_side() -> None:
    report = report_of(SWEPT)
    assert report.capacity_test == SWEPT
    again = Report.model_validate_json(report.model_dump_json(by_alias=True))
    assert again.capacity_test == SWEPT, "the report's JSON keeps the sweep"
    text = markdown(report)
    section = text[text.index("## Capacity (measured before exposure)") :]
    assert "One candidate pod carries 19.6 requests/s, 1,470 generated tokens/s" in section
    assert "Projected from utilization (34% busy at that load), one pod would carry 57.6 " \
        "requests/s: 2.94x what was measured" in section  # fmt: skip
    assert "the candidate $0.0601 per 1M tokens" in section
    assert "The baseline was not load-tested: its figure is production's operating point" in section
    assert (
        "so the comparison is asymmetric (no GPU node that serves the baseline has room" in section
    )
    assert "at 15.2 requests/s per pod, its production operating point." in section
    assert "| 64 | 20.1 | 0.4 | 3.3 | no |" in section
    page = html_page(report)
    assert "<h2>Capacity (measured before exposure)</h2>" in page
    assert "<td>32</td><td>19.6</td>" in page


def test_a_trial_without_a_capacity_test_has_no_such_section() -> None:
    report = report_of(None)
    assert "Capacity (measured before exposure)" not in markdown(report)
    assert "Capacity (measured before exposure)" not in html_page(report)


def test_a_baseline_swept_alike_is_shown_beside_the_candidate_and_no_asymmetry_is_claimed() -> None:
    assert SWEPT.cost is not None
    swept = SWEPT.model_copy(update={
        "baseline": BASELINE, "baseline_from": "sweep", "baseline_note": None,
        "cost": SWEPT.cost.model_copy(update={"baseline_rps_per_pod": 15.8}),
    })  # fmt: skip
    text = markdown(report_of(swept))
    section = text[text.index("## Capacity (measured before exposure)") :]
    assert "One baseline pod (a temporary replica) carries 15.8 requests/s within the SLO, at " \
        "concurrency 16" in section  # fmt: skip
    assert "at 15.8 requests/s per pod, measured by its replica's sweep." in section
    assert "asymmetric" not in section
    assert "The baseline's stairs:" in section
    assert "| 16 | 15.8 | 0 | 2.6 | yes |" in section
    assert "<p>The baseline's stairs:</p>" in html_page(report_of(swept))
