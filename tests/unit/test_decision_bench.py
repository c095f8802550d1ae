"""Decision quality does not regress silently: a small fixed-seed run of bench/decisions.py.

The bounds are the figures recorded in docs/benchmarks.md for this subset, with a little room;
a change to the judge that serves more bad requests to a regressed candidate, or refuses more
A/A candidates, fails here. Tighten the bounds when the judge gets better.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from bench.calibrated import LADDER, calibrate
from bench.decisions import TRACES, Profile, benchmark, summary

from tests.conftest import REPO

SUBSET = tuple(
    t
    for t in TRACES
    if t.name in ("aa-2rps", "aa-20rps", "aa-200rps", "p99-2x", "mean-1.3x", "errors-2%")
)
PROFILE = Profile(aa_seeds=4, regression_seeds=2)
BOUNDS = {
    # judge: (exposure over the subset's regression traces, A/A false rollback rate)
    "acceltrial": (50.0, 0.0),
    # The shipped example's criteria (examples/llama3-8b-inf2-httproute.yaml): 43.5, 0.0.
    "acceltrial-example": (50.0, 0.0),
    "sequential": (35.0, 0.0),
}


@pytest.mark.parametrize("judge", sorted(BOUNDS))
def test_exposure_and_false_rollbacks_stay_within_recorded_bounds(judge: str) -> None:
    figures = summary(benchmark(PROFILE, (judge,), SUBSET), SUBSET)[judge]

    exposure_bound, false_rollback_bound = BOUNDS[judge]
    assert figures["exposure"] <= exposure_bound, figures
    assert figures["false_rollback_rate"] <= false_rollback_bound, figures
    assert figures["missed_regressions"] == 0, figures


def test_quick_json_names_every_judge_with_exposure_and_false_rollback_rate() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "bench.decisions", "--quick", "--json",
         "--judges", "flagger", "sequential"],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    figures = json.loads(result.stdout)
    assert set(figures) == {"flagger", "sequential"}
    for judge in figures.values():
        assert judge["exposure"] > 0
        assert 0 <= judge["false_rollback_rate"] <= 1


def test_calibration_climbs_until_the_false_rollback_target_and_stops_there() -> None:
    """bench/calibrated.py: a judge already within the target stays at its usual setting; one
    asked for fewer false rollbacks than its usual setting gives climbs to a looser rung."""
    profile = Profile(aa_seeds=2, regression_seeds=1)
    lenient = calibrate("flagger", 1.0, profile)
    assert lenient.rung == LADDER[0]
    assert len(lenient.climb) == 1
    strict = calibrate("flagger", 0.5, profile)
    assert strict.climb[0][1] > 0.5, "Flagger's usual setting refuses most A/A candidates"
    assert strict.rung is not None
    assert strict.rung != LADDER[0]
    assert strict.climb[-1] == (strict.rung, strict.figures["false_rollback_rate"])
    assert strict.figures["false_rollback_rate"] <= 0.5
