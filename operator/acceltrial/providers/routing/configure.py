"""The Gateway API router as a trial's spec configures it: which route, which rules, which
Services in which namespaces."""

from __future__ import annotations

from acceltrial.api.spec import TrialSpec
from acceltrial.engine.candidate import TrialRef, candidate_name
from acceltrial.engine.routes import RouteShape, Service
from acceltrial.kube.gateway import Kube
from acceltrial.providers.routing.gatewayapi import GatewayApiRouter


def gateway_router(
    kube: Kube, spec: TrialSpec, trial: TrialRef, baseline_service: str
) -> GatewayApiRouter:
    """The router for ``spec.traffic.gatewayapi`` (which must be set)."""
    routing = spec.traffic.gatewayapi
    assert routing is not None
    chosen: list[str | int] = list(routing.rule_names or [])
    if routing.rule_index is not None:
        chosen.append(routing.rule_index)
    shape = RouteShape(
        namespace=routing.http_route_ref.namespace or trial.namespace,
        baseline=Service(baseline_service, trial.namespace),
        candidate=Service(candidate_name(trial), trial.namespace),
        port=routing.port,
    )
    return GatewayApiRouter(
        kube,
        route_name=routing.http_route_ref.name,
        shape=shape,
        chosen=chosen,
        trial=f"{trial.namespace}/{trial.name}",
        step_weights=[step.weight for step in spec.steps if step.weight],
        step_mirrors=[step.mirror for step in spec.steps if step.mirror],
    )
