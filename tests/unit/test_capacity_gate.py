"""The capacity gate, tick by tick through the state machine: the candidate's pods are swept
once it is Available (and has passed quality), before any traffic moves; a candidate that
breaks its SLO alone ends the trial Failed with the route never changed; a sweep that cannot
measure pauses for a person (or fails, as onInconclusive says)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from acceltrial.api.reasons import CRITERION_FAILED, INCONCLUSIVE
from acceltrial.api.spec import EconomicsSpec
from acceltrial.api.status import TrialStatus
from acceltrial.api.validation import validate_trial
from acceltrial.engine.capacity_sweep import Stair, SweepOutcome
from acceltrial.engine.economics import Throughput, VariantInput, compare
from acceltrial.engine.measurement import measured_capacity
from acceltrial.engine.quality.check import QualityCheck
from acceltrial.engine.ticks import RemoveCandidate, RestoreRouting
from tests.unit.test_lifecycle import Driver, condition, make_spec
from tests.unit.test_quality_gate import QUALITY, Checks, scores

CAPACITY_TEST = {
    "slo": {"latencyP99": "2s", "errorRatio": 0.01},
    "requests": {"promptTokens": 256, "generatedTokens": 128},
}


def spec(**changes: Any) -> Any:
    return make_spec(capacityTest={**CAPACITY_TEST, **changes})


def stair(concurrency: int, rps: float, p99: float = 1.0, failed: int = 0) -> Stair:
    return Stair(concurrency, seconds=10, succeeded=round(rps * 10), failed=failed,
                 generated_tokens=rps * 10 * 128, latency_p50=p99 / 2, latency_p99=p99)  # fmt: skip


MEASURED = SweepOutcome(
    stairs=(stair(1, 2), stair(2, 4), stair(4, 7.5), stair(8, 7.8, p99=2.4), stair(6, 7.6)),
    stopped_because="slo",
    why="latency p99 2.4 s above 2 s at concurrency 8",
    pods=2,
    seconds=50,
)


class Sweeps:
    """Plays the background sweep: None while it runs, then each outcome in turn."""

    def __init__(self, *outcomes: SweepOutcome, running: int = 1) -> None:
        self.outcomes = list(outcomes)
        self.running = running
        self.asked_at: list[tuple[str | None, int | None]] = []

    def __call__(self, status: TrialStatus) -> SweepOutcome | None:
        self.asked_at.append((status.phase, status.step))
        if self.running:
            self.running -= 1
            return None
        self.running = 1
        return self.outcomes.pop(0) if len(self.outcomes) > 1 else self.outcomes[0]


def test_the_candidate_is_swept_before_step_1_and_its_capacity_recorded() -> None:
    sweeps = Sweeps(MEASURED)
    driver = Driver(spec(), sweep=sweeps)
    driver.candidate_available = False
    driver.run_until("Progressing")
    driver.tick()
    assert sweeps.asked_at == [], "never swept before the candidate is Available"
    driver.candidate_available = True
    driver.tick()
    assert driver.status.step == 0
    assert "measuring how much one candidate pod carries" in (driver.status.message or "")
    driver.tick()
    measured = driver.status.capacity_test
    assert measured is not None
    assert measured.verdict == "Pass"
    assert measured.candidate is not None
    assert measured.candidate.rps_per_pod == pytest.approx(3.8)  # 7.6 requests/s over 2 pods
    assert measured.candidate.concurrency == 6
    assert measured.candidate.stopped_because == "slo"
    assert [s.within_slo for s in measured.candidate.stairs] == [True, True, True, False, True]
    assert driver.status.step == 1
    assert driver.weights() == [5]
    assert "CapacityMeasured" in [e.reason for e in driver.history[-1].events]
    driver.run_until("Promoted")
    assert len(sweeps.asked_at) == 2, "swept once"


def test_quality_comes_first_and_the_sweep_waits_for_its_pass() -> None:
    sweeps = Sweeps(MEASURED, running=0)
    checks = Checks(QualityCheck(scores(64)))
    driver = Driver(make_spec(quality=QUALITY, capacityTest=CAPACITY_TEST), check=checks,
                    sweep=sweeps)  # fmt: skip
    driver.run_until("Progressing")
    driver.tick()
    assert checks.asked_at == [("Progressing", 0)]
    assert sweeps.asked_at == []
    driver.tick()
    assert sweeps.asked_at == [("Progressing", 0)]
    assert driver.status.step == 1


def test_a_candidate_that_breaks_its_slo_alone_ends_failed_before_any_traffic_moves() -> None:
    broken = SweepOutcome((stair(1, 0.5, p99=3.1),), "slo", "latency p99 3.1 s above 2 s at "
                          "concurrency 1")  # fmt: skip
    driver = Driver(spec(), sweep=Sweeps(broken, running=0))
    driver.run_until("Failed")
    decision = driver.status.decision
    assert decision is not None
    assert decision.reason_code == CRITERION_FAILED
    assert decision.reason == (
        "the candidate breaks its capacityTest SLO at the lowest concurrency: latency p99 3.1 s "
        "above 2 s at concurrency 1"
    )
    assert driver.weights() == [], "the route was never changed"
    assert RemoveCandidate() in driver.actions()
    assert RestoreRouting() not in driver.actions()
    assert driver.status.capacity_test is not None
    assert driver.status.capacity_test.verdict == "Fail"


def test_a_sweep_that_cannot_measure_pauses_and_resume_sweeps_again() -> None:
    unreachable = SweepOutcome(problem="/v1/completions: cannot reach http://c:8000: refused")
    sweeps = Sweeps(unreachable, MEASURED, running=0)
    driver = Driver(spec(), sweep=sweeps)
    driver.run_until("Paused")
    assert driver.status.pause_reason == "CapacityInconclusive"
    assert condition(driver.status, "Stalled") == ("True", "CapacityInconclusive")
    assert "cannot reach http://c:8000" in (driver.status.message or "")
    driver.tick(action="resume")
    assert driver.status.capacity_test is None
    driver.tick()
    assert driver.status.capacity_test is None, "swept again in the background"
    driver.tick()
    assert driver.status.capacity_test is not None
    assert driver.status.capacity_test.verdict == "Pass"
    assert driver.weights() == [5]


def test_with_on_inconclusive_rollback_a_sweep_that_cannot_measure_fails_the_trial() -> None:
    unreachable = SweepOutcome(problem="Service llama3-gpu not found")
    rolling = make_spec(capacityTest=CAPACITY_TEST, analysis={"onInconclusive": "rollback"})
    driver = Driver(rolling, sweep=Sweeps(unreachable, running=0))
    driver.run_until("Failed")
    assert driver.status.decision is not None
    assert driver.status.decision.reason_code == INCONCLUSIVE
    assert driver.weights() == []


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"traffic": {"router": "replicas"}},
         "spec.capacityTest: capacityTest needs traffic.router gatewayapi"),
        ({"capacityTest": {**CAPACITY_TEST, "slo": {}}},
         "spec.capacityTest.slo: give at least one of latencyP99"),
        ({"capacityTest": {**CAPACITY_TEST, "stairDuration": "1s"}},
         "spec.capacityTest.stairDuration: stairDuration must be at least 2s"),
    ],
)  # fmt: skip
def test_a_capacity_test_that_cannot_work_is_refused_naming_the_field(
    change: dict[str, Any], said: str
) -> None:
    spec = make_spec(capacityTest=CAPACITY_TEST).model_dump(
        by_alias=True, exclude_none=True, mode="json"
    )
    manifest = {
        "apiVersion": "acceltrial.dev/v1alpha1", "kind": "AcceleratorTrial",
        "metadata": {"name": "t", "namespace": "n"}, "spec": {**spec, **change},
    }  # fmt: skip
    problems = [str(p) for p in validate_trial(manifest)]
    assert any(p.startswith(said) for p in problems), problems


def test_a_candidate_dearer_at_its_measured_capacity_ends_failed_before_any_traffic_moves() -> None:
    """Its utilization would project 10 requests/s per pod; the sweep measured 3. At 3 the
    candidate's cost per 1k requests is beyond the criterion's limit, whatever its fromWeight:
    no user's request needs to reach it to know."""
    baseline = VariantInput(replicas=4, price_per_instance_hour=1.006, accelerators_per_pod=1,
                            accelerators_per_instance=1, observed=Throughput(20, 4000),
                            utilization=0.5)  # fmt: skip
    candidate = VariantInput(replicas=1, price_per_instance_hour=1.968, accelerators_per_pod=2,
                             accelerators_per_instance=2, observed=Throughput(None, None),
                             utilization=None, measured_capacity=Throughput(3, 600))  # fmt: skip
    economics = EconomicsSpec(target_utilization=0.7)
    dearer = replace(MEASURED, cost=compare(baseline, candidate, economics, baseline.observed))
    cost = {"name": "cost", "metric": "cost_per_thousand_requests", "relative": {"max": 0.9},
            "fromWeight": 50}  # fmt: skip
    criteria = [{"name": "errors", "metric": "error_ratio", "absolute": {"max": 0.01}}, cost]
    driver = Driver(make_spec(capacityTest=CAPACITY_TEST, analysis={"criteria": criteria}),
                    sweep=Sweeps(dearer, running=0))  # fmt: skip
    driver.run_until("Failed")
    decision = driver.status.decision
    assert decision is not None
    assert decision.reason_code == CRITERION_FAILED
    assert decision.reason.startswith(
        "at the capacity measured before any user's request reached it (3.8 requests/s per pod "
        "within its SLO, the baseline at its production operating point): cost: "
    )
    assert "(limit max 0.9)" in decision.reason
    assert driver.weights() == []
    # At $0.25 an hour the candidate's 9.5 pods cost 0.83x the baseline's 2.9: it goes on.
    cheaper = replace(candidate, price_per_instance_hour=0.25)
    fine = replace(MEASURED, cost=compare(baseline, cheaper, economics, baseline.observed))
    driver = Driver(make_spec(capacityTest=CAPACITY_TEST, analysis={"criteria": criteria}),
                    sweep=Sweeps(fine, running=0))  # fmt: skip
    driver.run_until("Progressing")
    driver.tick()
    assert driver.status.step == 1
    assert driver.weights() == [5]


