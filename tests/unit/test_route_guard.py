"""The trial when the route is not what it wrote: another writer pauses it, naming the writer;
a candidate the gateway refuses ends it with the gateway's reason, routing restored."""

from __future__ import annotations

from datetime import timedelta

from acceltrial.engine.lifecycle import decide
from acceltrial.engine.schedule import measurement_due
from acceltrial.engine.ticks import Measurement, Observation, RestoreRouting, SetWeight, TickResult
from tests.unit.test_lifecycle import ORIGINAL, Driver, condition, make_spec

WRITER = "HTTPRoute serving/llama3 was changed by field manager 'argocd-controller'"


def tick(driver: Driver, **seen: object) -> TickResult:
    """One tick with the routing verdicts the world would observe."""
    driver.now += timedelta(minutes=1)
    due = measurement_due(driver.spec, driver.status, driver.now)
    observation = Observation(
        now=driver.now,
        generation=1,
        routing=ORIGINAL,
        candidate_available=True,
        candidate_available_replicas=1,
        measurement=Measurement("Pass", "errors: pass") if due else None,
        **seen,  # type: ignore[arg-type]
    )
    result = decide(driver.spec, driver.status, observation)
    driver.status = result.status
    driver.history.append(result)
    return result


def progressing_at_first_step() -> Driver:
    driver = Driver(make_spec())
    driver.run_until("Progressing")
    driver.tick()
    assert driver.status.canary_weight == 5
    return driver


def test_another_writer_pauses_the_trial_naming_the_field_manager() -> None:
    driver = progressing_at_first_step()
    result = tick(driver, routing_conflict=WRITER, observed_weight=0)
    assert driver.status.phase == "Paused"
    assert driver.status.pause_reason == "RouteChanged"
    assert condition(driver.status, "RouteChanged") == ("True", "RouteChanged")
    assert "argocd-controller" in (driver.status.message or "")
    assert not [a for a in result.actions if isinstance(a, SetWeight)], "nothing is written"
    assert [(e.reason, WRITER in e.message) for e in result.events] == [("Paused", True)]
    assert condition(driver.status, "Stalled") == ("True", "RouteChanged")


def test_the_trial_stays_paused_while_the_change_stands_even_when_resumed() -> None:
    driver = progressing_at_first_step()
    tick(driver, routing_conflict=WRITER)
    result = tick(driver, routing_conflict=WRITER, action="resume")
    assert driver.status.phase == "Paused"
    assert not [a for a in result.actions if isinstance(a, SetWeight)]
    assert not result.events, "one Event for one conflict"


def test_once_resolved_a_person_resumes_and_the_condition_goes() -> None:
    driver = progressing_at_first_step()
    tick(driver, routing_conflict=WRITER)
    tick(driver, action="resume")
    assert driver.status.phase == "Progressing"
    assert condition(driver.status, "RouteChanged") is None


def test_abort_during_a_conflict_rolls_back() -> None:
    driver = progressing_at_first_step()
    tick(driver, routing_conflict=WRITER)
    tick(driver, routing_conflict=WRITER, action="abort")
    assert driver.status.phase == "RollingBack"
    result = tick(driver, routing_conflict=WRITER)
    assert RestoreRouting() in result.actions


def test_a_refused_candidate_ends_the_trial_with_the_gateways_reason() -> None:
    driver = progressing_at_first_step()
    refused = "gw reports ResolvedRefs=False, reason RefNotPermitted: not allowed"
    tick(driver, route_refused=refused)
    assert driver.status.phase == "RollingBack"
    assert driver.status.decision is not None
    assert "RefNotPermitted" in driver.status.decision.reason
    result = tick(driver)
    assert RestoreRouting() in result.actions
    assert driver.status.phase == "RolledBack"
