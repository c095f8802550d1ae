"""kstatus' Reconciling and Stalled conditions, phase by phase, next to Ready/Progressing/Degraded.

kstatus (Flux health checks, cli-utils) reads Reconciling=True as InProgress and Stalled=True as
Failed; when neither is present it falls back to Ready. tests/integration/test_kstatus.py checks
the same conditions with cli-utils itself on trials recorded from real runs.
"""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given, settings

from acceltrial.api.actions import UserAction
from acceltrial.api.status import TrialStatus
from tests.unit.test_lifecycle import TICKS, Driver, condition, make_spec


def kstatus(status: TrialStatus) -> tuple[tuple[str, str] | None, tuple[str, str] | None]:
    return condition(status, "Reconciling"), condition(status, "Stalled")


def test_reconciling_while_the_operator_moves_the_trial_on() -> None:
    driver = Driver(make_spec())
    seen: dict[str, object] = {}
    for _ in range(30):
        driver.tick()
        seen.setdefault(driver.status.phase or "", kstatus(driver.status))
        if driver.status.phase == "Promoted":
            break
    assert seen == {
        "Preflight": (("True", "Preflight"), None),
        "Progressing": (("True", "Progressing"), None),
        "Promoting": (("True", "Promoting"), None),
        "BakingIn": (("True", "BakingIn"), None),
        "Promoted": (None, None),
    }
    assert condition(driver.status, "Ready") == ("True", "Promoted")


def test_rolling_back_reconciles_and_rolled_back_is_stalled() -> None:
    driver = Driver(make_spec())
    driver.run_until("Progressing")
    driver.tick()
    driver.tick(outcome="Fail")
    assert driver.status.phase == "RollingBack"
    assert kstatus(driver.status) == (("True", "RollingBack"), None)
    driver.tick(outcome=None)
    assert kstatus(driver.status) == (None, ("True", "RolledBack"))
    stalled = next(c for c in driver.status.conditions or [] if c.type == "Stalled")
    assert driver.status.decision is not None
    assert stalled.message == driver.status.decision.reason


def test_preflight_failure_and_abort_are_stalled() -> None:
    failed = Driver(make_spec())
    failed.tick(outcome=None)
    failed.tick(outcome=None, problems=("baseline Deployment llama3-gpu not found",))
    assert kstatus(failed.status) == (None, ("True", "Failed"))
    aborted = Driver(make_spec())
    aborted.run_until("Progressing")
    aborted.tick(outcome=None, action="abort")
    aborted.tick(outcome=None)
    assert kstatus(aborted.status) == (None, ("True", "Aborted"))


def test_pauses_only_inconclusive_data_is_stalled() -> None:
    driver = Driver(make_spec())
    driver.run_until("Progressing")
    driver.tick()
    driver.tick(outcome="Inconclusive")
    driver.tick(outcome="Inconclusive")
    assert driver.status.pause_reason == "Inconclusive"
    assert kstatus(driver.status) == (None, ("True", "Inconclusive"))
    driver.tick(outcome=None, action="resume")
    assert kstatus(driver.status) == (("True", "Progressing"), None), "resume clears Stalled"
    driver.tick(outcome=None, action="pause")
    assert driver.status.pause_reason == "User"
    assert kstatus(driver.status) == (None, None), "a person's pause: kstatus reads Ready=False"
    assert condition(driver.status, "Ready") == ("False", "Paused")


def test_waiting_for_approval_is_neither_reconciling_nor_stalled() -> None:
    driver = Driver(make_spec(promotion={"mode": "manual"}))
    driver.run_until("Paused")
    assert driver.status.pause_reason == "AwaitingApproval"
    assert kstatus(driver.status) == (None, None)
    assert condition(driver.status, "Ready") == ("False", "Paused")


def test_a_refused_spec_change_stalls_until_it_is_restored() -> None:
    driver = Driver(make_spec())
    driver.run_until("Progressing")
    driver.tick()
    driver.spec = make_spec(analysis={"failureLimit": 5})
    driver.tick()
    assert kstatus(driver.status) == (None, ("True", "SpecChangeRejected"))
    driver.spec = make_spec()
    driver.tick()
    assert kstatus(driver.status) == (("True", "Progressing"), None)


@settings(max_examples=100, deadline=None)
@given(ticks=TICKS)
def test_never_reconciling_and_stalled_at_once(
    ticks: list[tuple[str | None, UserAction | None, int, bool]],
) -> None:
    driver = Driver(make_spec())
    for outcome, action, seconds, available in ticks:
        driver.candidate_available = available
        driver.tick(outcome, action, advance=timedelta(seconds=seconds))  # type: ignore[arg-type]
        reconciling, stalled = kstatus(driver.status)
        assert reconciling is None or stalled is None
        assert (reconciling is not None) == (
            driver.status.phase
            in ("Preflight", "Progressing", "Promoting", "BakingIn", "RollingBack")
            and stalled is None
        )
