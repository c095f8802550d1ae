"""The quality gate, tick by tick through the state machine: the prompt set is asked once the
candidate is Available and before any traffic moves; a failure ends the trial Failed with the
candidate removed and the route never changed; a check that cannot tell pauses for a person;
with everyStep a later failure rolls back."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from acceltrial.api.reasons import QUALITY_FAILED
from acceltrial.api.status import TrialStatus
from acceltrial.api.validation import validate_trial
from acceltrial.engine.quality.check import QualityCheck
from acceltrial.engine.quality.compare import PromptScore
from acceltrial.engine.ticks import RemoveCandidate, RestoreRouting, SetWeight
from tests.hostile.strategies import quality_manifest
from tests.unit.test_lifecycle import Driver, condition, make_spec

QUALITY = {
    "prompts": {"configMapRef": {"name": "prompts", "key": "prompts.jsonl"}},
    "criteria": [
        {"name": "agreement", "metric": "token_agreement", "absolute": {"min": 0.98}},
    ],
}


def spec(**quality: Any) -> Any:
    return make_spec(quality={**QUALITY, **quality})


def scores(agreed: int, prompts: int = 100, positions: int = 64) -> tuple[PromptScore, ...]:
    """``prompts`` answers of ``positions`` tokens, ``agreed`` of them agreeing in each."""
    first = None if agreed == positions else agreed
    return tuple(PromptScore(positions, agreed, 0.1, first) for _ in range(prompts))


class Checks:
    """Plays the runs of the prompt set: each call the next check, and when they were asked."""

    def __init__(self, *checks: QualityCheck) -> None:
        self.checks = list(checks)
        self.asked_at: list[tuple[str | None, int | None]] = []

    def __call__(self, status: TrialStatus) -> QualityCheck:
        self.asked_at.append((status.phase, status.step))
        return self.checks.pop(0) if len(self.checks) > 1 else self.checks[0]


def test_a_candidate_that_answers_like_the_baseline_goes_on_to_step_1() -> None:
    checks = Checks(QualityCheck(scores(64), scoring="promptLogprobs"))
    driver = Driver(spec(), check=checks)
    driver.candidate_available = False
    driver.run_until("Progressing")
    driver.tick()
    assert checks.asked_at == [], "never asked before the candidate is Available"
    driver.candidate_available = True
    driver.tick()
    assert checks.asked_at == [("Progressing", 0)]
    quality = driver.status.quality
    assert quality is not None
    assert quality.verdict == "Pass"
    assert quality.step == 0
    assert quality.scoring == "promptLogprobs"
    assert quality.prompts == 100
    assert driver.status.step == 1
    assert driver.weights() == [5]
    assert "QualityPassed" in [e.reason for e in driver.history[-1].events]
    driver.run_until("Promoted")
    assert len(checks.asked_at) == 1, "asked once: everyStep is off"


def test_a_candidate_that_answers_wrong_ends_failed_before_any_traffic_moves() -> None:
    driver = Driver(spec(), check=Checks(QualityCheck(scores(58))))
    driver.run_until("Failed")
    status = driver.status
    assert status.decision is not None
    assert status.decision.reason_code == QUALITY_FAILED
    assert "agreement: token_agreement 0.9062" in status.decision.reason
    assert "beyond min 0.98" in status.decision.reason
    assert driver.weights() == [], "the route was never changed"
    assert RemoveCandidate() in driver.actions()
    assert RestoreRouting() not in driver.actions(), "nothing to restore: no route write"
    assert status.quality is not None
    assert status.quality.verdict == "Fail"
    assert "the candidate is removed" in (status.message or "")


def test_a_check_that_cannot_tell_pauses_and_resume_asks_again() -> None:
    unsure = QualityCheck(scores(60, prompts=1) + scores(64, prompts=2))
    checks = Checks(unsure, QualityCheck(scores(64)))
    driver = Driver(spec(), check=checks)
    driver.run_until("Paused")
    assert driver.status.pause_reason == "QualityInconclusive"
    assert condition(driver.status, "Stalled") == ("True", "QualityInconclusive"), "a person acts"
    assert "more prompts are needed to tell" in (driver.status.message or "")
    assert driver.weights() == []
    driver.tick()
    assert driver.status.phase == "Paused", "a pause waits for a person"
    driver.tick(action="resume")
    driver.tick()
    assert len(checks.asked_at) == 2
    assert driver.status.step == 1
    assert driver.weights() == [5]


def test_promote_goes_on_without_an_inconclusive_check() -> None:
    driver = Driver(
        spec(), check=Checks(QualityCheck(scores(60, prompts=1) + scores(64, prompts=2)))
    )
    driver.run_until("Paused")
    driver.tick(action="promote")
    assert driver.status.phase == "Progressing"
    assert driver.status.step == 1


def test_with_every_step_a_later_failure_rolls_back() -> None:
    checks = Checks(QualityCheck(scores(64)), QualityCheck(scores(64)), QualityCheck(scores(50)))
    driver = Driver(spec(everyStep=True), check=checks)
    driver.run_until("RolledBack", limit=60)
    assert [step for _, step in checks.asked_at] == [0, 1, 2]
    assert driver.status.decision is not None
    assert driver.status.decision.reason_code == QUALITY_FAILED
    assert driver.weights()[:2] == [5, 25]
    assert RestoreRouting() in driver.actions()


def test_every_step_holds_a_step_until_its_check_passed() -> None:
    checks = Checks(QualityCheck(scores(64)), QualityCheck(unreachable="no endpoints"))
    driver = Driver(spec(everyStep=True), check=checks)
    driver.run_until("Progressing")
    driver.tick()
    for _ in range(4):
        driver.tick()
    assert driver.status.step == 1, "step 1's check has not come back"
    assert "the quality check waits: no endpoints" in (driver.status.message or "")


def test_a_check_that_cannot_run_ends_the_trial_naming_why() -> None:
    problem = "the baseline: /v1/completions refused (400): logprobs are not enabled"
    driver = Driver(spec(), check=Checks(QualityCheck(problem=problem)))
    driver.run_until("Failed")
    assert driver.status.decision is not None
    assert driver.status.decision.reason == f"the quality check cannot run: {problem}"
    assert [a for a in driver.actions() if isinstance(a, SetWeight)] == []


def test_a_candidate_not_reachable_yet_is_waited_for_within_the_deadline() -> None:
    driver = Driver(spec(), check=Checks(QualityCheck(unreachable="503 no ready endpoints")))
    driver.run_until("Progressing")
    driver.tick()
    assert driver.status.phase == "Progressing"
    assert "the quality check waits: 503" in (driver.status.message or "")
    driver.tick(advance=timedelta(minutes=6))
    assert driver.status.phase == "Failed"
    assert "for 5m" in (driver.status.decision.reason if driver.status.decision else "")


def test_quality_is_refused_with_the_replicas_router_naming_the_field() -> None:
    manifest = {
        "apiVersion": "acceltrial.dev/v1alpha1", "kind": "AcceleratorTrial",
        "metadata": {"name": "t", "namespace": "n"},
        "spec": {
            **make_spec().model_dump(by_alias=True, exclude_none=True, mode="json"),
            "traffic": {"router": "replicas"}, "quality": QUALITY,
        },
    }  # fmt: skip
    problems = validate_trial(manifest)
    said = [str(p) for p in problems]
    assert any(s.startswith("spec.quality") and "replicas router" in s for s in said), said


def test_a_relative_limit_on_token_agreement_is_refused_naming_the_field() -> None:
    criteria = [{"name": "a", "metric": "token_agreement", "relative": {"min": 0.9}}]
    manifest = {
        "apiVersion": "acceltrial.dev/v1alpha1", "kind": "AcceleratorTrial",
        "metadata": {"name": "t", "namespace": "n"},
        "spec": {
            **make_spec().model_dump(by_alias=True, exclude_none=True, mode="json"),
            "quality": {**QUALITY, "criteria": criteria},
        },
    }  # fmt: skip
    problems = validate_trial(manifest)
    said = [str(p) for p in problems]
    assert any(s.startswith("spec.quality.criteria[0]") for s in said), said


def test_the_documented_quality_spec_is_valid() -> None:
    """docs/quality.md's spec.quality, every field set (the hostile tests' base to break)."""
    assert [str(p) for p in validate_trial(quality_manifest())] == []
