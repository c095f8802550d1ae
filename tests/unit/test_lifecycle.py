"""The trial state machine: scenarios tick by tick, and properties over random histories."""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from acceltrial.api.actions import UserAction
from acceltrial.api.reasons import (
    ABORTED,
    API_REFUSED,
    CANDIDATE_NOT_AVAILABLE,
    CANDIDATE_NOT_SCALED,
    CRITERION_FAILED,
    PREFLIGHT_FAILED,
    PROMOTED,
)
from acceltrial.api.spec import TrialSpec
from acceltrial.api.status import (
    EconomicsStatus,
    OriginalRouting,
    ReplicasOriginal,
    TrialStatus,
    VariantEconomics,
    original_routing,
)
from acceltrial.engine.analysis import RoundOutcome
from acceltrial.engine.capacity_gate import capacity_due
from acceltrial.engine.capacity_sweep import SweepOutcome
from acceltrial.engine.lifecycle import decide
from acceltrial.engine.promotion import AutoscalerBounds
from acceltrial.engine.quality.check import QualityCheck, quality_due
from acceltrial.engine.schedule import criteria_hash, measurement_due, stage_end
from acceltrial.engine.ticks import (
    Action,
    ClearUserAction,
    DeployCandidate,
    HandOverCandidate,
    Measurement,
    Observation,
    RemoveCandidate,
    RestoreAutoscaler,
    RestoreRouting,
    RetargetAutoscaler,
    ScaleBaselineToZero,
    ScaleCandidate,
    SetWeight,
    TickResult,
)
from acceltrial.engine.undo import on_delete

T0 = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
ORIGINAL = original_routing(
    {
        "router": "gatewayapi",
        "httpRoute": {
            "name": "llama3",
            "namespace": "serving",
            "ruleIndex": 0,
            "backendRefs": [{"name": "llama3-gpu", "port": 8000, "weight": 1}],
        },
    }
)


def make_spec(**overrides: Any) -> TrialSpec:
    body: dict[str, Any] = {
        "baseline": {"deploymentRef": {"name": "llama3-gpu"}, "instanceType": "g5.2xlarge"},
        "candidate": {"image": "neuron:1", "instanceType": "inf2.8xlarge", "neuronCores": 2},
        "traffic": {"router": "gatewayapi", "gatewayapi": {"httpRouteRef": {"name": "llama3"}}},
        "steps": [
            {"weight": 5, "duration": "2m"},
            {"weight": 25, "duration": "2m"},
            {"weight": 50, "duration": "2m"},
        ],
        "analysis": {
            "interval": "1m",
            "prometheus": {"address": "http://p:9090"},
            "criteria": [{"name": "errors", "metric": "error_ratio", "absolute": {"max": 0.01}}],
            "failureLimit": 0,
            "inconclusiveLimit": 1,
        },
        "promotion": {"mode": "automatic", "bakeTime": "2m"},
        "progressDeadline": "5m",
    }
    for key, value in overrides.items():
        body[key] = {**body.get(key, {}), **value} if isinstance(value, dict) else value
    return TrialSpec.model_validate(body)


@dataclass
class Driver:
    """Plays the handler: observes, measures when due, applies what the engine decides."""

    spec: TrialSpec
    status: TrialStatus = field(default_factory=TrialStatus)
    now: datetime = T0
    candidate_available: bool = True
    available_replicas: int = 1
    """Available candidate replicas while candidate_available."""
    serving_replicas: int | None = None
    """The candidate pods the router counts, when the test says."""
    autoscaler: AutoscalerBounds | None = None
    original: OriginalRouting = ORIGINAL
    """The routing the router records in preflight."""
    history: list[TickResult] = field(default_factory=list)
    check: Callable[[TrialStatus], QualityCheck] | None = None
    """Plays the quality check's run, when spec.quality asks for one on a tick."""
    sweep: Callable[[TrialStatus], SweepOutcome | None] | None = None
    """Plays the capacity sweep, when spec.capacityTest asks for one on a tick."""

    def tick(
        self,
        outcome: RoundOutcome | None = "Pass",
        action: UserAction | None = None,
        observed_weight: int | None = None,
        advance: timedelta = timedelta(minutes=1),
        problems: tuple[str, ...] = (),
        *,
        observed_share: int | None = None,
    ) -> TickResult:
        self.now += advance
        due = measurement_due(self.spec, self.status, self.now)
        measured = Measurement(outcome, f"errors: {outcome.lower()}") if due and outcome else None
        observation = Observation(
            now=self.now,
            generation=1,
            preflight_problems=problems,
            routing=self.original,
            observed_weight=observed_weight,
            observed_share=observed_share,
            candidate_available=self.candidate_available,
            candidate_available_replicas=self.available_replicas if self.candidate_available else 0,
            candidate_serving_replicas=self.serving_replicas,
            autoscaler=self.autoscaler,
            measurement=measured,
            action=action,
            quality=self._quality(),
            capacity_test=self._swept(),
        )
        result = decide(self.spec, self.status, observation)
        assert decide(self.spec, self.status, observation) == result, "decide is deterministic"
        self.status = result.status
        self.history.append(result)
        return result

    def _quality(self) -> QualityCheck | None:
        due = quality_due(self.spec, self.status, self.candidate_available)
        return self.check(self.status) if due and self.check is not None else None

    def _swept(self) -> SweepOutcome | None:
        due = capacity_due(self.spec, self.status, self.candidate_available)
        return self.sweep(self.status) if due and self.sweep is not None else None

    def run_until(self, phase: str, limit: int = 40, **tick: Any) -> None:
        for _ in range(limit):
            if self.status.phase == phase:
                return
            self.tick(**tick)
        raise AssertionError(f"never reached {phase}; stuck in {self.status.phase}")

    def actions(self) -> list[Action]:
        return [a for result in self.history for a in result.actions]

    def weights(self) -> list[int]:
        return [a.weight for a in self.actions() if isinstance(a, SetWeight)]


