"""Each router against the emulated API server, fast: what it records before the first change,
the weight it writes and reads back, and exactly what it restores."""

from __future__ import annotations

from dataclasses import replace

import pytest

from acceltrial.api.status import GatewayApiOriginal, ReplicasOriginal, TrialStatus
from acceltrial.engine.ticks import DeployCandidate
from acceltrial.handlers.world import TrialWorld
from acceltrial.kube.calls import KubeError
from acceltrial.kube.gateway import Kube
from acceltrial.providers.routing.gatewayapi import TRIAL_ANNOTATION, GatewayApiRouter
from acceltrial.providers.routing.port import RoutingProblem
from acceltrial.providers.routing.registry import ROUTERS
from acceltrial.providers.routing.replicas import ReplicasRouter
from tests.handlers.conftest import ROUTE, create_trial, trial_spec
from tests.integration.e2e_kit import without_defaults
from tests.sandbox.conftest import Api

ROUTES = "/apis/gateway.networking.k8s.io/v1/namespaces/{}/httproutes/llama3"
DEPLOYMENTS = "/apis/apps/v1/namespaces/{}/deployments"


def world(api: Api, kube: Kube, namespace: str, router: str) -> TrialWorld:
    spec = trial_spec(router)
    return TrialWorld(kube, spec, create_trial(api, namespace, spec))


def test_the_spec_names_the_router() -> None:
    assert set(ROUTERS) == {"gatewayapi", "replicas"}


def test_gatewayapi_records_moves_reads_back_and_restores_the_rule_exactly(
    api: Api, kube: Kube, namespace: str
) -> None:
    trial = world(api, kube, namespace, "gatewayapi")
    router = trial.router
    assert isinstance(router, GatewayApiRouter)
    assert router.problems() == []
    original = router.snapshot()
    assert isinstance(original, GatewayApiOriginal)
    assert without_defaults(original.http_route.backend_refs) == [ROUTE]

    router.set_weight(25, original)
    route = api.get(ROUTES.format(namespace)).body
    assert without_defaults(route["spec"]["rules"][0]["backendRefs"]) == [
        {**ROUTE, "weight": 75},
        {"name": "llama3-inf2-candidate", "port": 8000, "weight": 25},
    ]
    assert route["metadata"]["annotations"][TRIAL_ANNOTATION] == f"{namespace}/llama3-inf2"
    assert router.weight(original) == 25
    assert router.committed()["httpRoute"]["metadata"]["name"] == "llama3"

    router.restore(original)
    route = api.get(ROUTES.format(namespace)).body
    assert without_defaults(route["spec"]["rules"][0]["backendRefs"]) == [ROUTE]
    assert TRIAL_ANNOTATION not in (route["metadata"].get("annotations") or {})


def test_gatewayapi_names_a_missing_route_in_preflight(
    api: Api, kube: Kube, namespace: str
) -> None:
    router = world(api, kube, namespace, "gatewayapi").router
    assert api.request("DELETE", ROUTES.format(namespace)).status == 200
    assert router.problems() == [f"HTTPRoute {namespace}/llama3 not found"]


def test_replicas_scales_the_candidate_to_its_share_and_leaves_the_baseline(
    api: Api, kube: Kube, namespace: str
) -> None:
    trial = world(api, kube, namespace, "replicas")
    router = trial.router
    assert isinstance(router, ReplicasRouter)
    original = router.snapshot()
    assert original == ReplicasOriginal(
        router="replicas", baseline_replicas=2, service_selector={"app": "llama3"}
    )
    trial.execute(DeployCandidate(), TrialStatus(phase="Preflight", original=original))

    router.set_weight(50, original)
    deployments = DEPLOYMENTS.format(namespace)
    assert api.get(f"{deployments}/llama3-inf2-candidate").body["spec"]["replicas"] == 2
    assert router.share(lambda: {"baseline": 2, "candidate": 2}) == 50
    router.set_weight(25, original)
    assert api.get(f"{deployments}/llama3-inf2-candidate").body["spec"]["replicas"] == 1
    assert router.share(lambda: {"baseline": 2, "candidate": 1}) == 33, "asked 25%, one pod"
    assert api.get(f"{deployments}/llama3-gpu").body["spec"]["replicas"] == 2, "untouched"
    assert router.weight() is None, "a ratio of pods, nothing to read back"
    assert router.committed() == {}


def test_replicas_bakes_on_the_candidate_alone_and_a_rollback_restores_the_selector_exactly(
    api: Api, kube: Kube, namespace: str
) -> None:
    """Before the bake the baseline Service selects the candidate's pods only (the baseline's
    keep running, out of traffic): the bake is at 100%. A rollback writes the selector back as
    recorded; the baseline Deployment is never scaled."""
    trial = world(api, kube, namespace, "replicas")
    router = trial.router
    original = router.snapshot()
    trial.execute(DeployCandidate(), TrialStatus(phase="Preflight", original=original))
    service = f"/api/v1/namespaces/{namespace}/services/llama3-gpu"
    found = api.get(service).body["spec"]

    router.set_weight(25, original)
    kube.scale(namespace, "llama3-inf2-candidate", 2)  # Promoting scaled it for production
    router.set_weight(100, original)
    deployments = DEPLOYMENTS.format(namespace)
    assert api.get(service).body["spec"]["selector"] == {
        "app": "llama3",
        "acceltrial.dev/variant": "candidate",
    }
    assert api.get(f"{deployments}/llama3-inf2-candidate").body["spec"]["replicas"] == 2, (
        "all traffic keeps the replicas scaled for production"
    )
    assert api.get(f"{deployments}/llama3-gpu").body["spec"]["replicas"] == 2, "warm, unscaled"
    assert router.share(lambda: {"baseline": 2, "candidate": 2}) == 100, "baseline out"
    assert set(router.committed()) == {"service"}, "promoted: the Service to commit"

    router.restore(original)
    assert api.get(service).body["spec"] == found, "the Service exactly as found"
    assert api.get(f"{deployments}/llama3-gpu").body["spec"]["replicas"] == 2
    assert router.committed() == {}


def test_a_route_write_refused_as_invalid_ends_the_trial_but_a_lost_race_is_retried(
    api: Api, kube: Kube, namespace: str
) -> None:
    """A 422 on the route write is a refusal (the trial ends with the server's words) when the
    route is as it was read; when someone wrote in between, it is the resourceVersion test
    failing (also 422 on a real API server): a conflict, retried."""
    router = world(api, kube, namespace, "gatewayapi").router
    assert isinstance(router, GatewayApiRouter)
    original = router.snapshot()
    invalid = KubeError(422, "HTTP 422: spec.rules[0].filters[0]: Invalid value")

    def refuse(*_: object, **__: object) -> None:
        raise invalid

    refusing = GatewayApiRouter(
        replace(kube, timeout_seconds=kube.timeout_seconds), "llama3", router.shape
    )
    refusing.kube.set_route_rules = refuse  # type: ignore[method-assign]
    with pytest.raises(KubeError) as refused:
        refusing.set_weight(5, original)
    assert refused.value.permanent
    assert f"update the HTTPRoute {namespace}/llama3" in str(refused.value)

    def race(route: dict[str, object], *_: object, **__: object) -> None:
        api.merge(ROUTES.format(namespace), {"metadata": {"labels": {"edited": "yes"}}})
        raise invalid

    refusing.kube.set_route_rules = race  # type: ignore[method-assign]
    with pytest.raises(RoutingProblem):
        refusing.set_weight(5, original)