def test_a_cost_that_cannot_be_read_before_exposure_is_left_to_the_steps_and_said() -> None:
    cost = {"name": "cost", "metric": "cost_per_thousand_requests", "relative": {"max": 0.9}}
    driver = Driver(make_spec(capacityTest=CAPACITY_TEST, analysis={"criteria": [cost]}),
                    sweep=Sweeps(MEASURED, running=0))  # fmt: skip
    driver.run_until("Progressing")
    driver.tick()
    assert driver.status.step == 1
    swept = driver.status.capacity_test
    assert swept is not None
    assert swept.reason.endswith(
        "; cost not judged before exposure: cost: the baseline's figures could not be read"
    )


BASELINE_SWEPT = SweepOutcome(
    stairs=(stair(1, 2), stair(2, 3.9), stair(4, 5.5, p99=2.2)),
    stopped_because="slo",
    why="latency p99 2.2 s above 2 s at concurrency 4",
    pods=1,
    seconds=30,
)


def test_a_baseline_replica_swept_alike_stands_for_the_baseline_in_status_and_economics() -> None:
    both = replace(MEASURED, baseline=BASELINE_SWEPT)
    driver = Driver(spec(), sweep=Sweeps(both, running=0))
    driver.run_until("Progressing")
    driver.tick()
    swept = driver.status.capacity_test
    assert swept is not None
    assert (swept.verdict, swept.baseline_from, swept.baseline_note) == ("Pass", "sweep", None)
    assert swept.baseline is not None
    assert swept.baseline.rps_per_pod == pytest.approx(3.9)
    assert "the baseline's replica at 3.9 requests/s per pod, swept alike" in swept.reason
    assert measured_capacity(driver.status) == {
        "candidate": Throughput(pytest.approx(3.8), pytest.approx(3.8 * 128)),
        "baseline": Throughput(pytest.approx(3.9), pytest.approx(3.9 * 128)),
    }, "the cost model uses both measured capacities"


