"""Reports in a ConfigMap ``<trial>-report`` (key ``report.json``), owned by the trial so it is
garbage-collected with it, written by server-side apply under the operator's field manager."""

from __future__ import annotations

import json
import logging

from acceltrial.api.report import REPORT_KEY, Report, UnreadableReport, read_report, report_name
from acceltrial.api.trial import GROUP, KIND, VERSION
from acceltrial.engine.candidate import TRIAL_LABEL, TrialRef
from acceltrial.kube.gateway import Kube

LOG = logging.getLogger(__name__)


class ConfigMapReports:
    """A :class:`~acceltrial.providers.reports.port.ReportStore` on ConfigMaps."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube

    def load(self, trial: TrialRef) -> Report | None:
        config_map = self.kube.config_map(trial.namespace, report_name(trial.name))
        try:
            return read_report(config_map)
        except UnreadableReport as error:
            # Someone edited it by hand: start a new one rather than fail the trial.
            LOG.warning("report of %s/%s is unreadable (%s); starting anew", trial.namespace,
                        trial.name, error)  # fmt: skip
            return None

    def save(self, trial: TrialRef, report: Report) -> None:
        body = report.model_dump(mode="json", by_alias=True, exclude_none=True)
        self.kube.apply(
            {
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
                "data": {REPORT_KEY: json.dumps(body, indent=1, sort_keys=True)},
            }
        )
