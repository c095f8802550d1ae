"""The report writer against the emulated API server: the ``<trial>-report`` ConfigMap, owned
by the trial, grows by one timeline point per measurement and holds the GitOps manifests once
the trial is promoted; the CLI and the demo read it back with the same reader."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from acceltrial.api.report import REPORT_KEY, read_report, report_name
from acceltrial.api.status import CriterionResult, Decision, SampleCounts, TrialStatus
from acceltrial.engine.candidate import TrialRef
from acceltrial.engine.ticks import Measurement
from acceltrial.handlers.report_writer import write_report
from acceltrial.handlers.snapshot import TickSnapshot
from acceltrial.handlers.world import TrialWorld
from acceltrial.kube.gateway import Kube
from acceltrial.providers.routing.port import Router
from tests.handlers.conftest import RecordingClient, create_trial, trial_spec
from tests.sandbox.conftest import Api

NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


def measurement() -> Measurement:
    result = CriterionResult(
        criterion="errors", step=1, weight=5, verdict="Pass", candidate=0.0,
        samples=SampleCounts(baseline=3, candidate=3), reason="0 <= 0.01", at=NOW,
    )  # fmt: skip
    observed = {"baseline": {"requests_per_second": 6.0}, "candidate": {"requests_per_second": 0.3}}
    return Measurement("Pass", "every criterion passed", (result,), observed=observed)


def report_of_a_new_trial(
    api: Api, kube: Kube, namespace: str
) -> tuple[TrialRef, TickSnapshot, Router, str]:
    """A new trial, a tick's snapshot and router, and the path of its report ConfigMap."""
    spec = trial_spec("gatewayapi")
    trial = create_trial(api, namespace, spec)
    router = TrialWorld(kube, spec, trial).router
    config_map = f"/api/v1/namespaces/{namespace}/configmaps/{report_name(trial.name)}"
    return trial, TickSnapshot(kube, spec, trial), router, config_map


def test_each_measurement_adds_a_point_and_the_promoted_report_lists_what_to_commit(
    api: Api, kube: Kube, namespace: str
) -> None:
    trial, snapshot, router, config_map = report_of_a_new_trial(api, kube, namespace)
    progressing = TrialStatus(phase="Progressing", step=1, canary_weight=5)

    for _ in range(2):
        write_report(snapshot, router, progressing, measurement=measurement(),
                     measured_pods={"baseline": 2, "candidate": 1}, now=NOW)  # fmt: skip
    stored = api.get(config_map).body
    report = read_report(stored)
    assert report is not None
    assert [p.weight for p in report.timeline] == [5, 5]
    assert report.timeline[0].baseline["requests_per_second"] == 6.0
    assert report.gitops is None
    assert stored["metadata"]["ownerReferences"][0]["uid"] == trial.uid, "deleted with the trial"

    decision = Decision(verdict="promote", reason="every step and the bake passed",
                        reason_code="Promoted", at=NOW)  # fmt: skip
    promoted = TrialStatus(phase="Promoted", step=2, canary_weight=100, decision=decision)
    write_report(snapshot, router, promoted, measurement=None, measured_pods=None, now=NOW)
    report = read_report(api.get(config_map).body)
    assert report is not None
    assert report.decision is not None
    assert report.decision.reason_code == "Promoted"
    assert len(report.timeline) == 2, "no measurement, no point"
    assert report.gitops is not None
    assert {"baselineDeployment", "httpRoute"} <= set(report.gitops)


def test_the_report_is_read_back_once_and_a_change_by_another_writer_is_kept(
    api: Api, kube: Kube, recorder: RecordingClient, namespace: str
) -> None:
    _, snapshot, router, config_map = report_of_a_new_trial(api, kube, namespace)
    progressing = TrialStatus(phase="Progressing", step=1, canary_weight=5)

    def measured() -> None:
        write_report(snapshot, router, progressing, measurement=measurement(),
                     measured_pods={"baseline": 2, "candidate": 1}, now=NOW)  # fmt: skip

    measured()
    recorder.sent.clear()
    measured()
    measured()
    assert recorder.count("GET", config_map) == 0, "this process wrote it: nothing to read back"

    # Another writer (a second replica) adds a point of its own in between.
    stored = api.get(config_map).body
    theirs = read_report(stored)
    assert theirs is not None
    extra = theirs.timeline[0].model_copy(update={"weight": 25})
    changed = theirs.model_copy(update={"timeline": [*theirs.timeline, extra]})
    body = changed.model_dump(mode="json", by_alias=True, exclude_none=True)
    patch = {"data": {REPORT_KEY: json.dumps(body)}}
    assert api.merge(config_map, patch).status == 200

    measured()
    report = read_report(api.get(config_map).body)
    assert report is not None
    assert [p.weight for p in report.timeline] == [5, 5, 5, 25, 5], "their point kept, ours added"


def test_a_report_deleted_by_someone_comes_back_whole(api: Api, kube: Kube, namespace: str) -> None:
    _, snapshot, router, config_map = report_of_a_new_trial(api, kube, namespace)
    progressing = TrialStatus(phase="Progressing", step=1, canary_weight=5)
    for _ in range(2):
        write_report(snapshot, router, progressing, measurement=measurement(),
                     measured_pods={"baseline": 2, "candidate": 1}, now=NOW)  # fmt: skip
    assert api.delete(config_map).status == 200
    write_report(snapshot, router, progressing, measurement=measurement(),
                 measured_pods={"baseline": 2, "candidate": 1}, now=NOW)  # fmt: skip
    report = read_report(api.get(config_map).body)
    assert report is not None
    # As kube-apiserver does (checked on the real one): an apply carrying the resourceVersion of
    # an object that no longer exists creates it.
    assert [p.weight for p in report.timeline] == [5, 5, 5], "the history the operator kept"
