"""Where requests go: the fleet's entry point, resolved against what the cluster holds now.

An HTTPRoute entry is served as a Gateway API implementation serves it (``gateway``: every rule,
backendRef namespaces and ReferenceGrants, 500 and 503 answered by the gateway). A
Service entry (the ``replicas`` router: the candidate's pods join the baseline's Service) spreads
them evenly over its Ready pods. A gateway that ignores weights sends everything to the first
backend: the no-traffic scenario's broken gateway.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from acceltrial_testbed.sandbox.access import Access, as_access
from acceltrial_testbed.sandbox.fleet.gateway import (
    ResolvedRule,
    Routed,
    pool_key,
    resolve,
    route_requests,
)

Manifest = dict[str, Any]


@dataclass(frozen=True)
class Entry:
    """Where clients send requests: an HTTPRoute, or a Service when there is none."""

    namespace: str
    route: str | None = None
    service: str | None = None
    honors_weights: bool = True
    route_namespace: str | None = None
    """Where the HTTPRoute is, when not with the workloads (a shared gateway namespace)."""


@dataclass(frozen=True)
class ClusterView:
    """The objects traffic depends on, as listed from the API server."""

    pods: Sequence[Manifest] = ()
    services: Mapping[str, Manifest] = field(default_factory=dict)
    route: Manifest | None = None
    grants: Sequence[Manifest] = ()
    """ReferenceGrants of the workloads' namespace."""
    pools: Mapping[str, Manifest] = field(default_factory=dict)
    """InferencePools (v1) of the workloads' namespace, by name."""


POOLS = "/apis/inference.networking.k8s.io/v1"


def read_cluster(cluster: Access | str, entry: Entry) -> ClusterView:
    """List the entry namespace's pods and Services and read its HTTPRoute."""
    access = as_access(cluster)
    base = f"/api/v1/namespaces/{entry.namespace}"
    pods = _get(access, f"{base}/pods").get("items", [])
    services = {s["metadata"]["name"]: s for s in _get(access, f"{base}/services").get("items", [])}
    route: Manifest | None = None
    grants: list[Manifest] = []
    pools: dict[str, Manifest] = {}
    if entry.route is not None:
        gateway = "/apis/gateway.networking.k8s.io"
        where = entry.route_namespace or entry.namespace
        route = _get(access, f"{gateway}/v1/namespaces/{where}/httproutes/{entry.route}") or None
        listed = _get(access, f"{gateway}/v1beta1/namespaces/{entry.namespace}/referencegrants")
        grants = listed.get("items", [])
        if route is not None and names_pools(route):  # a fifth request only where needed
            found = _get(access, f"{POOLS}/namespaces/{entry.namespace}/inferencepools")
            pools = {pool["metadata"]["name"]: pool for pool in found.get("items", [])}
    return ClusterView(pods, services, route, grants, pools)


def names_pools(route: Manifest) -> bool:
    rules = route.get("spec", {}).get("rules") or []
    return any(
        r.get("kind") == "InferencePool" for rule in rules for r in rule.get("backendRefs") or []
    )


@dataclass(frozen=True)
class ClusterReading:
    """Every namespace's pods, Services, HTTPRoutes and ReferenceGrants as watched at one moment
    (by namespace): what many entries' views are cut from."""

    pods: Mapping[str, Sequence[Manifest]]
    services: Mapping[str, Sequence[Manifest]]
    routes: Mapping[str, Sequence[Manifest]]
    grants: Mapping[str, Sequence[Manifest]]
    pools: Mapping[str, Sequence[Manifest]] = field(default_factory=dict)

    def view(self, entry: Entry) -> ClusterView:
        """What :func:`read_cluster` would have read for ``entry`` at that moment."""
        route: Manifest | None = None
        if entry.route is not None:
            where = entry.route_namespace or entry.namespace
            named = (r for r in self.routes.get(where, ()) if r["metadata"]["name"] == entry.route)
            route = next(named, None)
        return ClusterView(
            pods=self.pods.get(entry.namespace, ()),
            services={s["metadata"]["name"]: s for s in self.services.get(entry.namespace, ())},
            route=route,
            grants=self.grants.get(entry.namespace, ()) if entry.route is not None else (),
            pools={p["metadata"]["name"]: p for p in self.pools.get(entry.namespace, ())},
        )


def by_namespace(items: Sequence[Manifest]) -> dict[str, list[Manifest]]:
    grouped: dict[str, list[Manifest]] = {}
    for item in items:
        grouped.setdefault(item["metadata"].get("namespace", ""), []).append(item)
    return grouped


def read_nodes(cluster: Access | str) -> list[Manifest]:
    """The cluster's Nodes (the accelerator exporters run one pod on each)."""
    items: list[Manifest] = _get(as_access(cluster), "/api/v1/nodes").get("items", [])
    return items


def _get(access: Access, path: str) -> Manifest:
    status, body = access.get(path, timeout=5)
    if status == 404:
        return {}
    if status >= 400:
        raise OSError(f"GET {path}: HTTP {status}: {body[:200]!r}")
    result: Manifest = json.loads(body)
    return result


def split(view: ClusterView, entry: Entry, rps: float) -> dict[str, float]:
    """Requests per second offered to each Ready pod (by name)."""
    return routed(view, entry, rps).offered


def routed(view: ClusterView, entry: Entry, rps: float) -> Routed:
    """Requests per second offered to each Ready pod, and those the gateway answers itself."""
    if entry.route is not None:
        if view.route is None:
            return Routed()
        return route_requests(resolved_rules(view, entry), rps, entry.honors_weights)
    service = view.services.get(entry.service or "")
    return Routed(_evenly(_backing_pods(view, service), rps))


def resolved_rules(view: ClusterView, entry: Entry) -> list[ResolvedRule]:
    """The entry route's rules as the gateway resolves them against ``view``."""
    if view.route is None:
        return []
    return resolve(
        view.route,
        {**view.services, **{pool_key(name): pool for name, pool in view.pools.items()}},
        lambda s: _backing_pods(view, s),
        entry.namespace,
        view.grants,
    )


def _backing_pods(view: ClusterView, service: Manifest | None) -> list[str]:
    if service is None:
        return []
    spec = service.get("spec", {})
    # A Service's selector, or an InferencePool's matchLabels: the pods either takes.
    selector: Mapping[str, str] = spec.get("selector") or {}
    if service.get("kind") == "InferencePool":
        selector = (spec.get("selector") or {}).get("matchLabels") or {}
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