def condition(status: TrialStatus, type_: str) -> tuple[str, str] | None:
    found = next((c for c in status.conditions or [] if c.type == type_), None)
    return None if found is None else (found.status, found.reason)


def test_a_good_candidate_is_promoted_step_by_step() -> None:
    driver = Driver(make_spec())
    driver.run_until("Promoted")
    assert driver.weights() == [5, 25, 50, 100]
    actions = driver.actions()
    assert actions[0] == DeployCandidate()
    assert actions[-1] == ScaleBaselineToZero()
    assert RestoreRouting() not in actions
    status = driver.status
    assert status.original == ORIGINAL
    assert status.decision is not None
    assert status.decision.verdict == "promote"
    assert status.decision.reason_code == PROMOTED
    assert condition(status, "Ready") == ("True", "Promoted")
    assert condition(status, "Progressing") == ("False", "Promoted")
    phases = [e.reason for r in driver.history for e in r.events]
    assert phases == [
        "Preflight", "Progressing", "Promoting", "BakingIn", "Promoted"
    ]  # fmt: skip


def test_a_step_and_the_bake_pass_on_a_measurement_at_or_after_their_end() -> None:
    """Ticks 45 s apart (a busy operator) with a 1-minute interval and 2-minute steps: a step
    (and the bake) passes only in a tick whose measurement was taken at or after its end, never
    on one taken before it; and no measurement comes less than an interval after the last
    (its window would count requests twice)."""
    driver = Driver(make_spec())
    driver.run_until("Progressing")
    driver.tick()  # step 1 begins
    measured_at = []
    while driver.status.phase not in ("Promoted", "RolledBack"):
        before = driver.status
        driver.tick(advance=timedelta(seconds=45))
        if driver.status.last_measurement_at != before.last_measurement_at:
            measured_at.append(driver.now)
        moved = (before.step, before.phase) != (driver.status.step, driver.status.phase)
        if moved and before.phase in ("Progressing", "BakingIn") and before.step:
            end = stage_end(driver.spec, before)
            assert end is not None
            assert end <= driver.now
            assert driver.status.last_measurement_at == driver.now, "measured at its end"
    assert driver.status.phase == "Promoted"
    gaps = [later - earlier for earlier, later in itertools.pairwise(measured_at)]
    assert min(gaps) >= timedelta(minutes=1), "windows never overlap"


def test_a_step_never_passes_on_a_measurement_from_before_its_end() -> None:
    driver = Driver(make_spec())
    driver.run_until("Progressing")
    driver.tick()
    driver.tick(advance=timedelta(seconds=90))
    driver.tick(advance=timedelta(seconds=40))  # at 130 s: 40 s after the last, none due
    assert driver.status.step == 1, "the latest measurement ends at 90 s of 120"
    driver.tick(advance=timedelta(seconds=20))
    assert driver.status.step == 2, "the next one, at 150 s, covers its end"


