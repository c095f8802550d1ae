"""Another writer changes an HTTPRoute mid-trial, on both backends (on the real kube-apiserver
with the Gateway API CRDs' validation, defaulting and its own managedFields): a rule inserted
before ours, our rule edited, weights reset. The router names the writer's field manager, and
rollback writes nothing into the rule it did not record and keeps the other writer's backend."""

from __future__ import annotations

import copy
import time
from typing import Any

from kubernetes import config

from acceltrial.engine.routes import RouteShape, Service
from acceltrial.kube.gateway import Kube
from acceltrial.providers.routing.gatewayapi import GatewayApiRouter
from tests.sandbox.conftest import Api, Backend

ROUTES = "/apis/gateway.networking.k8s.io/v1/namespaces/default/httproutes"
GPU = {"name": "llama3-gpu", "port": 8000}
LEGACY = {"name": "llama3-legacy", "port": 8000}
ROUTE = {
    "apiVersion": "gateway.networking.k8s.io/v1",
    "kind": "HTTPRoute",
    "metadata": {"name": "llama3"},
    "spec": {
        "parentRefs": [{"name": "inference"}],
        "rules": [
            {"name": "chat", "matches": [{"path": {"type": "PathPrefix", "value": "/v1/chat"}}],
             "backendRefs": [GPU]},
            {"matches": [{"path": {"type": "PathPrefix", "value": "/v1/completions"}}],
             "backendRefs": [{**GPU, "weight": 3}, LEGACY]},
        ],
    },
}  # fmt: skip
SHAPE = RouteShape(
    "default", Service("llama3-gpu", "default"), Service("llama3-inf2-candidate", "default")
)


def test_another_writer_is_named_and_nothing_lands_outside_the_recorded_rules(
    cluster: Backend, api: Api
) -> None:
    assert api.post(ROUTES, ROUTE).status == 201
    kube = Kube(config.new_client_from_config(config_file=str(cluster.kubeconfig)))

    def router() -> GatewayApiRouter:
        """A router as one tick of the operator has it (it keeps what it read for that tick)."""
        return GatewayApiRouter(kube, "llama3", SHAPE, (), "default/trial", (5, 25, 50))

    first_tick = router()
    original = first_tick.snapshot()
    first_tick.set_weight(5, original)
    assert first_tick.conflict(5, original) is None
    assert first_tick.weight(original) == 5
    time.sleep(1.1)  # managedFields times are whole seconds: the other write comes later

    route: dict[str, Any] = api.get(f"{ROUTES}/llama3").body
    rules = route["spec"]["rules"]
    inserted = copy.deepcopy(rules[1])
    inserted["matches"] = [{"headers": [{"type": "Exact", "name": "x-canary", "value": "1"}]}]
    inserted["backendRefs"] = [inserted["backendRefs"][0]]
    added = {**copy.deepcopy(rules[0]["backendRefs"][0]), "name": "llama3-legacy"}
    rules[0]["backendRefs"].append(added)  # a backend added to our rule
    rules[1]["backendRefs"] = copy.deepcopy(original.http_route.rules[1]["backendRefs"])  # type: ignore[union-attr,index]
    patched = api.request(
        "PATCH", f"{ROUTES}/llama3",
        [{"op": "replace", "path": "/spec/rules", "value": [inserted, *rules]}],
        "application/json-patch+json", fieldManager="argocd-controller",
    )  # fmt: skip
    assert patched.status == 200, patched.body

    conflict = router().conflict(5, original)
    assert conflict is not None
    assert "field manager 'argocd-controller'" in conflict

    router().restore(original)
    after: dict[str, Any] = api.get(f"{ROUTES}/llama3").body
    # As the server stored it (a real one adds the Gateway API defaults, e.g. a path match).
    assert after["spec"]["rules"][0] == patched.body["spec"]["rules"][0], "inserted rule untouched"
    recorded = original.http_route.rules  # type: ignore[union-attr]
    assert after["spec"]["rules"][1]["backendRefs"] == [*recorded[0]["backendRefs"], added]
    assert after["spec"]["rules"][2]["backendRefs"] == recorded[1]["backendRefs"]
    assert "acceltrial.dev/trial" not in (after["metadata"].get("annotations") or {})


