"""Writing a trial's report: the ``<trial>-report`` ConfigMap each time, S3 when the engine's
rules say so (engine/report.py: the GitOps manifests once promoted, the upload once ended)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from acceltrial.api.report import Report
from acceltrial.api.status import TrialStatus
from acceltrial.engine.candidate import TrialRef
from acceltrial.engine.gitops import committable
from acceltrial.engine.metrics import Variant
from acceltrial.engine.report import ReportInputs, gitops_due, update_report, upload_due
from acceltrial.engine.ticks import Measurement
from acceltrial.handlers.snapshot import TickSnapshot
from acceltrial.providers.reports.configmap import ConfigMapReports
from acceltrial.providers.reports.port import ReportChanged
from acceltrial.providers.reports.s3 import S3Reports
from acceltrial.providers.routing.port import Router


def write_report(
    snapshot: TickSnapshot,
    router: Router,
    status: TrialStatus,
    *,
    measurement: Measurement | None,
    measured_pods: dict[Variant, int] | None,
    now: datetime,
) -> None:
    """Bring the ``<trial>-report`` ConfigMap up to date with this tick."""
    store = ConfigMapReports(snapshot.kube)
    inputs = ReportInputs(
        spec=snapshot.spec,
        status=status,
        trial=snapshot.trial,
        now=now,
        measurement=measurement,
        # Pods serving when measured, not after this tick's actions scaled or removed them.
        replicas=measured_pods if measurement else None,
        price_sources={v: r.price_source for v, r in snapshot.resources.items()},
        gitops=gitops_manifests(snapshot, router, status) if gitops_due(status) else None,
    )
    try:
        report = _updated(store, snapshot.trial, inputs)
    except ReportChanged:  # written by someone else since: build on theirs
        report = _updated(store, snapshot.trial, inputs)
    destination = snapshot.spec.report.s3 if snapshot.spec.report else None
    if destination is not None and upload_due(status):
        S3Reports().upload(destination, snapshot.trial, report)


def _updated(store: ConfigMapReports, trial: TrialRef, inputs: ReportInputs) -> Report:
    """The stored report with this tick added, saved."""
    report = update_report(store.load(trial), inputs)
    store.save(trial, report)
    return report


def gitops_manifests(snapshot: TickSnapshot, router: Router, status: TrialStatus) -> dict[str, Any]:
    """What to commit after promotion so Git matches the cluster (else a GitOps tool would
    put the old weights back, or scale the baseline up again): the candidate Deployment and
    Service, the route, the re-targeted autoscaler and the baseline at zero, as they are now,
    after this tick's actions (read afresh, not from the snapshot)."""
    kube = snapshot.kube
    namespace, name = snapshot.namespace, snapshot.candidate_name
    hpa = status.original.hpa if status.original else None
    found = {
        "deployment": kube.deployment(namespace, name),
        "service": kube.service(namespace, name),
        "horizontalPodAutoscaler": hpa and kube.autoscaler(namespace, hpa.name),
        "baselineDeployment": kube.deployment(namespace, snapshot.baseline_name),
        **router.committed(),
    }
    manifests = {key: committable(obj) for key, obj in found.items() if obj}
    if hpa is not None and "deployment" in manifests:
        # The autoscaler owns the replica count; a count in Git would fight it.
        manifests["deployment"]["spec"].pop("replicas", None)
    return manifests