def test_preflight_failure_changes_nothing() -> None:
    driver = Driver(make_spec())
    driver.tick(outcome=None)
    driver.tick(outcome=None, problems=("baseline Deployment llama3-gpu not found",))
    assert driver.status.phase == "Failed"
    assert [a for a in driver.actions() if not isinstance(a, ClearUserAction)] == []
    assert condition(driver.status, "Degraded") == ("True", "Failed")
    assert "llama3-gpu not found" in (driver.status.message or "")
    decision = driver.status.decision
    assert decision is not None
    assert decision.verdict == "none", "nothing was deployed, so nothing was rolled back"
    assert decision.reason_code == PREFLIGHT_FAILED


def test_a_failed_measurement_rolls_back_and_restores_routing() -> None:
    driver = Driver(make_spec())
    driver.run_until("Progressing")
    driver.tick()  # candidate available: step 1
    for _ in range(3):
        driver.tick()  # step 1 passes after its 2 minutes
    assert driver.status.step == 2
    driver.tick(outcome="Fail")
    assert driver.status.phase == "RollingBack"
    driver.tick(outcome=None)
    assert driver.status.phase == "RolledBack"
    assert driver.history[-1].actions == (RestoreRouting(), RemoveCandidate())
    assert driver.status.canary_weight == 0
    assert driver.status.original == ORIGINAL
    decision = driver.status.decision
    assert decision is not None
    assert decision.verdict == "rollback"
    assert decision.reason_code == CRITERION_FAILED
    assert decision.reason.endswith("at 25%")
    assert condition(driver.status, "Degraded") == ("True", "RolledBack")


def test_no_data_never_advances_and_pauses_past_the_limit() -> None:
    driver = Driver(make_spec())
    driver.run_until("Progressing")
    driver.tick()  # step 1 at 5%
    driver.tick(outcome="Inconclusive")
    driver.tick(outcome="Inconclusive")  # 2 > inconclusiveLimit 1
    assert driver.status.phase == "Paused"
    assert driver.status.pause_reason == "Inconclusive"
    assert driver.weights() == [5]
    driver.tick(outcome=None, action="resume")
    assert driver.status.phase == "Progressing"
    driver.tick()
    driver.tick()
    assert driver.status.step == 2, "advances once a measurement passes after the duration"


def test_manual_approval_waits_and_abort_still_works() -> None:
    driver = Driver(make_spec(promotion={"mode": "manual"}))
    driver.run_until("Paused")
    assert driver.status.pause_reason == "AwaitingApproval"
    assert driver.weights() == [5, 25, 50]
    for _ in range(3):
        driver.tick()
    assert driver.status.phase == "Paused", "no promotion without approve"
    driver.tick(outcome=None, action="abort")
    driver.tick(outcome=None)
    assert driver.status.phase == "Aborted"
    assert driver.status.decision is not None
    assert driver.status.decision.verdict == "abort"
    assert driver.status.decision.reason_code == ABORTED


def test_an_abort_before_the_candidate_was_deployed_says_nothing_was_removed() -> None:
    driver = Driver(make_spec())
    driver.tick(problems=())
    assert driver.status.phase == "Preflight"
    driver.tick(outcome=None, action="abort")
    driver.tick(outcome=None)
    assert driver.status.phase == "Aborted"
    assert driver.status.message == "nothing was changed: the candidate was never deployed"
    late = Driver(make_spec())
    late.run_until("Progressing")
    late.tick(outcome=None, action="abort")
    late.tick(outcome=None)
    assert late.status.message == "routing restored as found; candidate removed"


def test_approve_promotes_and_a_failure_during_bake_rolls_back() -> None:
    driver = Driver(make_spec(promotion={"mode": "manual"}))
    driver.run_until("Paused")
    driver.tick(outcome=None, action="approve")
    assert driver.status.phase == "Promoting"
    assert isinstance(driver.history[-1].actions[0], ClearUserAction)
    driver.tick(outcome=None)
    assert driver.status.phase == "BakingIn"
    driver.tick(outcome="Fail")
    driver.tick(outcome=None)
    assert driver.status.phase == "RolledBack"
    assert ScaleBaselineToZero() not in driver.actions()


def test_a_spec_change_after_start_is_refused_and_holds() -> None:
    driver = Driver(make_spec())
    driver.run_until("Progressing")
    driver.tick()
    before = driver.status
    changed = make_spec(analysis={"failureLimit": 5})
    driver.spec = changed
    driver.tick()
    assert condition(driver.status, "SpecChangeRejected") == ("True", "SpecChangeRejected")
    assert driver.status.step == before.step
    assert driver.status.counts == before.counts
    assert driver.history[-1].actions == ()
    driver.spec = make_spec()
    driver.tick()
    assert condition(driver.status, "SpecChangeRejected") is None


