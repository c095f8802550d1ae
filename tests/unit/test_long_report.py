"""A long trial's report stays bounded and still tells the whole trial: past TIMELINE_LIMIT the
older points are thinned (the first and the newest kept as measured), the ConfigMap's
report.json never passes the API server's 1 MiB for a ConfigMap, and what the report says of the
whole trial (measurements taken, weights reached, the highest error ratio) is carried from report
to report rather than counted from the points left."""

from __future__ import annotations

from datetime import timedelta

from acceltrial.api.report import TIMELINE_LIMIT, Report
from acceltrial.api.status import TrialStatus
from acceltrial.engine.report import RECENT_POINTS, ReportInputs, thinned, update_report
from acceltrial.providers.reports.configmap import REPORT_MAX_BYTES, fitted
from tests.unit.test_lifecycle import ORIGINAL
from tests.unit.test_report import T0, TRIAL, measurement, spec


def run(measurements: int, weight_at: dict[int, int], error_at: dict[int, float]) -> Report:
    """A trial measured ``measurements`` times, at 5% unless ``weight_at`` says otherwise."""
    report = None
    for index in range(measurements):
        weight = weight_at.get(index, 5)
        status = TrialStatus(phase="Progressing", step=1, canary_weight=weight,
                             criteria_hash="abc", original=ORIGINAL)  # fmt: skip
        taken = measurement(weight, 10.0, 2.0)
        if index in error_at:
            assert taken.observed is not None
            taken.observed["candidate"]["error_ratio"] = error_at[index]
        when = T0 + timedelta(seconds=10 * index)
        report = update_report(report, ReportInputs(spec(), status, TRIAL, when, taken))
    assert report is not None
    return report


def test_a_long_trials_timeline_is_thinned_and_spans_the_whole_trial() -> None:
    report = run(2000, weight_at={3: 1}, error_at={4: 0.3})
    points = report.timeline
    assert len(points) <= TIMELINE_LIMIT
    assert points[0].at == T0, "the first measurement stays"
    newest = [p.at for p in points[-RECENT_POINTS:]]
    assert newest == [T0 + timedelta(seconds=10 * i) for i in range(2000 - RECENT_POINTS, 2000)]
    assert report.controlled_test.measurements == 2000, "counted, not the points left"
    assert report.controlled_test.weights_reached == [1, 5], "an early weight is remembered"
    assert report.compatibility.highest_error_ratio == 0.3
    assert "highest candidate error ratio measured: 30.00%" in report.compatibility.notes


def test_thinning_keeps_every_point_up_to_the_limit() -> None:
    report = run(40, weight_at={}, error_at={})
    assert thinned(report.timeline, 40) == report.timeline
    assert len(thinned(report.timeline, 39)) <= 39


def test_a_report_too_large_for_a_config_map_is_written_with_fewer_points() -> None:
    report = run(TIMELINE_LIMIT, weight_at={}, error_at={})
    more = {f"custom_{i}": 0.123456789012345 for i in range(12)}
    report = report.model_copy(update={"timeline": [  # a dozen more figures, a long reason
        p.model_copy(update={"reason": "x" * 1024, "candidate": p.candidate | more})
        for p in report.timeline
    ]})  # fmt: skip
    assert len(fitted(report, 10**9)[1]) > 1024 * 1024, "too large for a ConfigMap as it is"
    fit, text = fitted(report, REPORT_MAX_BYTES)
    assert len(text.encode()) <= REPORT_MAX_BYTES < 1024 * 1024
    assert 100 < len(fit.timeline) < TIMELINE_LIMIT
    assert fit.timeline[0].at == T0
    assert fit.timeline[-1] == report.timeline[-1]
    small = run(10, weight_at={}, error_at={})
    assert fitted(small, REPORT_MAX_BYTES)[0] == small, "a report that fits is unchanged"
