"""Reports in a ConfigMap ``<trial>-report`` (key ``report.json``), owned by the trial so it is
garbage-collected with it, written by server-side apply under the operator's field manager.

The report is updated on every measurement and grows with the trial (a timeline of up to 720
points), so reading and parsing it back each time cost more than anything else a tick reads.
The API server refuses a ConfigMap whose data pass 1 MiB, which 720 points with a dozen figures
a variant reach: a report over :data:`REPORT_MAX_BYTES` is written with its timeline thinned
until it fits (engine/report.py ``thinned``: the whole trial, the newest points as measured).
The process keeps the last report it read or wrote with the ConfigMap's resourceVersion, and
writes with that version as a precondition: a report changed by another writer (a second
replica, a person) makes the write fail with 409 and the next load read it again."""

from __future__ import annotations

import json
import logging
from typing import Any

from acceltrial.api.report import REPORT_KEY, Report, UnreadableReport, read_report, report_name
from acceltrial.api.trial import GROUP, KIND, VERSION
from acceltrial.bounded import BoundedMap
from acceltrial.engine.candidate import TRIAL_LABEL, TrialRef
from acceltrial.engine.report import thinned
from acceltrial.kube.calls import KubeError
from acceltrial.kube.gateway import Kube
from acceltrial.providers.reports.port import ReportChanged

LOG = logging.getLogger(__name__)
KEPT = 4096
"""Trials whose last report the process remembers (the least recently used go first)."""
REPORT_MAX_BYTES = 768 * 1024
"""The most ``report.json`` one write holds, below the API server's 1 MiB for a ConfigMap's data
with room for the rest of the object."""
_KNOWN: BoundedMap[str, tuple[str, Report | None]] = BoundedMap(KEPT)
"""Trial uid -> the report ConfigMap's resourceVersion and the report it holds."""


class ConfigMapReports:
    """A :class:`~acceltrial.providers.reports.port.ReportStore` on ConfigMaps."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube

    def load(self, trial: TrialRef) -> Report | None:
        known = _KNOWN.get(trial.uid)
        if known is not None:
            return known[1]
        config_map = self.kube.config_map(trial.namespace, report_name(trial.name))
        try:
            report = read_report(config_map)
        except UnreadableReport as error:
            # Someone edited it by hand: start a new one rather than fail the trial.
            LOG.warning("report of %s/%s is unreadable (%s); starting anew", trial.namespace,
                        trial.name, error)  # fmt: skip
            report = None
        if config_map is not None:
            _remember(trial.uid, config_map, report)
        return report

    def save(self, trial: TrialRef, report: Report) -> None:
        known = _KNOWN.pop(trial.uid)
        report, text = fitted(report, REPORT_MAX_BYTES)
        manifest = _manifest(trial, text)
        if known is not None:
            manifest["metadata"]["resourceVersion"] = known[0]
        try:
            saved = self.kube.apply(manifest)
        except KubeError as error:
            # Changed since (a report deleted since is simply created again, kube-apiserver
            # ignoring the version of an object that does not exist).
            if known is not None and error.status == 409:
                raise ReportChanged(str(error)) from error
            raise
        _remember(trial.uid, saved, report)


def _remember(uid: str, config_map: dict[str, Any], report: Report | None) -> None:
    version = (config_map.get("metadata") or {}).get("resourceVersion")
    if not version:
        return
    _KNOWN.put(uid, (str(version), report))


def fitted(report: Report, max_bytes: int) -> tuple[Report, str]:
    """The report and its ``report.json`` text, its timeline thinned until the text is at most
    ``max_bytes`` (or one point is left)."""
    text = _text(report)
    while len(text.encode()) > max_bytes and len(report.timeline) > 1:
        fewer = thinned(report.timeline, len(report.timeline) * 3 // 4)
        report = report.model_copy(update={"timeline": fewer})
        text = _text(report)
    return report, text


def _text(report: Report) -> str:
    body = report.model_dump(mode="json", by_alias=True, exclude_none=True)
    return json.dumps(body, indent=1, sort_keys=True)


def _manifest(trial: TrialRef, text: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": report_name(trial.name),
            "namespace": trial.namespace,
            "labels": {TRIAL_LABEL: trial.name},
            "ownerReferences": [
                {
                    "apiVersion": f"{GROUP}/{VERSION}",
                    "kind": KIND,
                    "name": trial.name,
                    "uid": trial.uid,
                    "blockOwnerDeletion": False,
                }
            ],
        },
        "data": {REPORT_KEY: text},
    }
