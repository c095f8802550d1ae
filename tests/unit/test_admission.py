"""The operator's own admission of a trial, and the conditions that report it."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import yaml

from acceltrial.engine.admission import INVALID_SPEC, admit
from acceltrial.engine.conditions import set_condition
from tests.conftest import EXAMPLES

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def trial() -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load((EXAMPLES / "llama3-8b-inf2-httproute.yaml").read_text())
    body["metadata"].update({"uid": "0d9c", "resourceVersion": "17", "generation": 1})
    body["status"] = {"phase": "Pending"}
    return body


def test_valid_trial_is_pending(trial: dict[str, Any]) -> None:
    admission = admit(trial, [], generation=1, now=T0)
    assert admission.valid
    ready, reconciling = admission.conditions
    assert (ready.type, ready.status, ready.reason) == ("Ready", "False", "Pending")
    assert ready.observed_generation == 1
    assert (reconciling.type, reconciling.status) == ("Reconciling", "True"), "kstatus: InProgress"


def test_invalid_trial_names_every_problem(trial: dict[str, Any]) -> None:
    bad = copy.deepcopy(trial)
    bad["spec"]["steps"][1]["weight"] = 150
    bad["spec"]["traffic"]["router"] = "alb"
    admission = admit(bad, [], generation=2, now=T0)
    assert not admission.valid
    assert [c.type for c in admission.conditions] == ["Degraded", "Ready", "Stalled"]
    assert all(c.reason == INVALID_SPEC for c in admission.conditions)
    assert "spec.steps[1].weight: must be at most 100" in admission.message
    assert "spec.traffic.router: must be one of" in admission.message


def test_fixing_the_spec_clears_degraded(trial: dict[str, Any]) -> None:
    bad = copy.deepcopy(trial)
    bad["spec"]["steps"] = []
    first = admit(bad, [], generation=1, now=T0)
    second = admit(trial, first.conditions, generation=2, now=T0 + timedelta(minutes=1))
    assert [c.type for c in second.conditions] == ["Ready", "Reconciling"]
    assert second.conditions[0].observed_generation == 2


def test_transition_time_moves_only_when_status_flips() -> None:
    later = T0 + timedelta(minutes=5)
    first = set_condition(
        [], type_="Ready", status="False", reason="A", message="a", generation=1, now=T0
    )
    same = set_condition(
        first, type_="Ready", status="False", reason="B", message="b", generation=2, now=later
    )
    flipped = set_condition(
        same, type_="Ready", status="True", reason="C", message="c", generation=2, now=later
    )
    assert same[0].last_transition_time == T0
    assert same[0].reason == "B"
    assert flipped[0].last_transition_time == later
