"""The lifecycle handler's status patch, sent to the emulated API server as kopf sends it (a
JSON merge patch on the status subresource): the stored status becomes exactly the new one,
keys that vanished (at any depth) included."""

from __future__ import annotations

from typing import Any

from acceltrial.api.trial import TRIAL_GVR
from acceltrial.handlers.lifecycle import status_patch
from tests.handlers.conftest import create_trial, trial_spec
from tests.sandbox.conftest import Api

OLD: dict[str, Any] = {
    "phase": "Paused",
    "pauseReason": "Inconclusive",
    "step": 2,
    "canaryWeight": 25,
    "counts": {
        "measurements": 4,
        "failures": 0,
        "inconclusive": 3,
        "consecutiveErrors": 0,
        "passes": 1,
        "thin": 0,
        "lastOutcome": "Inconclusive",
    },
    "message": "too many inconclusive measurements",
}
NEW: dict[str, Any] = {
    "phase": "Progressing",
    "step": 2,
    "canaryWeight": 25,
    "counts": {
        "measurements": 4,
        "failures": 0,
        "inconclusive": 0,
        "consecutiveErrors": 0,
        "passes": 1,
        "thin": 0,
    },
    "message": "resumed by a person",
}


def test_the_stored_status_becomes_exactly_the_new_one(api: Api, namespace: str) -> None:
    create_trial(api, namespace, trial_spec())
    status = f"{TRIAL_GVR.collection_path(namespace)}/llama3-inf2/status"
    assert api.merge(status, {"status": OLD}).status == 200
    assert api.get(status).body["status"] == OLD

    patch = status_patch(OLD, NEW)
    assert patch["pauseReason"] is None
    assert patch["counts"] == {"inconclusive": 0, "lastOutcome": None}
    assert "step" not in patch, "unchanged keys are not sent"
    assert api.merge(status, {"status": patch}).status == 200
    assert api.get(status).body["status"] == NEW
