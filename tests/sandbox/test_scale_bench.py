"""The scale benchmark counts what one measurement costs (issue 19): the operator's API requests
(on the real API server from its audit log, which records the operator's ServiceAccount alone)
and its Prometheus queries, at most criteria x 2. The suite runs it on the real control plane,
where the operator's tests run; `python -m bench.scale --control-plane emulator` still runs it
on the emulator by hand (it cost the suite a minute of a worker and tested no operator code the
real plane's run does not)."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench.scale import _settled, run

from tests.sandbox.conftest import require_real_control_plane

CRITERIA = 3  # bench.scale's trial


@pytest.mark.slow
def test_a_measurement_costs_a_few_requests_and_two_queries(tmp_path: Path) -> None:
    require_real_control_plane()
    figures = run(3, 25.0, tmp_path, "real")
    assert figures.measuring == 3, "every trial measured twice in the window"
    assert figures.queries_per_measurement == pytest.approx(2.0, abs=0.2)
    assert figures.queries_per_measurement <= 2 * CRITERIA
    # Status patch, report, both variants' pods, the two Deployments, the route: counted, not
    # the benchmark's own polling (which lists every trial each second).
    assert 3 <= figures.api_per_measurement <= 10
    assert figures.operator_cores < 1
    assert figures.cluster_cores, "what the cluster's processes used is reported"


def test_the_wait_for_measurements_counts_trials_that_ended_without_one() -> None:
    """A trial a busy cluster fails in preflight never measures: the benchmark stops waiting for
    it instead of waiting out its timeout."""
    trials = [
        {"status": {"lastMeasurementAt": "2026-12-05T10:00:00+00:00", "phase": "Progressing"}},
        {"status": {"phase": "Failed"}},
        {"status": {"phase": "Preflight"}},
        {},
    ]
    assert _settled(trials) == 2