def test_a_candidate_that_never_becomes_available_is_rolled_back() -> None:
    driver = Driver(make_spec(), candidate_available=False)
    driver.run_until("RollingBack")
    assert driver.status.decision is not None
    assert driver.status.decision.reason_code == CANDIDATE_NOT_AVAILABLE
    assert "within 5m" in driver.status.decision.reason, "the deadline is named"
    assert driver.weights() == []


def test_routing_drift_is_set_back() -> None:
    driver = Driver(make_spec())
    driver.run_until("Progressing")
    driver.tick()
    result = driver.tick(observed_weight=0)
    assert SetWeight(5) in result.actions
    assert [e.reason for e in result.events] == ["RoutingDrift"]


def test_a_step_whose_status_write_was_lost_continues_from_the_next_step() -> None:
    # Found by the fault suite (api-503): the tick that moved 25% -> 50% wrote the route, then
    # its status write failed; the retry set the route back to 25% before moving it to 50%
    # again. The route at the next step's weight, written by the trial, is that step begun.
    driver = Driver(make_spec())
    driver.run_until("Progressing")
    driver.tick()
    assert (driver.status.step, driver.status.canary_weight) == (1, 5)
    result = driver.tick(observed_weight=25, outcome="Fail")
    assert result.actions == (SetWeight(25),), "the write is repeated, nothing set back"
    assert (result.status.step, result.status.canary_weight) == (2, 25)
    assert result.status.step_started_at == driver.now, "the step is measured from now"
    assert result.status.phase == "Progressing", "the lost tick's decision stands"
    assert [e.reason for e in result.events] == ["StepResumed"]
    paused = driver.tick(observed_weight=50, action="pause")
    assert paused.status.step == 2, "with a person's action pending, that tick is repeated"


def test_a_tick_writes_the_route_once() -> None:
    driver = Driver(make_spec())
    driver.run_until("Progressing")
    driver.tick()
    driver.tick()
    result = driver.tick(observed_weight=50)  # drifted, and the step passes on this tick
    assert result.status.step == 2
    assert [a for a in result.actions if isinstance(a, SetWeight)] == [SetWeight(25)]
    assert "RoutingDrift" not in [e.reason for e in result.events]


def test_deleting_undoes_an_unfinished_trial_and_never_touches_a_promoted_one() -> None:
    undo = (RestoreRouting(), RemoveCandidate())
    for phase in ("Preflight", "Progressing", "Paused", "Promoting", "BakingIn", "RollingBack"):
        assert on_delete(TrialStatus(phase=phase), candidate_handed_over=False) == undo, phase
    with_hpa = ORIGINAL.model_copy(
        update={"hpa": {"name": "llama3", "scaleTargetRef": {"kind": "Deployment", "name": "g"}}}
    )
    assert on_delete(TrialStatus(phase="BakingIn", original=with_hpa), False) == (
        RestoreRouting(),
        RestoreAutoscaler(),
        RemoveCandidate(),
    )
    # Only ever makes sure the candidate no longer belongs to the trial.
    assert on_delete(TrialStatus(phase="Promoted"), True) == (HandOverCandidate(),)
    # Handed over but not yet recorded as Promoted (a crash in between): finish, never undo.
    assert on_delete(TrialStatus(phase="BakingIn"), True) == (
        HandOverCandidate(),
        ScaleBaselineToZero(),
    )
    for phase in ("RolledBack", "Failed", "Aborted", "Pending", None):
        assert on_delete(TrialStatus(phase=phase), False) == (), phase


def economics(projected: int) -> EconomicsStatus:
    return EconomicsStatus(candidate=VariantEconomics(projected_replicas=projected))


def run_to_promoting(driver: Driver, projected: int) -> None:
    driver.run_until("Progressing")
    driver.run_until("Promoting", outcome="Pass")
    driver.status = driver.status.model_copy(update={"economics": economics(projected)})


def test_promotion_scales_the_candidate_for_production_before_all_traffic_moves() -> None:
    driver = Driver(make_spec())
    run_to_promoting(driver, projected=4)
    result = driver.tick(outcome=None)
    assert driver.status.phase == "Promoting"
    assert ScaleCandidate(4) in result.actions
    assert SetWeight(100) not in driver.actions(), "no traffic moves before the replicas exist"
    assert driver.status.promotion is not None
    assert driver.status.promotion.replicas == 4
    assert "measured capacity per replica" in driver.status.promotion.reason
    driver.available_replicas = 3
    driver.tick(outcome=None)
    assert driver.status.phase == "Promoting"
    driver.available_replicas = 4
    result = driver.tick(outcome=None)
    assert driver.status.phase == "BakingIn"
    assert result.actions == (SetWeight(100),)
    driver.run_until("Promoted")
    final = driver.history[-1].actions
    assert final.index(HandOverCandidate()) < final.index(ScaleBaselineToZero())
    assert driver.status.promotion is not None
    assert driver.status.promotion.handed_over_at == driver.now


