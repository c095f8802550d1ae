"""Scrape configs as the Prometheus Operator generates them for a ServiceMonitor endpoint.

The Operator turns a ServiceMonitor into a job with Kubernetes endpoint discovery and
``relabel_configs`` that give each target the labels ``namespace``, ``service``, ``pod``,
``container``, ``endpoint`` and ``job`` (from discovery's ``__meta_kubernetes_*`` labels) and
``instance`` (the address), and ``honor_labels`` from the endpoint's ``honorLabels``. The sandbox
knows its targets up front, so it lists them in ``static_configs`` carrying the same
``__meta_kubernetes_*`` labels discovery would, and real Prometheus applies the Operator's
relabelling, including the ``exported_*`` renaming of clashing labels when ``honor_labels`` is
false.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

_APP_LABEL = "app_kubernetes_io_name"


@dataclass(frozen=True)
class EndpointTarget:
    """One address behind the monitored Service, and the pod that serves it."""

    address: str
    """host:port to scrape."""
    pod: str
    node: str
    container: str


@dataclass(frozen=True)
class ServiceMonitor:
    """A ServiceMonitor selecting one Service by ``app.kubernetes.io/name``, one endpoint."""

    namespace: str
    service: str
    port: str = "metrics"
    honor_labels: bool = False


def scrape_job(monitor: ServiceMonitor, targets: Sequence[EndpointTarget]) -> dict[str, Any]:
    """The job the Operator writes for ``monitor``'s first endpoint, over ``targets``."""
    return {
        "job_name": f"serviceMonitor/{monitor.namespace}/{monitor.service}/0",
        "honor_labels": monitor.honor_labels,
        "honor_timestamps": True,
        "static_configs": [
            {"targets": [target.address], "labels": _discovered(monitor, target)}
            for target in targets
        ],
        "relabel_configs": _relabelling(monitor),
    }


def _discovered(monitor: ServiceMonitor, target: EndpointTarget) -> dict[str, str]:
    """The ``__meta_kubernetes_*`` labels endpoints discovery attaches to ``target``."""
    meta = "__meta_kubernetes_"
    return {
        f"{meta}namespace": monitor.namespace,
        f"{meta}service_name": monitor.service,
        f"{meta}service_label_{_APP_LABEL}": monitor.service,
        f"{meta}service_labelpresent_{_APP_LABEL}": "true",
        f"{meta}endpoint_port_name": monitor.port,
        f"{meta}endpoint_ready": "true",
        f"{meta}endpoint_address_target_kind": "Pod",
        f"{meta}endpoint_address_target_name": target.pod,
        f"{meta}pod_name": target.pod,
        f"{meta}pod_container_name": target.container,
        f"{meta}pod_node_name": target.node,
        f"{meta}pod_phase": "Running",
    }


def _relabelling(monitor: ServiceMonitor) -> list[dict[str, Any]]:
    meta = "__meta_kubernetes_"
    address = [f"{meta}endpoint_address_target_kind", f"{meta}endpoint_address_target_name"]
    return [
        {"source_labels": ["job"], "target_label": "__tmp_prometheus_job_name"},
        {
            "action": "keep",
            "source_labels": [
                f"{meta}service_label_{_APP_LABEL}",
                f"{meta}service_labelpresent_{_APP_LABEL}",
            ],
            "regex": f"({monitor.service});true",
        },
        {
            "action": "keep",
            "source_labels": [f"{meta}endpoint_port_name"],
            "regex": monitor.port,
        },
        {
            "source_labels": address,
            "separator": ";",
            "regex": "Node;(.*)",
            "replacement": "${1}",
            "target_label": "node",
        },
        {
            "source_labels": address,
            "separator": ";",
            "regex": "Pod;(.*)",
            "replacement": "${1}",
            "target_label": "pod",
        },
        {"source_labels": [f"{meta}namespace"], "target_label": "namespace"},
        {"source_labels": [f"{meta}service_name"], "target_label": "service"},
        {"source_labels": [f"{meta}pod_name"], "target_label": "pod"},
        {"source_labels": [f"{meta}pod_container_name"], "target_label": "container"},
        {"action": "drop", "source_labels": [f"{meta}pod_phase"], "regex": "(Failed|Succeeded)"},
        {"source_labels": [f"{meta}service_name"], "target_label": "job", "replacement": "${1}"},
        {"target_label": "endpoint", "replacement": monitor.port},
        {
            "source_labels": ["__address__"],
            "target_label": "__tmp_hash",
            "modulus": 1,
            "action": "hashmod",
        },
        {"source_labels": ["__tmp_hash"], "regex": "0", "action": "keep"},
    ]
