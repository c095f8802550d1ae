"""The HTTPRoute a scenario describes as found (scenario keys ``route`` and ``referenceGrant``,
docs/demo.md), and what the demo installs for it.

``route.namespace`` is where the HTTPRoute lives (a shared gateway namespace, say; default: the
trial's); ``route.rules`` are its rules as Gateway API writes them (``name``, ``matches``,
``filters``, ``backendRefs`` with weights and filters). The backendRef naming the baseline
Service stands where the scenario puts it; other Services the rules name are installed in front
of the baseline's pods. A backendRef ``{group: inference.networking.k8s.io, kind: InferencePool,
name: N}`` may stand for the baseline instead: the demo installs the InferencePool ``N`` over the
baseline's pods (``targetPorts`` 8000, no endpoint picker); pools need the real control plane.
For a route in another namespace, ``referenceGrant: true`` (the default) installs the
ReferenceGrant that lets it reach the trial's Services, ``false`` leaves it out.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from acceltrial.api.base import ApiModel, DnsLabel
from acceltrial.engine.candidate import merge_patch

Manifest = dict[str, Any]
GATEWAY = "gateway.networking.k8s.io"
NAMESPACES = "/api/v1/namespaces"
GRANTS = f"/apis/{GATEWAY}/v1beta1/namespaces/{{}}/referencegrants"
ROUTES = f"/apis/{GATEWAY}/v1/namespaces/{{}}/httproutes"
SERVICES = "/api/v1/namespaces/{}/services"
POOLS = "/apis/inference.networking.k8s.io/v1/namespaces/{}/inferencepools"
POOL_GROUP, POOL_KIND = "inference.networking.k8s.io", "InferencePool"


class RouteRule(ApiModel):
    """One HTTPRoute rule, as Gateway API writes it."""

    name: str | None = Field(default=None, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    """The rule's name (spec.rules[].name), by which the trial finds it again."""
    matches: list[Manifest] | None = None
    """The requests the rule takes (paths, headers, ...)."""
    filters: list[Manifest] | None = None
    """The rule's filters."""
    backend_refs: list[Manifest] = Field(min_length=1, max_length=16)
    """Its backends (``name``, ``namespace``, ``port``, ``weight``, ``filters``; ``group`` and
    ``kind`` for an InferencePool)."""


class RouteSpec(ApiModel):
    """The HTTPRoute as the trial finds it."""

    namespace: DnsLabel | None = None
    """Where the HTTPRoute lives; default: the trial's namespace."""
    rules: list[RouteRule] = Field(min_length=1, max_length=16)
    """Its rules, in order."""


def with_route_namespace(trial: Manifest, route: RouteSpec) -> Manifest:
    """The trial pointing at the route where the scenario puts it (when it names no namespace)."""
    routing = (trial["spec"].get("traffic") or {}).get("gatewayapi")
    if route.namespace is None or routing is None or "namespace" in routing["httpRouteRef"]:
        return trial
    patch = {"traffic": {"gatewayapi": {"httpRouteRef": {"namespace": route.namespace}}}}
    return {**trial, "spec": merge_patch(trial["spec"], patch)}


def route_problems(route: RouteSpec, trial: Manifest, grant: bool | None) -> list[str]:
    """What makes the route unusable with the trial, each naming the field and the fix."""
    namespace = trial["metadata"].get("namespace", "default")
    baseline = _baseline_service(trial)
    where = route.namespace or namespace
    problems = []
    traffic = trial["spec"].get("traffic") or {}
    if traffic.get("router") != "gatewayapi":
        return ["route: the trial's traffic.router must be gatewayapi to route through it"]
    ref = ((trial["spec"].get("traffic") or {}).get("gatewayapi") or {}).get("httpRouteRef") or {}
    if ref.get("namespace") not in (None, where):
        problems.append(
            f"route.namespace: {where} but the trial's httpRouteRef names namespace "
            f"{ref['namespace']}; make them the same"
        )
    refs = [r for rule in route.rules for r in rule.backend_refs]
    pools = [r for r in refs if is_pool(r)]
    if any(r.get("group") != POOL_GROUP for r in pools):
        problems.append(f"route.rules: an InferencePool backendRef needs group: {POOL_GROUP}")
    named = any(r.get("name") == baseline and r.get("namespace", where) == namespace for r in refs)
    if not pools and not named:
        hint = f", namespace: {namespace}" if where != namespace else ""
        problems.append(
            f"route.rules: no backendRef to the baseline Service {baseline} in {namespace}; add "
            f"{{name: {baseline}, port: 8000{hint}}} where the baseline stands"
        )
    if grant is not None and where == namespace:
        problems.append(
            "referenceGrant: only a route in another namespace than the trial needs one; "
            "set route.namespace or remove referenceGrant"
        )
    return problems


