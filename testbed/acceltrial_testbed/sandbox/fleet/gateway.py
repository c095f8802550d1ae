"""The fleet's gateway: an HTTPRoute served the way a Gateway API implementation serves it.

Requests spread evenly over the route's rules (the simulated clients ask for every path alike);
within a rule they split over its ``backendRefs`` by weight (default 1), then evenly over each
backend's Ready pods: a Service's, or an InferencePool's (``inference.networking.k8s.io/v1``,
the pods its selector picks; the endpoint picker's choice among them is not played). A
backendRef resolves in its ``namespace`` (default: the route's); one in another namespace needs
a ReferenceGrant there, else its share is answered HTTP 500 (as one to a missing backend or an
unsupported kind is), and one whose backend has no Ready endpoints is answered HTTP 503. The
route's ``status.parents[]`` get ``Accepted`` and ``ResolvedRefs`` conditions with the reasons
the Gateway API defines (``RefNotPermitted``, ``BackendNotFound``, ``InvalidKind``), for the
current ``metadata.generation``.

A rule's ``RequestMirror`` filters copy its requests (``percent`` or ``fraction`` of them, all
when neither is given) to their backend's Ready pods; the gateway discards the copies' answers,
so they load the mirror's pods without serving any user.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from acceltrial.engine.pools import POOL_GROUP, POOL_KIND
from acceltrial.engine.routes import Service, grant_allows
from acceltrial_testbed.sandbox.access import Access, as_access

Manifest = dict[str, Any]
CONTROLLER = "acceltrial.dev/sandbox-gateway"
GROUP = "gateway.networking.k8s.io"


@dataclass(frozen=True)
class Backend:
    """One backendRef of a rule as the gateway resolved it."""

    ref: Manifest
    weight: int
    pods: Sequence[str] = ()
    refused: str | None = None
    """Why the ref is not used (a ResolvedRefs reason), answered 500; None when resolved."""


@dataclass(frozen=True)
class Mirror:
    """A rule's RequestMirror filter as the gateway resolved it."""

    backend: Backend
    percent: float


@dataclass(frozen=True)
class ResolvedRule:
    rule: Manifest
    backends: Sequence[Backend]
    mirrors: Sequence[Mirror] = ()


@dataclass(frozen=True)
class Routed:
    """Requests per second offered to each Ready pod, and answered by the gateway itself."""

    offered: dict[str, float] = field(default_factory=dict)
    mirrored: dict[str, float] = field(default_factory=dict)
    """Copies of requests per second each Ready pod gets from RequestMirror filters."""
    errors: dict[int, float] = field(default_factory=dict)
    """HTTP status -> requests per second the gateway answered without a backend."""


def resolve(
    route: Manifest,
    services: Mapping[str, Manifest],
    pods_of: Any,
    namespace: str,
    grants: Sequence[Manifest],
) -> list[ResolvedRule]:
    """Every rule of ``route`` with its backends resolved. ``services`` and ``pods_of`` (a
    function from a Service to its Ready pods) cover ``namespace``, where the workloads run."""
    route_namespace = route.get("metadata", {}).get("namespace", namespace)
    resolved = []

    def backend(ref: Manifest, weight: int) -> Backend:
        refused = _refusal(ref, route_namespace, namespace, services, grants)
        service = services.get(_key(ref)) if refused is None else None
        return Backend(ref, weight, pods_of(service) if service else (), refused)

    for rule in route.get("spec", {}).get("rules") or []:
        backends = [
            backend(ref, max(0, int(ref.get("weight", 1)))) for ref in rule.get("backendRefs") or []
        ]
        mirrors = [
            Mirror(backend(f["requestMirror"].get("backendRef") or {}, 1), _mirror_percent(f))
            for f in rule.get("filters") or []
            if f.get("type") == "RequestMirror" and f.get("requestMirror")
        ]
        resolved.append(ResolvedRule(rule, backends, mirrors))
    return resolved


def _mirror_percent(rule_filter: Manifest) -> float:
    mirror = rule_filter["requestMirror"]
    if "fraction" in mirror:
        fraction = mirror["fraction"]
        return 100.0 * float(fraction["numerator"]) / float(fraction.get("denominator", 100))
    return float(mirror.get("percent", 100))


def _refusal(
    ref: Manifest,
    route_namespace: str,
    namespace: str,
    services: Mapping[str, Manifest],
    grants: Sequence[Manifest],
) -> str | None:
    pool = ref.get("kind") == POOL_KIND and ref.get("group") == POOL_GROUP
    if not pool and (
        ref.get("kind", "Service") != "Service" or ref.get("group", "") not in ("", "core")
    ):
        return "InvalidKind"
    target = ref.get("namespace", route_namespace)
    kind, group = (POOL_KIND, POOL_GROUP) if pool else ("Service", "")
    service = Service(str(ref.get("name", "")), target, kind, group)
    if target != route_namespace and not grant_allows(grants, route_namespace, service):
        return "RefNotPermitted"
    if target != namespace or _key(ref) not in services:
        return "BackendNotFound"
    return None


