"""The Gateway API router as a trial's spec configures it: which route, which rules, which
backends in which namespaces: the baseline's Service and the candidate's, or, where the route
sends the baseline's traffic to an InferencePool selecting its pods, the baseline's pool and a
candidate pool (providers/routing/pools.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from acceltrial.api.spec import TrialSpec
from acceltrial.engine.candidate import TrialRef, candidate_labels, candidate_name
from acceltrial.engine.pools import (
    ALPHA_POOL_GROUP,
    POOL_GROUP,
    POOL_KIND,
    baseline_pool_name,
    pool_refs,
)
from acceltrial.engine.routes import RouteShape, Service
from acceltrial.kube.gateway import Kube, Manifest
from acceltrial.providers.routing.gatewayapi import GatewayApiRouter
from acceltrial.providers.routing.pools import PoolRouter
from acceltrial.providers.routing.port import Router


def gateway_router(
    kube: Kube,
    spec: TrialSpec,
    trial: TrialRef,
    baseline_service: str,
    baseline: Callable[[], Manifest | None],
) -> Router:
    """The router for ``spec.traffic.gatewayapi`` (which must be set); ``baseline`` reads the
    baseline Deployment (only for a route that names InferencePools)."""
    routing = spec.traffic.gatewayapi
    assert routing is not None
    namespace = routing.http_route_ref.namespace or trial.namespace
    route = kube.http_route(namespace, routing.http_route_ref.name)
    rules = (route or {}).get("spec", {}).get("rules") or []
    refs = pool_refs(rules)
    deployment = baseline() if refs else None
    pools = {
        str(ref["name"]): kube.inference_pool(trial.namespace, str(ref["name"]))
        for ref in refs
        if ref.get("group") == POOL_GROUP
    }
    found = {name: pool for name, pool in pools.items() if pool is not None}
    pool = baseline_pool_name(rules, found, deployment) if deployment is not None else None
    if pool is None:
        router = _routes(spec, trial, kube, Service(baseline_service, trial.namespace), route)
        router.notes = _pool_notes(refs, pools)
        return router
    assert deployment is not None
    backend = Service(pool, trial.namespace, kind=POOL_KIND, group=POOL_GROUP)
    return PoolRouter(
        _routes(spec, trial, kube, backend, route),
        kube,
        trial,
        baseline=deployment,
        candidate_selector=candidate_labels(trial),
        mirrors=any(step.mirror for step in spec.steps),
        baseline_service=baseline_service,
        pools=pools,
    )


def _pool_notes(
    refs: list[Mapping[str, Any]], pools: Mapping[str, Manifest | None]
) -> tuple[str, ...]:
    """Why no pool of the route was taken for the baseline's, where it names pools."""
    notes = [f"InferencePool {name}, which the route names, not found"
             for name, pool in pools.items() if pool is None]  # fmt: skip
    if any(ref.get("group") == ALPHA_POOL_GROUP for ref in refs):
        notes.append(
            f"the route refers to an InferencePool of {ALPHA_POOL_GROUP} (v1alpha2, "
            f"deprecated): acceltrial splits {POOL_GROUP}/v1 pools; move the pool and the "
            "route's reference to v1"
        )
    return tuple(notes)


def _routes(
    spec: TrialSpec, trial: TrialRef, kube: Kube, baseline: Service, route: Manifest | None
) -> GatewayApiRouter:
    routing = spec.traffic.gatewayapi
    assert routing is not None
    chosen: list[str | int] = list(routing.rule_names or [])
    if routing.rule_index is not None:
        chosen.append(routing.rule_index)
    pools = baseline.kind == POOL_KIND
    candidate = Service(candidate_name(trial), trial.namespace, baseline.kind, baseline.group)
    shape = RouteShape(
        namespace=routing.http_route_ref.namespace or trial.namespace,
        baseline=baseline,
        candidate=candidate,
        port=None if pools else routing.port,  # a pool has its targetPorts, a ref to it no port
    )
    return GatewayApiRouter(
        kube,
        route_name=routing.http_route_ref.name,
        shape=shape,
        chosen=chosen,
        trial=f"{trial.namespace}/{trial.name}",
        step_weights=[step.weight for step in spec.steps if step.weight],
        step_mirrors=[step.mirror for step in spec.steps if step.mirror],
    ).seen_as(route)
