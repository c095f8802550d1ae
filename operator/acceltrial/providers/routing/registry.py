"""The routers by the name ``spec.traffic.router`` gives them.

A new router is one module in this folder, one entry in :data:`ROUTERS` and its member in the
spec (``spec.traffic``) and in the recorded original routing (``status.original``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from acceltrial.api.spec import TrialSpec
from acceltrial.engine.candidate import TrialRef
from acceltrial.kube.gateway import Kube, Manifest
from acceltrial.providers.routing.configure import gateway_router
from acceltrial.providers.routing.port import Router
from acceltrial.providers.routing.replicas import ReplicasRouter


@dataclass(frozen=True)
class RouterContext:
    """What any router may need to be built for one trial."""

    kube: Kube
    spec: TrialSpec
    trial: TrialRef
    baseline_deployment: str
    baseline_service: str
    candidate: str
    """Name of the candidate Deployment and Service."""
    baseline: Callable[[], Manifest | None] = lambda: None
    """Reads the baseline Deployment (the tick's snapshot keeps what it read)."""


def _gatewayapi(context: RouterContext) -> Router:
    routing = context.spec.traffic.gatewayapi
    if routing is None:  # the CRD's CEL rule requires it; kept for a spec read without it
        return _replicas(context)
    return gateway_router(
        context.kube, context.spec, context.trial, context.baseline_service, context.baseline
    )


def _replicas(context: RouterContext) -> Router:
    return ReplicasRouter(
        context.kube,
        context.trial.namespace,
        context.baseline_deployment,
        context.candidate,
        context.baseline_service,
    )


ROUTERS: dict[str, Callable[[RouterContext], Router]] = {
    "gatewayapi": _gatewayapi,
    "replicas": _replicas,
}
"""Each router's factory, by its name in ``spec.traffic.router``."""


def router_for(context: RouterContext) -> Router:
    """The router the trial's spec names."""
    return ROUTERS[context.spec.traffic.router](context)
