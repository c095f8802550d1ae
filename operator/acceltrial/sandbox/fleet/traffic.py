"""Where requests go: the fleet's entry point, resolved against what the cluster holds now.

Like a Gateway API implementation, an HTTPRoute entry splits requests over the rule's
``backendRefs`` by weight (default 1), then evenly over each backend Service's Ready pods. A
Service entry (the ``replicas`` router: the candidate's pods join the baseline's Service) spreads
them evenly over its Ready pods. A gateway that ignores weights sends everything to the first
backend: the no-traffic scenario's broken gateway.
"""

from __future__ import annotations

import json
import urllib.error
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from acceltrial.sandbox.access import Access, as_access

Manifest = dict[str, Any]


@dataclass(frozen=True)
class Entry:
    """Where clients send requests: an HTTPRoute, or a Service when there is none."""

    namespace: str
    route: str | None = None
    service: str | None = None
    rule_index: int = 0
    honors_weights: bool = True


@dataclass(frozen=True)
class ClusterView:
    """The objects traffic depends on, as listed from the API server."""

    pods: Sequence[Manifest] = ()
    services: Mapping[str, Manifest] = field(default_factory=dict)
    route: Manifest | None = None


def read_cluster(cluster: Access | str, entry: Entry) -> ClusterView:
    """List the entry namespace's pods and Services and read its HTTPRoute."""
    access = as_access(cluster)
    base = f"/api/v1/namespaces/{entry.namespace}"
    pods = _get(access, f"{base}/pods").get("items", [])
    services = {s["metadata"]["name"]: s for s in _get(access, f"{base}/services").get("items", [])}
    route = None
    if entry.route is not None:
        path = f"/apis/gateway.networking.k8s.io/v1/namespaces/{entry.namespace}/httproutes"
        route = _get(access, f"{path}/{entry.route}") or None
    return ClusterView(pods, services, route)


def read_nodes(cluster: Access | str) -> list[Manifest]:
    """The cluster's Nodes (the accelerator exporters run one pod on each)."""
    items: list[Manifest] = _get(as_access(cluster), "/api/v1/nodes").get("items", [])
    return items


def _get(access: Access, path: str) -> Manifest:
    try:
        with access.open(path, timeout=5) as reply:
            result: Manifest = json.loads(reply.read())
            return result
    except urllib.error.HTTPError as error:
        if error.code == 404:
            return {}
        raise


def split(view: ClusterView, entry: Entry, rps: float) -> dict[str, float]:
    """Requests per second offered to each Ready pod (by name)."""
    if entry.route is not None:
        return _by_route(view, entry, rps)
    service = view.services.get(entry.service or "")
    return _evenly(_backing_pods(view, service), rps)


def _by_route(view: ClusterView, entry: Entry, rps: float) -> dict[str, float]:
    rules = (view.route or {}).get("spec", {}).get("rules") or []
    if entry.rule_index >= len(rules):
        return {}
    refs = rules[entry.rule_index].get("backendRefs") or []
    if not entry.honors_weights:
        refs = [{**refs[0], "weight": 1}] if refs else []
    weights = [max(0, int(ref.get("weight", 1))) for ref in refs]
    total = sum(weights)
    offered: dict[str, float] = {}
    for ref, weight in zip(refs, weights, strict=True):
        if total == 0 or weight == 0:
            continue
        pods = _backing_pods(view, view.services.get(ref.get("name", "")))
        for pod, share in _evenly(pods, rps * weight / total).items():
            offered[pod] = offered.get(pod, 0.0) + share
    return offered


def _backing_pods(view: ClusterView, service: Manifest | None) -> list[str]:
    if service is None:
        return []
    selector: Mapping[str, str] = service.get("spec", {}).get("selector") or {}
    if not selector:
        return []
    return [
        pod["metadata"]["name"]
        for pod in view.pods
        if ready(pod) and selector.items() <= (pod["metadata"].get("labels") or {}).items()
    ]


def _evenly(pods: Sequence[str], rps: float) -> dict[str, float]:
    return {pod: rps / len(pods) for pod in pods} if pods else {}


def ready(pod: Manifest) -> bool:
    if pod.get("metadata", {}).get("deletionTimestamp"):
        return False
    conditions = pod.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
