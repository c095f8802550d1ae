"""HTTPRoutes as found in production, on plain values: several rules, other namespaces, filters,
the 16-ref limit, weight-0 and default-weight baselines, restores and the gateway's verdict."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from acceltrial.engine.routes import (
    RouteShape,
    Service,
    baseline_rules,
    candidate_ref,
    expected_rules,
    gateway_refusal,
    grant_allows,
    grant_manifest,
    last_writers,
    locate,
    restored_refs,
    rule_percent,
    rule_problems,
    split_rule,
)
from acceltrial.engine.routing import RoutingError

SAME = RouteShape("serving", Service("llama3-gpu", "serving"), Service("cand", "serving"))
CROSS = RouteShape("gateways", Service("llama3-gpu", "serving"), Service("cand", "serving"))
BASE = {"name": "llama3-gpu", "port": 8000}


def rule(name: str | None, path: str, *refs: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = {
        "matches": [{"path": {"type": "PathPrefix", "value": path}}],
        "backendRefs": list(refs),
    }
    if name:
        found["name"] = name
    return found


def test_every_rule_referencing_the_baseline_is_split_unless_some_are_chosen() -> None:
    rules = [
        rule("chat", "/v1/chat", BASE),
        rule("other", "/x", {"name": "x"}),
        rule(None, "/v1/completions", BASE),
    ]
    assert baseline_rules(rules, SAME) == [0, 2]
    assert baseline_rules(rules, SAME, ["chat"]) == [0]
    assert baseline_rules(rules, SAME, [2]) == [2]
    with pytest.raises(RoutingError, match="rule 'other' has no backendRef to Service llama3-gpu"):
        baseline_rules(rules, SAME, ["other"])
    with pytest.raises(RoutingError, match="no rule named 'nope'"):
        baseline_rules(rules, SAME, ["nope"])


def test_a_cross_namespace_baseline_is_found_by_its_namespace_and_the_candidate_names_it() -> None:
    crossing = {**BASE, "namespace": "serving", "filters": [{"type": "RequestHeaderModifier"}]}
    rules = [rule(None, "/", {**BASE}), rule(None, "/v1", crossing)]
    assert baseline_rules(rules, CROSS) == [1]  # the first names a Service of the route's namespace
    ref = candidate_ref(crossing, CROSS)
    assert ref == {
        "name": "cand",
        "namespace": "serving",
        "port": 8000,
        "filters": crossing["filters"],
    }
    assert ref["filters"] is not crossing["filters"]


def test_weight_zero_and_default_weight_baselines() -> None:
    default = split_rule([BASE], SAME, 5)
    assert default == [{**BASE, "weight": 95}, {"name": "cand", "port": 8000, "weight": 5}]
    assert rule_percent(default, SAME) == 5
    # traffic-split-3 shape: the baseline kept at weight 0 gets nothing, so nothing is split.
    idle = [{**BASE, "weight": 0}, {"name": "foo-v2", "weight": 1}]
    assert split_rule(idle, SAME, 5) == idle
    assert rule_percent(idle, SAME) is None


def test_the_sixteen_ref_limit_and_indistinguishable_rules_are_problems() -> None:
    full = rule("full", "/", BASE, *({"name": f"b{i}"} for i in range(15)))
    twins = [rule(None, "/a", BASE), rule(None, "/a", BASE)]
    assert "already holds 16 backendRefs" in rule_problems([full], [0])[0]
    assert "give the rules names" in rule_problems(twins, [0, 1])[0]


def test_rules_are_found_by_name_or_content_not_by_position() -> None:
    found = [rule("chat", "/v1/chat", BASE), rule(None, "/v1/completions", BASE)]
    live = [rule(None, "/inserted", {"name": "x"}), *copy.deepcopy(found)]
    # Edited, yet found by its name:
    live[1]["matches"] = [{"path": {"type": "Exact", "value": "/v1/chat"}}]
    assert locate(live, found[0]) == 1
    assert locate(live, found[1]) == 2
    assert locate([rule(None, "/other", BASE)], found[1]) is None


def test_restore_is_the_original_exactly_when_nobody_else_wrote() -> None:
    original = [{"name": "llama3-gpu", "port": 8000}, {"name": "legacy", "weight": 3}]
    written = split_rule(original, SAME, 25)
    assert restored_refs(written, original, written, SAME) == original


def test_restore_keeps_what_others_added_or_changed_and_drops_only_the_candidate() -> None:
    original = [{"name": "llama3-gpu", "port": 8000}, {"name": "legacy", "weight": 3}]
    written = split_rule(original, SAME, 25)
    live = copy.deepcopy(written)
    live[1]["weight"] = 7  # someone changed legacy
    live.append({"name": "gitops-added", "weight": 1})
    assert restored_refs(live, original, written, SAME) == [
        {"name": "llama3-gpu", "port": 8000},
        {"name": "legacy", "weight": 7},
        {"name": "gitops-added", "weight": 1},
    ]


def test_expected_rules_leave_unrecorded_rules_alone() -> None:
    found = [rule("chat", "/v1/chat", BASE), rule("x", "/x", {"name": "x"})]
    expected = expected_rules(found, [0], SAME, 50)
    assert expected[1] == found[1]
    assert rule_percent(expected[0]["backendRefs"], SAME) == 50


def test_the_gateways_refusal_is_read_for_the_current_generation_only() -> None:
    def route(generation: int, observed: int, reason: str) -> dict[str, Any]:
        conditions = [
            {"type": "Accepted", "status": "True", "reason": "Accepted",
             "observedGeneration": observed},
            {"type": "ResolvedRefs", "status": "False", "reason": reason,
             "message": "not permitted", "observedGeneration": observed},
        ]  # fmt: skip
        parents = [{"parentRef": {"name": "gw"}, "controllerName": "x", "conditions": conditions}]
        return {"metadata": {"generation": generation}, "status": {"parents": parents}}

    assert gateway_refusal(route(3, 3, "RefNotPermitted")) == (
        "gw reports ResolvedRefs=False, reason RefNotPermitted: not permitted"
    )
    assert gateway_refusal(route(4, 3, "RefNotPermitted")) is None  # not yet seen by the gateway


def test_reference_grants() -> None:
    candidate = Service("cand", "serving")
    manifest = grant_manifest("gateways", candidate)
    assert grant_allows([manifest], "gateways", candidate)
    assert not grant_allows([manifest], "elsewhere", candidate)
    only_baseline = copy.deepcopy(manifest)
    only_baseline["spec"]["to"][0]["name"] = "llama3-gpu"
    assert not grant_allows([only_baseline], "gateways", candidate)
    del only_baseline["spec"]["to"][0]["name"]  # every Service of the namespace
    assert grant_allows([only_baseline], "gateways", candidate)


def test_the_last_writer_is_the_latest_other_field_manager() -> None:
    entries = [
        {"manager": "kubectl-create", "operation": "Update", "time": "2026-12-04T10:00:00Z"},
        {"manager": "acceltrial", "operation": "Update", "time": "2026-12-04T10:05:00Z"},
        {"manager": "argocd-controller", "operation": "Apply", "time": "2026-12-04T10:06:00Z"},
        {
            "manager": "gw",
            "operation": "Update",
            "time": "2026-12-04T10:07:00Z",
            "subresource": "status",
        },
    ]
    assert last_writers(entries, "acceltrial") == ("argocd-controller",)
    assert last_writers(entries[1:2], "acceltrial") == ()


def test_writers_in_the_same_second_are_all_named() -> None:
    # The API server stamps managedFields to the second: a route created and then changed by
    # GitOps within one second has two candidates, and neither is dropped.
    entries = [
        {"manager": "kubectl-create", "operation": "Update", "time": "2026-12-04T10:00:00Z"},
        {"manager": "argocd-controller", "operation": "Update", "time": "2026-12-04T10:00:00Z"},
        {"manager": "acceltrial", "operation": "Update", "time": "2026-12-04T09:59:59Z"},
    ]
    assert last_writers(entries, "acceltrial") == ("argocd-controller", "kubectl-create")
