"""The report writer against the emulated API server: the ``<trial>-report`` ConfigMap, owned
by the trial, grows by one timeline point per measurement and holds the GitOps manifests once
the trial is promoted; the CLI and the demo read it back with the same reader."""

from __future__ import annotations

from datetime import UTC, datetime

from acceltrial.api.report import read_report, report_name
from acceltrial.api.status import CriterionResult, Decision, SampleCounts, TrialStatus
from acceltrial.engine.lifecycle import Measurement
from acceltrial.handlers.report_writer import write_report
from acceltrial.handlers.snapshot import TickSnapshot
from acceltrial.handlers.world import TrialWorld
from acceltrial.kube.gateway import Kube
from tests.handlers.conftest import create_trial, trial_spec
from tests.sandbox.conftest import Api

NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


def measurement() -> Measurement:
    result = CriterionResult(
        criterion="errors", step=1, weight=5, verdict="Pass", candidate=0.0,
        samples=SampleCounts(baseline=3, candidate=3), reason="0 <= 0.01", at=NOW,
    )  # fmt: skip
    observed = {"baseline": {"requests_per_second": 6.0}, "candidate": {"requests_per_second": 0.3}}
    return Measurement("Pass", "every criterion passed", (result,), observed=observed)


def test_each_measurement_adds_a_point_and_the_promoted_report_lists_what_to_commit(
    api: Api, kube: Kube, namespace: str
) -> None:
    spec = trial_spec("gatewayapi")
    trial = create_trial(api, namespace, spec)
    router = TrialWorld(kube, spec, trial).router
    snapshot = TickSnapshot(kube, spec, trial)
    progressing = TrialStatus(phase="Progressing", step=1, canary_weight=5)
    config_map = f"/api/v1/namespaces/{namespace}/configmaps/{report_name(trial.name)}"

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