def test_a_mirror_step_copies_to_the_candidate_and_leaves_the_route_exactly_as_found(
    cluster: Backend, api: Api
) -> None:
    """The shadow step's RequestMirror filter as the Gateway API CRD validates it (a Service
    reference names its port), beside a filter of the user's; the next step removes it, a
    mirror removed by another writer is named, and rollback leaves the route as found."""
    model = {"set": [{"name": "x-model", "value": "llama3"}]}
    header = {"type": "RequestHeaderModifier", "requestHeaderModifier": model}
    route = copy.deepcopy(ROUTE)
    route["spec"]["rules"][0]["filters"] = [header]
    assert api.post(ROUTES, route).status == 201
    found = api.get(f"{ROUTES}/llama3").body["spec"]["rules"]
    kube = Kube(config.new_client_from_config(config_file=str(cluster.kubeconfig)))

    def router() -> GatewayApiRouter:
        return GatewayApiRouter(kube, "llama3", SHAPE, (), "default/trial", (5,), (100,))

    original = router().snapshot()
    router().set_weight(0, original, mirror=100)
    rules = api.get(f"{ROUTES}/llama3").body["spec"]["rules"]
    mirror = {"type": "RequestMirror", "requestMirror": {
        "backendRef": {"name": "llama3-inf2-candidate", "port": 8000}, "percent": 100}}  # fmt: skip
    assert [f["type"] for f in rules[0]["filters"]] == ["RequestHeaderModifier", "RequestMirror"]
    assert _without_defaults(rules[0]["filters"][1]) == mirror
    assert rules[0]["backendRefs"] == found[0]["backendRefs"], "no user goes to the candidate"
    assert _without_defaults(rules[1]["filters"][0]) == mirror, "every rule to the baseline"
    assert router().weight(original) == 0
    assert router().conflict(0, original, mirror=100) is None

    router().set_weight(5, original)
    rules = api.get(f"{ROUTES}/llama3").body["spec"]["rules"]
    assert rules[0]["filters"] == found[0]["filters"]
    assert "filters" not in rules[1]
    assert router().conflict(5, original) is None

    router().set_weight(0, original, mirror=100)
    time.sleep(1.1)  # managedFields times are whole seconds: the other write comes later
    patched = api.request(
        "PATCH", f"{ROUTES}/llama3", [{"op": "remove", "path": "/spec/rules/1/filters"}],
        "application/json-patch+json", fieldManager="kubectl-edit",
    )  # fmt: skip
    assert patched.status == 200, patched.body
    conflict = router().conflict(0, original, mirror=100)
    assert conflict is not None
    assert "field manager 'kubectl-edit'" in conflict

    router().restore(original)
    assert api.get(f"{ROUTES}/llama3").body["spec"]["rules"] == found


def _without_defaults(rule_filter: dict[str, Any]) -> dict[str, Any]:
    """A filter without the group and kind the real API server defaults on a backendRef."""
    result = copy.deepcopy(rule_filter)
    ref = result["requestMirror"]["backendRef"]
    for key, default in (("group", ""), ("kind", "Service")):
        if ref.get(key) == default:
            del ref[key]
    return result


def test_after_promotion_the_route_is_released_with_no_field_owned_by_the_operator(
    cluster: Backend, api: Api
) -> None:
    """release() drops the trial's annotation and the operator's managedFields entry, so the
    user's next server-side apply of the route (a GitOps sync) meets no conflict with it."""
    assert api.post(ROUTES, ROUTE).status == 201
    kube = Kube(config.new_client_from_config(config_file=str(cluster.kubeconfig)))
    router = GatewayApiRouter(kube, "llama3", SHAPE, (), "default/trial", (5,))
    original = router.snapshot()
    router.set_weight(100, original)
    route = api.get(f"{ROUTES}/llama3").body
    assert "acceltrial" in {e.get("manager") for e in route["metadata"]["managedFields"]}

    GatewayApiRouter(kube, "llama3", SHAPE).release()
    released = api.get(f"{ROUTES}/llama3").body
    assert "acceltrial" not in {e.get("manager") for e in released["metadata"]["managedFields"]}
    assert "acceltrial.dev/trial" not in (released["metadata"].get("annotations") or {})
    assert released["spec"] == route["spec"], "the weights stay as promoted"
