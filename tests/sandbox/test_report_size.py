"""A long trial's report on an API server (both backends; the real kube-apiserver is where the
limit comes from): a ConfigMap's data may hold 1 MiB, which a full timeline with a dozen more
figures a variant passes. The report store writes it thinned to fit; the same report whole is
refused (422, FieldValueTooLong), so the test can fail.

The report is owned by a real AcceleratorTrial: the real plane's garbage collector deletes a
ConfigMap whose owner it cannot find, once the kind is served (another test on the same plane may
have installed the CRD and removed it since)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from kubernetes import config

from acceltrial.api.report import TIMELINE_LIMIT, Point, Report, read_report
from acceltrial.engine.candidate import TrialRef
from acceltrial.kube.calls import KubeError
from acceltrial.kube.gateway import Kube
from acceltrial.providers.reports.configmap import REPORT_MAX_BYTES, ConfigMapReports, fitted
from tests.sandbox.conftest import (
    CONFIGMAPS,
    TRIALS,
    Api,
    Backend,
    Reply,
    configmap,
    eventually,
    example,
)
from tests.unit.test_long_report import run


def long_report() -> Report:
    """12 hours at a 1 m interval, 24 figures a variant, the reasons as long as kept."""
    report = run(TIMELINE_LIMIT, weight_at={}, error_at={})
    more = {f"custom_{i}": 0.123456789012345 for i in range(17)}
    return report.model_copy(update={"timeline": [
        Point.model_validate(p.model_dump() | {"reason": "r" * 1024,
                                               "candidate": p.candidate | more,
                                               "baseline": p.baseline | more})
        for p in report.timeline
    ]})  # fmt: skip


def test_a_long_trials_report_is_written_thinned_where_it_whole_is_refused(
    cluster: Backend, with_crd: Api
) -> None:
    api = with_crd
    kube = Kube(config.new_client_from_config(config_file=str(cluster.kubeconfig)))
    owner = api.post(TRIALS, example()).body["metadata"]["uid"]
    trial = TrialRef("trial", "default", owner)
    report = long_report()

    whole = fitted(report, 10**9)[1]
    assert len(whole.encode()) > 1024 * 1024
    refused = configmap("trial-whole", **{"report.json": whole})
    refused["metadata"]["namespace"] = "default"
    with pytest.raises(KubeError, match="Too long: may not be more than 1048576 bytes") as error:
        kube.apply(refused)
    assert error.value.status == 422

    ConfigMapReports(kube).save(trial, report)

    def read() -> Reply | None:
        # A busy API server may answer the 1 MiB read with a 429 or a 5xx: asked again.
        reply = api.get(f"{CONFIGMAPS}/trial-report")
        return reply if reply.status != 429 and reply.status < 500 else None

    answer = eventually(read, timeout=60)
    assert answer.status == 200, answer.body
    stored = answer.body
    kept = read_report(stored)
    assert kept is not None
    assert len(stored["data"]["report.json"].encode()) <= REPORT_MAX_BYTES
    assert kept.timeline[0].at == report.timeline[0].at, "the whole trial is spanned"
    assert kept.timeline[-1] == report.timeline[-1]
    assert kept.timeline[-1].at - kept.timeline[0].at == timedelta(seconds=10 * 719)
