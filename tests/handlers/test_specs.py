"""A trial's spec is validated once per generation, not on every tick."""

from __future__ import annotations

import copy
from typing import Any

import yaml

from acceltrial.handlers.specs import valid_spec
from tests.conftest import REPO

EXAMPLE = REPO / "examples" / "llama3-8b-inf2-httproute.yaml"


def trial(uid: str, generation: int) -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    body["metadata"] |= {"uid": uid, "generation": generation}
    return body


def test_the_same_generation_is_not_validated_again() -> None:
    body = trial("uid-same", 1)
    spec = valid_spec(body)
    assert spec is not None
    changed = copy.deepcopy(body)
    changed["spec"]["steps"] = "not a list"  # the API server would have bumped the generation
    assert valid_spec(changed) is spec


def test_a_new_generation_is_validated() -> None:
    body = trial("uid-new", 1)
    assert valid_spec(body) is not None
    broken = copy.deepcopy(body)
    broken["metadata"]["generation"] = 2
    broken["spec"]["steps"] = "not a list"
    assert valid_spec(broken) is None
    assert valid_spec(trial("uid-new", 3)) is not None


def test_without_a_generation_every_call_validates() -> None:
    body = trial("uid-none", 1)
    del body["metadata"]["generation"]
    assert valid_spec(body) is not None
    body["spec"]["steps"] = "not a list"
    assert valid_spec(body) is None