def route_objects(
    route: RouteSpec, grant: bool | None, trial: Manifest, pod_labels: dict[str, str]
) -> list[tuple[str, Manifest]]:
    """The route's namespace, the Services its rules name besides the baseline's (in front of
    the baseline's pods), the ReferenceGrant if wanted, and the HTTPRoute itself."""
    namespace = trial["metadata"].get("namespace", "default")
    where = route.namespace or namespace
    name = trial["spec"]["traffic"]["gatewayapi"]["httpRouteRef"]["name"]
    objects: list[tuple[str, Manifest]] = []
    if where != namespace:
        objects.append((NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                     "metadata": {"name": where}}))  # fmt: skip
    baseline = _baseline_service(trial)
    pools = {str(r["name"]) for rule in route.rules for r in rule.backend_refs if is_pool(r)}
    others = sorted(
        {
            str(r["name"])
            for rule in route.rules
            for r in rule.backend_refs
            if (r.get("name") != baseline or is_pool(r)) and r.get("namespace", where) == namespace
        }
    )
    for other in others:
        if other in pools:
            objects.append((POOLS.format(namespace), _pool(other, namespace, pod_labels)))
        else:
            objects.append((SERVICES.format(namespace), _service(other, namespace, pod_labels)))
    if where != namespace and grant is not False:
        objects.append((GRANTS.format(namespace), _grant(where, namespace)))
    rules = [rule.model_dump(by_alias=True, exclude_none=True) for rule in route.rules]
    body = {
        "apiVersion": f"{GATEWAY}/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": where},
        "spec": {"parentRefs": [{"name": "inference"}], "rules": rules},
    }
    objects.append((ROUTES.format(where), body))
    return objects


def is_pool(ref: Manifest) -> bool:
    return ref.get("kind") == POOL_KIND


def uses_pools(route: RouteSpec | None) -> bool:
    """Whether the route names an InferencePool (the emulator does not serve the kind)."""
    return route is not None and any(is_pool(r) for rule in route.rules for r in rule.backend_refs)


def _pool(name: str, namespace: str, labels: dict[str, str]) -> Manifest:
    return {
        "apiVersion": f"{POOL_GROUP}/v1",
        "kind": POOL_KIND,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": {"matchLabels": labels}, "targetPorts": [{"number": 8000}]},
    }


def _baseline_service(trial: Manifest) -> str:
    baseline = trial["spec"]["baseline"]
    return str((baseline.get("serviceRef") or baseline["deploymentRef"])["name"])


def _service(name: str, namespace: str, labels: dict[str, str]) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": labels, "ports": [{"name": "http", "port": 8000}]},
    }


def _grant(route_namespace: str, namespace: str) -> Manifest:
    return {
        "apiVersion": f"{GATEWAY}/v1beta1",
        "kind": "ReferenceGrant",
        "metadata": {"name": f"httproutes-from-{route_namespace}", "namespace": namespace},
        "spec": {
            "from": [{"group": GATEWAY, "kind": "HTTPRoute", "namespace": route_namespace}],
            "to": [{"group": "", "kind": "Service"}, {"group": POOL_GROUP, "kind": POOL_KIND}],
        },
    }
