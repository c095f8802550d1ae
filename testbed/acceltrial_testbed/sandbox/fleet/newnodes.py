"""Accelerator exporters on nodes that appear after the start (launched by a Karpenter NodePool
or a managed node group in the sandbox), as the exporters' DaemonSets would schedule a pod on
each new node, and Prometheus told about their targets as the Prometheus Operator would."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping
from typing import Any

from acceltrial_testbed.sandbox.fleet.exporter import Fleet
from acceltrial_testbed.sandbox.fleet.serving import serve_exporters
from acceltrial_testbed.sandbox.prometheus import PrometheusServer

_POLL_SECONDS = 1.0


class NewNodeExporters:
    """Watches the fleet's nodes on a thread; see the module docstring."""

    def __init__(
        self,
        fleet: Fleet,
        prometheus: PrometheusServer,
        stack: contextlib.ExitStack,
        jobs: list[dict[str, Any]],
    ) -> None:
        self.fleet = fleet
        self.prometheus = prometheus
        self.stack = stack
        self.jobs = jobs
        self._served = {(e.node.name, e.daemonset.name) for e in fleet.node_exporters()}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="new-node-exporters", daemon=True)

    def start(self) -> NewNodeExporters:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(_POLL_SECONDS):
            with contextlib.suppress(OSError):  # the cluster or Prometheus busy: next time
                self._follow()

    def _follow(self) -> None:
        new = [
            e
            for e in self.fleet.node_exporters()
            if (e.node.name, e.daemonset.name) not in self._served
        ]
        if not new:
            return
        self.jobs = _merged(self.jobs, serve_exporters(new, self.stack))
        self.prometheus.reload(self.jobs)
        self._served |= {(e.node.name, e.daemonset.name) for e in new}


def _merged(jobs: list[dict[str, Any]], more: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Jobs with the same name (one per ServiceMonitor) gain the new targets."""
    by_name: dict[str, dict[str, Any]] = {job["job_name"]: dict(job) for job in jobs}
    for job in more:
        known: Mapping[str, Any] | None = by_name.get(job["job_name"])
        if known is None:
            by_name[job["job_name"]] = job
        else:
            configs = [*known["static_configs"], *job["static_configs"]]
            by_name[job["job_name"]] = {**known, "static_configs": configs}
    return list(by_name.values())
