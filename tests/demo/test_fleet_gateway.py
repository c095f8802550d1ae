"""The fleet's gateway on plain cluster views: several rules, backendRef namespaces and
ReferenceGrants, 500 for a share it may not or cannot use, 503 for a Service without Ready
endpoints, and the route's status conditions as a Gateway API implementation writes them."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from acceltrial.engine.candidate import VARIANT_LABEL
from acceltrial_testbed.sandbox.fleet.exporter import Fleet, FleetSpec
from acceltrial_testbed.sandbox.fleet.gateway import route_status, status_changed
from acceltrial_testbed.sandbox.fleet.model import ServingProfile
from acceltrial_testbed.sandbox.fleet.traffic import ClusterView, Entry, resolved_rules, routed

NOW = datetime(2026, 12, 4, 3, 0, tzinfo=UTC)


def pod(name: str, app: str, ready: bool = True) -> dict[str, Any]:
    condition = {"type": "Ready", "status": "True" if ready else "False"}
    return {"metadata": {"name": name, "labels": {"app": app}},
            "status": {"conditions": [condition]}}  # fmt: skip


def service(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"selector": {"app": name}}}


def view(rules: list[dict[str, Any]], grants: list[dict[str, Any]] | None = None) -> ClusterView:
    route = {
        "metadata": {"name": "llama3", "namespace": "gateways", "generation": 4},
        "spec": {"parentRefs": [{"name": "shared"}], "rules": rules},
    }
    return ClusterView(
        pods=[pod("gpu-a", "gpu"), pod("gpu-b", "gpu"), pod("inf2-a", "inf2", ready=False)],
        services={name: service(name) for name in ("gpu", "inf2")},
        route=route,
        grants=grants or [],
    )


ENTRY = Entry("ml", route="llama3", route_namespace="gateways")
GRANT = {"spec": {"from": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute",
                            "namespace": "gateways"}],
                  "to": [{"group": "", "kind": "Service"}]}}  # fmt: skip


def ref(name: str, weight: int = 1, namespace: str | None = "ml", **extra: Any) -> dict[str, Any]:
    return {"name": name, "port": 8000, "weight": weight,
            **({"namespace": namespace} if namespace else {}), **extra}  # fmt: skip


def test_requests_spread_over_rules_then_weights_then_ready_pods() -> None:
    rules = [{"backendRefs": [ref("gpu")]}, {"backendRefs": [ref("gpu", 3), ref("inf2", 1)]}]
    answered = routed(view(rules, [GRANT]), ENTRY, 40)
    assert answered.offered == {"gpu-a": 17.5, "gpu-b": 17.5}
    assert answered.errors == {503: 5.0}, "inf2 has no Ready endpoint: 503"


def test_a_reference_without_a_grant_or_to_nothing_is_answered_500() -> None:
    rules = [{"backendRefs": [ref("gpu", 1), ref("missing", 1)]}]
    assert routed(view(rules, [GRANT]), ENTRY, 10).errors == {500: 5.0}
    assert routed(view(rules), ENTRY, 10).errors == {500: 10.0}, "no ReferenceGrant at all"
    same_namespace = [{"backendRefs": [ref("gpu", namespace=None)]}]
    assert routed(view(same_namespace), ENTRY, 10).errors == {500: 10.0}, "gateways has no gpu"
    kind = [{"backendRefs": [ref("gpu", kind="ConfigMap")]}]
    assert routed(view(kind, [GRANT]), ENTRY, 10).errors == {500: 10.0}


def test_status_conditions_name_the_reason_for_this_generation() -> None:
    cluster = view([{"backendRefs": [ref("gpu")]}])
    [parent] = route_status(cluster.route or {}, resolved_rules(cluster, ENTRY), NOW)
    assert parent["parentRef"] == {"name": "shared"}
    conditions = {c["type"]: c for c in parent["conditions"]}
    assert conditions["Accepted"]["status"] == "True"
    resolved = conditions["ResolvedRefs"]
    assert (resolved["status"], resolved["reason"]) == ("False", "RefNotPermitted")
    assert resolved["observedGeneration"] == 4
    assert resolved["message"] == "no ReferenceGrant allows a reference to ml/gpu"

    granted = view([{"backendRefs": [ref("gpu")]}], [GRANT])
    [fine] = route_status(granted.route or {}, resolved_rules(granted, ENTRY), NOW)
    assert {c["type"]: c["reason"] for c in fine["conditions"]} == {
        "Accepted": "Accepted", "ResolvedRefs": "ResolvedRefs"
    }  # fmt: skip


def test_status_is_rewritten_only_when_it_changes_and_keeps_transition_times() -> None:
    cluster = view([{"backendRefs": [ref("gpu")]}], [GRANT])
    route = cluster.route or {}
    parents = route_status(route, resolved_rules(cluster, ENTRY), NOW)
    assert status_changed(route, parents)
    route["status"] = {"parents": parents}
    later = datetime(2026, 12, 4, 4, 0, tzinfo=UTC)
    again = route_status(route, resolved_rules(cluster, ENTRY), later)
    assert again == parents
    assert not status_changed(route, again)


MIRROR = {"type": "RequestMirror",
          "requestMirror": {"backendRef": {"name": "inf2", "namespace": "ml", "port": 8000},
                            "percent": 50}}  # fmt: skip


def test_a_request_mirror_copies_a_share_of_the_rules_requests_without_serving_users() -> None:
    cluster = view([{"backendRefs": [ref("gpu")], "filters": [MIRROR]}], [GRANT])
    cluster = replace(cluster, pods=[pod("gpu-a", "gpu"), pod("inf2-a", "inf2")])
    answered = routed(cluster, ENTRY, 10)
    assert answered.offered == {"gpu-a": 10.0}, "every user is answered by the baseline"
    assert answered.mirrored == {"inf2-a": 5.0}
    quarter = {"type": "RequestMirror",
               "requestMirror": {"backendRef": {"name": "inf2", "namespace": "ml", "port": 8000},
                                 "fraction": {"numerator": 1, "denominator": 4}}}  # fmt: skip
    assert cluster.route is not None
    route = {
        **cluster.route,
        "spec": {"rules": [{"backendRefs": [ref("gpu")], "filters": [quarter]}]},
    }
    assert routed(replace(cluster, route=route), ENTRY, 10).mirrored == {"inf2-a": 2.5}


def test_the_fleet_counts_users_requests_the_candidate_answered_not_its_copies() -> None:
    candidate = pod("inf2-a", "inf2")
    candidate["metadata"]["labels"][VARIANT_LABEL] = "candidate"
    rules = [{"backendRefs": [ref("gpu")], "filters": [MIRROR]}]
    cluster = replace(view(rules, [GRANT]), pods=[pod("gpu-a", "gpu"), candidate])
    clock = iter(float(t) for t in range(0, 1000, 100))
    profile = ServingProfile(p50=1.0, p99=2.0, capacity_rps=50)
    spec = FleetSpec(ENTRY, 10, 100, 10, {"baseline": profile, "candidate": profile}, seed=5)
    fleet = Fleet("http://unused", spec, clock=lambda: next(clock),
                  reader=lambda *_: cluster, status_writer=lambda *_: None)  # fmt: skip
    fleet.advance()
    fleet.advance()  # 100 seconds served
    traffic = fleet.snapshot().variants
    assert traffic["candidate"].offered_rps == 5.0, "the copies load the candidate"
    assert traffic["candidate"].user_rps == 0.0
    assert traffic["candidate"].user_requests == 0.0
    assert abs(traffic["baseline"].user_requests - 1000) <= 4 * 1000**0.5
    served = {f.name: f for f in fleet.collect()}["vllm:request_success"].samples  # at 200 s
    copies = sum(s.value for s in served if s.labels["pod"] == "inf2-a")
    assert abs(copies - 1000) <= 4 * 1000**0.5, "it answered the copies (drawn, about 1000)"
    assert fleet.snapshot().mirrored_rps == 5.0
    assert fleet.snapshot().candidate_percent == 0.0
