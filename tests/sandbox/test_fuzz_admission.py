"""Fuzzing admission: hostile AcceleratorTrials and TrainingTrials sent to the API server with
their CRD installed (the emulator, and the real control plane when it is built).

Every answer is a creation or a refusal with a Status that says why, never a server error; a
refused trial leaves nothing behind; and `acceltrial validate` agrees with the server: what it
finds valid the server admits, and what the server admits it refuses only for unknown fields
(which the server prunes silently)."""

from __future__ import annotations

import urllib.parse
from typing import Any

import pytest
from hypothesis import given
from hypothesis.strategies import SearchStrategy

from acceltrial.api.validation import validate_trial
from tests.hostile.strategies import FUZZ, TRIED, hostile_manifests, hostile_training_manifests
from tests.sandbox.conftest import TRAINING_TRIALS, TRIALS, Api

pytestmark = pytest.mark.slow


def test_hostile_trials_are_admitted_or_refused_with_a_reason(with_crd: Api) -> None:
    admitted_or_refused(with_crd, TRIALS, "AcceleratorTrial", hostile_manifests())


def test_hostile_training_trials_are_admitted_or_refused_with_a_reason(
    with_training_crd: Api,
) -> None:
    admitted_or_refused(
        with_training_crd, TRAINING_TRIALS, "TrainingTrial", hostile_training_manifests()
    )


def admitted_or_refused(
    api: Api, collection: str, kind: str, manifests: SearchStrategy[Any]
) -> None:
    @FUZZ
    @given(manifests)
    def send(manifest: Any) -> None:
        TRIED["admission"] += 1
        reply = api.post(collection, manifest)
        # Without a kind the server takes the URL's; validate judges it as that kind too.
        absent = isinstance(manifest, dict) and "kind" not in manifest
        problems = validate_trial({**manifest, "kind": kind} if absent else manifest)
        if reply.status == 201:
            name = reply.body["metadata"]["name"]
            assert api.delete(f"{collection}/{urllib.parse.quote(name)}").status == 200
            # kubectl needs apiVersion and kind in a file; the API server takes them from the URL.
            sent_by_url = {"apiVersion", "kind"}
            assert all(
                p.message.startswith("unknown field") or p.path in sent_by_url for p in problems
            ), problems
            return
        assert reply.status in (400, 422), reply
        assert isinstance(reply.body, dict), reply.body
        assert reply.body.get("kind") == "Status", reply.body
        assert reply.body.get("message"), reply.body
        assert api.get(collection).body["items"] == [], "a refused trial left something"
        assert problems, f"validate finds nothing wrong, the server said: {reply.body['message']}"

    send()