def test_promotion_replicas_are_capped_and_never_below_the_trials() -> None:
    driver = Driver(make_spec(promotion={"maxReplicas": 3}))
    run_to_promoting(driver, projected=9)
    driver.tick(outcome=None)
    assert driver.status.promotion is not None
    assert driver.status.promotion.replicas == 3
    assert "promotion.maxReplicas (3)" in driver.status.promotion.reason
    small = Driver(make_spec(candidate={"replicas": 2}), available_replicas=2)
    run_to_promoting(small, projected=1)
    small.tick(outcome=None)
    assert small.status.phase == "BakingIn"
    assert small.status.promotion is not None
    assert small.status.promotion.replicas == 2


def test_promotion_rolls_back_when_the_replicas_never_become_available() -> None:
    driver = Driver(make_spec())
    run_to_promoting(driver, projected=5)
    driver.run_until("RollingBack", outcome=None)
    assert driver.status.decision is not None
    assert driver.status.decision.reason_code == CANDIDATE_NOT_SCALED
    assert "did not reach 5 Available replicas within 5m" in driver.status.decision.reason
    assert SetWeight(100) not in driver.actions()
    driver.tick(outcome=None)
    assert driver.status.phase == "RolledBack"


def test_the_baselines_autoscaler_follows_the_candidate_and_comes_back_on_rollback() -> None:
    driver = Driver(make_spec(), autoscaler=AutoscalerBounds("llama3", 2, 6))
    driver.run_until("Preflight")
    hpa = {"name": "llama3", "scaleTargetRef": {"kind": "Deployment", "name": "llama3-gpu"}}
    driver.status = driver.status.model_copy(
        update={"original": ORIGINAL.model_copy(update={"hpa": hpa})}
    )
    driver.available_replicas = 2
    run_to_promoting(driver, projected=1)
    driver.tick(outcome=None)
    assert driver.status.promotion is not None
    assert driver.status.promotion.replicas == 2, "at least the autoscaler's minReplicas"
    assert "HorizontalPodAutoscaler llama3 (2..6)" in driver.status.promotion.reason
    assert driver.status.phase == "BakingIn"
    assert driver.history[-1].actions == (SetWeight(100), RetargetAutoscaler())
    driver.tick(outcome="Fail")
    driver.tick(outcome=None)
    assert driver.status.phase == "RolledBack"
    assert driver.history[-1].actions == (RestoreRouting(), RestoreAutoscaler(), RemoveCandidate())