def _key(ref: Manifest) -> str:
    """How ``resolve``'s backends are named: a Service by its name, a pool by ``pool_key``."""
    name = str(ref.get("name", ""))
    return pool_key(name) if ref.get("kind") == POOL_KIND else name


def pool_key(name: str) -> str:
    """An InferencePool among ``resolve``'s backends (Services are keyed by their name)."""
    return f"{POOL_KIND}/{name}"


def route_requests(rules: Sequence[ResolvedRule], rps: float, honors_weights: bool) -> Routed:
    """Split ``rps`` over the rules, their backends and the backends' Ready pods. A gateway that
    ignores weights sends each rule's requests to its first backend."""
    routed = Routed()
    if not rules:
        return routed
    for rule in rules:
        backends = list(rule.backends)
        if not honors_weights:
            backends = [Backend(b.ref, 1, b.pods, b.refused) for b in backends[:1]]
        total = sum(b.weight for b in backends)
        for mirror in rule.mirrors:
            copies = rps / len(rules) * mirror.percent / 100
            for pod in mirror.backend.pods if mirror.backend.refused is None else ():
                share = copies / len(mirror.backend.pods)
                routed.mirrored[pod] = routed.mirrored.get(pod, 0.0) + share
        for backend in backends:
            if total == 0 or backend.weight == 0:
                continue
            share = rps / len(rules) * backend.weight / total
            if backend.refused is not None:
                routed.errors[500] = routed.errors.get(500, 0.0) + share
            elif not backend.pods:
                routed.errors[503] = routed.errors.get(503, 0.0) + share
            else:
                for pod in backend.pods:
                    routed.offered[pod] = routed.offered.get(pod, 0.0) + share / len(backend.pods)
    return routed


def route_status(
    route: Manifest, rules: Sequence[ResolvedRule], now: datetime | None = None
) -> list[Manifest]:
    """``status.parents`` as a Gateway API implementation writes them for ``route`` now (the
    transition time kept while a condition's status stays)."""
    generation = route.get("metadata", {}).get("generation", 1)
    refused = [b for rule in rules for b in rule.backends if b.refused is not None]
    if refused:
        first = refused[0]
        resolved = ("False", first.refused or "", _message(first))
    else:
        resolved = ("True", "ResolvedRefs", "all backendRefs resolved")
    wanted = {
        "Accepted": ("True", "Accepted", "the route is attached to the gateway"),
        "ResolvedRefs": resolved,
    }
    previous = _conditions_by_type(route)
    stamp = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    parents = []
    for parent_ref in route.get("spec", {}).get("parentRefs") or []:
        conditions = []
        for type_, (status, reason, message) in wanted.items():
            before = previous.get(type_)
            since = (
                before.get("lastTransitionTime")
                if before and before.get("status") == status
                else None
            )
            conditions.append(
                {
                    "type": type_,
                    "status": status,
                    "reason": reason,
                    "message": message,
                    "observedGeneration": generation,
                    "lastTransitionTime": since or stamp,
                }
            )
        parents.append(
            {"parentRef": parent_ref, "controllerName": CONTROLLER, "conditions": conditions}
        )
    return parents


def _message(backend: Backend) -> str:
    ref = backend.ref
    where = f"{ref.get('namespace')}/" if ref.get("namespace") else ""
    said = {
        "RefNotPermitted": "no ReferenceGrant allows a reference to",
        "BackendNotFound": "no such Service:",
        "InvalidKind": "unsupported backend kind for",
    }[backend.refused or "BackendNotFound"]
    return f"{said} {where}{ref.get('name')}"


def _conditions_by_type(route: Manifest) -> dict[str, Manifest]:
    for parent in (route.get("status") or {}).get("parents") or []:
        if parent.get("controllerName") == CONTROLLER:
            return {c.get("type"): c for c in parent.get("conditions") or []}
    return {}


def status_changed(route: Manifest, parents: list[Manifest]) -> bool:
    """Whether ``parents`` differ from the route's status as the gateway last wrote it."""
    ours = [
        p
        for p in (route.get("status") or {}).get("parents") or []
        if p.get("controllerName") == CONTROLLER
    ]
    return ours != parents


def write_route_status(cluster: Access | str, route: Manifest, parents: list[Manifest]) -> None:
    """Write ``status.parents`` through the status subresource (as the gateway's controller)."""
    meta = route["metadata"]
    path = f"/apis/{GROUP}/v1/namespaces/{meta['namespace']}/httproutes/{meta['name']}/status"
    body = json.dumps({"status": {"parents": parents}}).encode()
    access = as_access(cluster)
    request = urllib.request.Request(
        f"{access.url}{path}?fieldManager=sandbox-gateway",
        data=body,
        method="PATCH",
        headers={"Content-Type": "application/merge-patch+json"},
    )
    try:
        with access.open(request, timeout=5):
            pass
    except urllib.error.HTTPError as error:
        if error.code != 404:  # the route went while we looked: nothing to report on
            raise