@pytest.mark.parametrize(
    ("baseline", "changes", "note"),
    [
        (SweepOutcome(problem="no GPU node that serves the baseline has room for one more pod "
                      "(the scheduler: 0/4 nodes are available)"), {},
         "its replica could not be swept: no GPU node that serves the baseline has room"),
        (SweepOutcome((stair(1, 0.4, p99=2.5),), "slo", "latency p99 2.5 s above 2 s at "
                      "concurrency 1"), {},
         "its replica met no stair within the SLO: latency p99 2.5 s above 2 s"),
        (None, {"baseline": "production"}, "spec.capacityTest.baseline is production"),
    ],
)  # fmt: skip
def test_without_a_baseline_swept_alike_production_stands_in_and_the_status_says_why(
    baseline: SweepOutcome | None, changes: dict[str, Any], note: str
) -> None:
    driver = Driver(spec(**changes), sweep=Sweeps(replace(MEASURED, baseline=baseline),
                                                  running=0))  # fmt: skip
    driver.run_until("Progressing")
    driver.tick()
    swept = driver.status.capacity_test
    assert swept is not None
    assert (swept.verdict, swept.baseline_from) == ("Pass", "production")
    assert (swept.baseline_note or "").startswith(note)
    assert "the baseline's figure is production's operating point (" + note in swept.reason
    assert set(measured_capacity(driver.status)) == {"candidate"}
    assert driver.weights() == [5], "the trial goes on: the candidate was measured"