OUTCOMES = st.sampled_from(["Pass", "Pass", "Pass", "Fail", "Inconclusive", "Error", None])
ACTIONS = st.sampled_from([None] * 12 + ["pause", "resume", "abort", "promote", "approve"])
TICKS = st.lists(
    st.tuples(OUTCOMES, ACTIONS, st.integers(min_value=10, max_value=150), st.booleans()),
    min_size=1,
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(ticks=TICKS, manual=st.booleans())
def test_properties_hold_over_any_history(
    ticks: list[tuple[RoundOutcome | None, UserAction | None, int, bool]], manual: bool
) -> None:
    spec = make_spec(promotion={"mode": "manual" if manual else "automatic"})
    driver = Driver(spec)
    for outcome, action, seconds, available in ticks:
        before = driver.status
        driver.candidate_available = available
        due = measurement_due(spec, before, driver.now + timedelta(seconds=seconds))
        result = driver.tick(outcome, action, advance=timedelta(seconds=seconds))
        measured = outcome if due else None
        _weight_never_exceeds_the_step(spec, result)
        _no_step_is_left_without_a_pass(before, result.status, measured, action)
        _rollback_restores_the_original(before, result)


def _weight_never_exceeds_the_step(spec: TrialSpec, result: TickResult) -> None:
    after = result.status
    for set_weight in (a for a in result.actions if isinstance(a, SetWeight)):
        if set_weight.weight == 100:
            assert after.phase == "BakingIn"
        else:
            assert after.step is not None
            assert set_weight.weight == spec.steps[after.step - 1].weight
    paused_bake = after.phase == "Paused" and after.requested_weight == 100
    if after.phase in ("Progressing", "Paused") and after.step and not paused_bake:
        assert after.requested_weight == spec.steps[after.step - 1].weight
        # The gateway splits by weight: the share is the weight asked.
        assert after.canary_weight == after.requested_weight


def _no_step_is_left_without_a_pass(
    before: TrialStatus,
    after: TrialStatus,
    measured: RoundOutcome | None,
    action: UserAction | None,
) -> None:
    left_step = (before.step or 0) >= 1 and (
        (after.step or 0) > (before.step or 0)
        or (after.phase == "Promoting" and before.phase != "Promoting")
        or (after.pause_reason == "AwaitingApproval" and before.pause_reason != after.pause_reason)
    )
    if left_step:
        passed_before = before.counts is not None and before.counts.last_outcome == "Pass"
        assert measured == "Pass" or passed_before or action in ("promote", "approve")


def _rollback_restores_the_original(before: TrialStatus, result: TickResult) -> None:
    after = result.status
    if before.phase == "RollingBack":
        assert after.phase in ("RolledBack", "Aborted")
        assert RestoreRouting() in result.actions
        assert RemoveCandidate() in result.actions
        assert after.canary_weight == 0
        assert after.original == before.original
    if after.original is not None:
        assert after.original == ORIGINAL, "the recorded routing is never rewritten"


def test_a_baseline_still_rolling_out_is_waited_for_then_fails_past_the_deadline() -> None:
    driver = Driver(make_spec())
    driver.tick()  # Pending -> Preflight
    rolling = ("baseline Deployment llama3-gpu is not Available",)
    result = decide(driver.spec, driver.status, Observation(now=driver.now, generation=1,
                                                           preflight_waits=rolling))  # fmt: skip
    assert result.status.phase == "Preflight"
    assert "waiting before anything changes" in (result.status.message or "")
    assert result.actions == ()
    late = driver.now + timedelta(minutes=6)
    result = decide(driver.spec, driver.status, Observation(now=late, generation=1,
                                                           preflight_waits=rolling))  # fmt: skip
    assert result.status.phase == "Failed"
    assert "after waiting 5m" in (result.status.message or "")
    assert result.actions == ()
    assert result.status.decision is not None
    assert result.status.decision.verdict == "none", "nothing was deployed"


def test_a_bake_paused_on_missing_data_resumes_as_a_bake() -> None:
    driver = Driver(make_spec(promotion={"bakeTime": "10m"}))
    driver.run_until("BakingIn")
    driver.tick(outcome="Inconclusive")
    driver.tick(outcome="Inconclusive")
    assert (driver.status.phase, driver.status.canary_weight) == ("Paused", 100)
    driver.tick(outcome=None, action="resume")
    assert driver.status.phase == "BakingIn"
    assert driver.weights()[-1] == 100


def test_a_permanent_refusal_ends_the_trial_instead_of_retrying() -> None:
    refusal = "creating the candidate Service x-candidate: HTTP 422: Service x is invalid"
    driver = Driver(make_spec())
    driver.tick()  # Pending -> Preflight
    refused = Observation(now=driver.now, generation=1, refused=refusal)
    result = decide(driver.spec, driver.status, refused)
    assert result.status.phase == "Failed"
    assert result.actions == (RemoveCandidate(),), "whatever the refused tick created goes"
    assert result.status.decision is not None
    assert result.status.decision.reason_code == API_REFUSED
    assert refusal in result.status.decision.reason
    # Once traffic has moved, a refusal rolls back exactly.
    driver.run_until("Progressing")
    driver.tick()
    result = decide(driver.spec, driver.status, refused)
    assert result.status.phase == "RollingBack"
    assert "retrying cannot help" in (result.status.message or "")


def test_a_promotion_whose_status_write_was_lost_is_finished_not_rolled_back() -> None:
    # Found by the fault suite: the promoting tick handed the candidate over and scaled the
    # baseline to zero, then its status write failed; the retry, still in BakingIn, found no
    # baseline pods to measure, paused, and an abort would have routed traffic to zero pods.
    driver = Driver(make_spec(promotion={"bakeTime": "10m"}))
    driver.run_until("BakingIn")
    lost = Observation(
        now=driver.now + timedelta(minutes=1),
        generation=1,
        measurement=Measurement("Inconclusive", "p99-latency: no data for the baseline"),
        candidate_handed_over=True,
    )
    result = decide(driver.spec, driver.status, lost)
    assert result.status.phase == "Promoted"
    assert result.actions == (HandOverCandidate(), ScaleBaselineToZero())
    assert result.status.counts == driver.status.counts, "the measurement is not judged"
    unbaked = decide(driver.spec, driver.status, replace(lost, candidate_handed_over=False))
    assert unbaked.status.phase == "BakingIn", "without the handover, the bake goes on"


SHADOWED = [
    {"mirror": 100, "duration": "2m"},
    {"weight": 5, "duration": "2m"},
    {"weight": 50, "duration": "2m"},
]


def test_a_mirror_step_copies_requests_before_any_user_reaches_the_candidate() -> None:
    driver = Driver(make_spec(steps=SHADOWED))
    driver.run_until("Promoted")
    written = [(a.weight, a.mirror) for a in driver.actions() if isinstance(a, SetWeight)]
    assert written == [(0, 100), (5, 0), (50, 0), (100, 0)]
    messages = [r.status.message for r in driver.history if r.status.step == 1]
    assert any("100% of requests mirrored" in (m or "") for m in messages), messages


def test_a_build_that_fails_on_mirrored_copies_is_rolled_back_before_any_weighted_step() -> None:
    driver = Driver(make_spec(steps=SHADOWED))
    driver.run_until("Progressing")
    driver.tick()  # the candidate is Available: the mirror step begins
    assert driver.status.step == 1
    assert driver.status.canary_weight == 0
    driver.run_until("RollingBack", outcome="Fail")
    driver.run_until("RolledBack")
    assert [a.weight for a in driver.actions() if isinstance(a, SetWeight)] == [0]
    assert RestoreRouting() in driver.actions()
    decision = driver.status.decision
    assert decision is not None
    assert decision.reason_code == CRITERION_FAILED
    assert "at step 1 (100% of requests mirrored, no user served)" in decision.reason


def test_a_mirror_removed_by_someone_else_is_set_back_with_the_mirror() -> None:
    driver = Driver(make_spec(steps=SHADOWED))
    driver.run_until("Progressing")
    driver.tick()
    result = driver.tick(observed_weight=50)  # the route holds 50% where the trial mirrors only
    assert SetWeight(0, 100) in result.actions


def test_the_criteria_hash_of_steps_without_mirror_is_unchanged() -> None:
    """Trials started before mirror steps existed keep their hash (no spec-change hold)."""
    spec = make_spec()
    before = {
        "steps": [{"weight": s.weight, "duration": s.duration} for s in spec.steps],
        "analysis": spec.analysis.model_dump(mode="json", by_alias=True),
    }
    digest = hashlib.sha256(json.dumps(before, sort_keys=True).encode()).hexdigest()
    assert criteria_hash(spec) == digest


# -- the replicas router: the share whole pods give, beside the weight asked --------------------

REPLICAS = ReplicasOriginal(
    router="replicas", baseline_replicas=2, service_selector={"app": "llama3"}
)


def replicas_spec() -> TrialSpec:
    return make_spec(
        traffic={"router": "replicas", "gatewayapi": None},
        steps=[{"weight": 25, "duration": "2m"}, {"weight": 50, "duration": "2m"}],
    )


def test_the_replicas_router_says_the_share_its_pods_give_beside_the_weight_asked() -> None:
    """One candidate pod beside two baseline pods is 33% when the step asks 25%; two beside two
    is 50%; the bake (the baseline's pods out of the Service) is 100%."""
    driver = Driver(replicas_spec(), original=REPLICAS)
    driver.run_until("Progressing")
    driver.tick()  # candidate available: step 1
    status = driver.status
    assert (status.step, status.requested_weight, status.canary_weight) == (1, 25, 33)
    assert "step 1/2: 33% (asked 25%) of traffic" in (status.message or "")
    assert driver.history[-1].actions[-1] == SetWeight(25), "the router is asked for 25%"
    seen = []
    for _ in range(12):
        if driver.status.phase == "Promoted":
            break
        # The router scaled the candidate to 2 pods for the 50% step.
        driver.available_replicas = 2 if driver.status.step == 2 else 1
        driver.tick()
        seen.append((driver.status.requested_weight, driver.status.canary_weight))
    assert driver.status.phase == "Promoted"
    assert (50, 50) in seen
    assert (100, 100) in seen
    assert driver.weights() == [25, 50, 100]


def test_the_share_follows_the_ready_pods_the_router_counts() -> None:
    """A candidate pod still starting gives no share yet: canaryWeight says what the pods behind
    the Service give now, while the weight asked stays the step's (never re-written). When the
    share changes the step counts from then, and the measurement whose window straddles the
    change is not judged."""
    driver = Driver(replicas_spec(), original=REPLICAS)
    driver.run_until("Progressing")
    driver.tick()
    later = driver.now + timedelta(minutes=1)
    assert measurement_due(driver.spec, driver.status, later, share=33)
    assert not measurement_due(driver.spec, driver.status, later, share=0), "not across a change"
    driver.tick(observed_share=0, outcome=None)
    assert (driver.status.requested_weight, driver.status.canary_weight) == (25, 0)
    assert driver.history[-1].actions == (), "no drift: the router reads back no weight"
    assert driver.status.step_started_at == driver.now, "the step counts from the change"
    driver.tick(observed_share=33, outcome="Fail")
    assert driver.status.canary_weight == 33
    assert driver.status.phase == "Progressing", "a window across the change is not judged"
    assert driver.status.step_started_at == driver.now
    driver.tick(observed_share=33, advance=timedelta(minutes=2), outcome="Pass")
    driver.tick(observed_share=33, outcome="Pass")
    assert driver.status.step == 2, "the step ran its 2 minutes from the change"


def at_the_50_percent_step_with_one_pod() -> Driver:
    driver = Driver(replicas_spec(), original=REPLICAS)
    driver.run_until("Progressing")
    driver.tick()
    driver.tick(advance=timedelta(minutes=2), observed_share=33)
    driver.tick(observed_share=33)
    assert driver.status.step == 2
    return driver


def test_a_step_waits_for_the_pods_its_share_needs() -> None:
    """The 50% step needs two candidate pods beside two: while the second is not Available the
    step runs at 33% and does not pass however long it lasts; once it is, the step counts from
    the change and passes at 50%."""
    driver = at_the_50_percent_step_with_one_pod()
    for _ in range(3):
        driver.tick(observed_share=33)
    assert (driver.status.phase, driver.status.step) == ("Progressing", 2), "not at 50% yet"
    assert driver.status.canary_weight == 33
    driver.available_replicas = 2
    driver.tick(observed_share=50, outcome=None)
    assert driver.status.step_started_at == driver.now, "the step counts from its 50%"
    driver.tick(observed_share=50, advance=timedelta(minutes=2))
    driver.tick(observed_share=50)
    assert driver.status.phase in ("Promoting", "BakingIn")


def test_a_step_passes_only_once_the_router_counts_its_pods_and_measures_their_share() -> None:
    """The Deployment and the pods behind the Service are read apart: a pod the Deployment
    counts Available while the router still gives 33% does not let the 50% step pass on its
    33% measurements; once the router counts it, the step passes only on a measurement taken
    at 50%."""
    driver = at_the_50_percent_step_with_one_pod()
    driver.available_replicas, driver.serving_replicas = 2, 1
    for _ in range(3):
        driver.tick(observed_share=33)
    assert (driver.status.phase, driver.status.step) == ("Progressing", 2), "33% is not 50%"
    driver.serving_replicas = 2
    driver.tick(observed_share=50, outcome=None)
    driver.tick(observed_share=50, advance=timedelta(minutes=3), outcome=None)
    assert driver.status.step == 2, "no measurement at 50% yet"
    driver.tick(observed_share=50, advance=timedelta(seconds=1))
    assert driver.status.phase in ("Promoting", "BakingIn")


def test_a_step_whose_pods_never_come_rolls_back_after_the_progress_deadline() -> None:
    driver = at_the_50_percent_step_with_one_pod()
    driver.tick(observed_share=33, advance=timedelta(minutes=5))
    decision = driver.status.decision
    assert decision is not None
    assert decision.reason_code == CANDIDATE_NOT_SCALED
    assert "the 2 Available replicas step 2's 50% needs within 5m (1 were)" in decision.reason


def test_a_failure_names_the_share_and_the_weight_asked() -> None:
    driver = Driver(replicas_spec(), original=REPLICAS)
    driver.run_until("Progressing")
    driver.tick()
    driver.tick(outcome="Fail")
    decision = driver.status.decision
    assert decision is not None
    assert decision.reason.endswith("at 33% (asked 25%)")
    driver.tick(outcome=None)
    status = driver.status
    assert (status.phase, status.requested_weight, status.canary_weight) == ("RolledBack", 0, 0)


def test_a_paused_bake_resumes_as_a_bake_whatever_share_is_read() -> None:
    driver = Driver(replicas_spec(), original=REPLICAS, available_replicas=2)
    driver.run_until("BakingIn")
    driver.tick(action="pause", outcome="Inconclusive")
    driver.tick(outcome="Inconclusive")
    assert driver.status.phase == "Paused"
    # A candidate pod restarting: the share read is 0, the bake is still a bake.
    driver.tick(action="resume", outcome=None, observed_share=0)
    assert driver.status.phase == "BakingIn"
