"""A tick handed a trial older than this operator's own last status write for it (kopf's watch
behind a busy API server) reads the trial afresh before deciding, and only then: a tick handed
the trial as written reads nothing more. Before, such a tick decided again from the old state
and its merge patch, computed against the old status, mixed old and new fields (at 1,000 trials
on the real API server: a phase of Preflight beside the step and message of a running trial)."""

from __future__ import annotations

from typing import Any

import kopf
import pytest

from acceltrial.api.trial import TRIAL_GVR
from acceltrial.handlers import lifecycle
from acceltrial.kube.gateway import Kube
from tests.handlers.conftest import RecordingClient, create_trial, trial_spec
from tests.sandbox.conftest import Api


def tick(kube: Kube, trial: dict[str, Any]) -> None:
    memo = kopf.Memo()
    memo.kube = kube
    lifecycle.tick(body=kopf.Body(trial), memo=memo, trials_by_baseline={})


def test_a_tick_handed_a_trial_from_before_its_own_last_write_reads_it_afresh(
    api: Api, kube: Kube, recorder: RecordingClient, namespace: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setattr(kopf, "event", lambda *_, **__: None)  # no kopf event poster here
    create_trial(api, namespace, trial_spec())
    path = f"{TRIAL_GVR.collection_path(namespace)}/llama3-inf2"
    before_any_write = api.get(path).body

    tick(kube, before_any_write)
    written = api.get(path).body
    assert written["status"]["phase"], "the first tick wrote a status"

    recorder.sent.clear()
    tick(kube, before_any_write)  # kopf's copy has not caught up with that write
    assert recorder.count("GET", path) == 1, recorder.sent

    recorder.sent.clear()
    tick(kube, api.get(path).body)  # kopf's copy holds the last write
    assert recorder.count("GET", path) == 0, "a current copy is trusted"
