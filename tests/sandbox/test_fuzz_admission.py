"""Fuzzing admission: hostile AcceleratorTrials sent to the API server with the CRD installed
(the emulator, and the real control plane when it is built).

Every answer is a creation or a refusal with a Status that says why, never a server error; a
refused trial leaves nothing behind; and `acceltrial validate` agrees with the server: what it
finds valid the server admits, and what the server admits it refuses only for unknown fields
(which the server prunes silently)."""

from __future__ import annotations

import urllib.parse
from typing import Any

import pytest
from hypothesis import given

from acceltrial.api.validation import validate_trial
from tests.hostile.strategies import FUZZ, TRIED, hostile_manifests
from tests.sandbox.conftest import TRIALS, Api

pytestmark = pytest.mark.slow


def test_hostile_trials_are_admitted_or_refused_with_a_reason(with_crd: Api) -> None:
    @FUZZ
    @given(hostile_manifests())
    def send(manifest: Any) -> None:
        TRIED["admission"] += 1
        reply = with_crd.post(TRIALS, manifest)
        problems = validate_trial(manifest)
        if reply.status == 201:
            name = reply.body["metadata"]["name"]
            assert with_crd.delete(f"{TRIALS}/{urllib.parse.quote(name)}").status == 200
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
        assert with_crd.get(TRIALS).body["items"] == [], "a refused trial left something"
        assert problems, f"validate finds nothing wrong, the server said: {reply.body['message']}"

    send()
