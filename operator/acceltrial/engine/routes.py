"""HTTPRoutes as they are in production, on plain values: which rules carry the baseline, how
each is split, what the route must hold at a weight, how a rollback restores only what the trial
changed, whether another writer changed the route, and what the gateway says of it.

Rules are identified by ``name`` where the route gives them one and by their content (the
``matches``) otherwise, never by position alone: a rule inserted before ours by someone else
must not make the trial write into it. Backend references are identified by group, kind, name
and namespace (an absent namespace is the route's own).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from acceltrial.engine.routing import RoutingError, split

Manifest = dict[str, Any]
MAX_BACKEND_REFS = 16
"""The Gateway API's maximum number of backendRefs in one HTTPRoute rule."""
GATEWAY_GROUP = "gateway.networking.k8s.io"
REFUSING_REASONS = frozenset(
    {
        "RefNotPermitted",
        "BackendNotFound",
        "InvalidKind",
        "UnsupportedValue",
        "NotAllowedByListeners",
    }
)
"""Reasons a Gateway API implementation gives when it does not use (part of) a route."""


@dataclass(frozen=True)
class Service:
    """What a backendRef may point at: a Service, or another kind (an InferencePool) by its
    group and kind."""

    name: str
    namespace: str
    kind: str = "Service"
    group: str = ""

    def matches(self, ref: Mapping[str, Any], route_namespace: str) -> bool:
        return (
            ref.get("name") == self.name
            and ref.get("kind", "Service") == self.kind
            and _group(ref.get("group", "")) == _group(self.group)
            and ref.get("namespace", route_namespace) == self.namespace
        )

    @property
    def label(self) -> str:
        """How a message names it: ``Service serving/llama`` or ``InferencePool serving/llama``."""
        return f"{self.kind} {self.namespace}/{self.name}"


def _group(group: str) -> str:
    return "" if group == "core" else group


@dataclass(frozen=True)
class RouteShape:
    """Where the trial splits: the route's namespace, the baseline and candidate backends (two
    Services, or two InferencePools)."""

    namespace: str
    baseline: Service
    candidate: Service
    port: int | None = None

    @property
    def cross_namespace(self) -> bool:
        return self.candidate.namespace != self.namespace


def rule_key(rule: Mapping[str, Any]) -> str:
    """How a rule is recognised: its name, else its matches (what requests it takes)."""
    if rule.get("name"):
        return f"name:{rule['name']}"
    return "matches:" + json.dumps(rule.get("matches") or [], sort_keys=True)


def rule_label(rule: Mapping[str, Any], index: int) -> str:
    """A rule as people read it in a message."""
    return f"rule {rule['name']!r}" if rule.get("name") else f"rule {index} (unnamed)"


def baseline_rules(
    rules: Sequence[Mapping[str, Any]], shape: RouteShape, chosen: Sequence[str | int] = ()
) -> list[int]:
    """Indices of the rules to split: every rule referencing the baseline, or the chosen ones
    (by name or index) among them. Raises RoutingError naming what is missing."""
    carrying = [
        i
        for i, rule in enumerate(rules)
        if any(shape.baseline.matches(r, shape.namespace) for r in rule.get("backendRefs") or [])
    ]
    if not chosen:
        if not carrying:
            raise RoutingError(
                f"no rule has a backendRef to {shape.baseline.label} "
                f"(rules: {_describe_rules(rules)})"
            )
        return carrying
    picked = []
    for choice in chosen:
        index = _find_choice(rules, choice)
        if index not in carrying:
            raise RoutingError(
                f"{rule_label(rules[index], index)} has no backendRef to {shape.baseline.kind} "
                f"{shape.baseline.name}; choose rules that reference the baseline"
            )
        picked.append(index)
    return sorted(set(picked))


def _find_choice(rules: Sequence[Mapping[str, Any]], choice: str | int) -> int:
    if isinstance(choice, int):
        if 0 <= choice < len(rules):
            return choice
        raise RoutingError(f"has no rule {choice} (it has {len(rules)})")
    for index, rule in enumerate(rules):
        if rule.get("name") == choice:
            return index
    raise RoutingError(f"has no rule named {choice!r} (rules: {_describe_rules(rules)})")


def _describe_rules(rules: Sequence[Mapping[str, Any]]) -> str:
    return ", ".join(rule_label(rule, i) for i, rule in enumerate(rules)) or "none"


def rule_problems(rules: Sequence[Mapping[str, Any]], indices: Sequence[int]) -> list[str]:
    """What makes the chosen rules impossible to split or to find again."""
    problems = []
    keys = [rule_key(rule) for rule in rules]
    for index in indices:
        rule = rules[index]
        if keys.count(keys[index]) > 1:
            problems.append(
                f"{rule_label(rule, index)} has the same matches as another rule, so it cannot "
                "be told apart if someone reorders the rules; give the rules names"
            )
        if len(rule.get("backendRefs") or []) >= MAX_BACKEND_REFS:
            problems.append(
                f"{rule_label(rule, index)} already holds {MAX_BACKEND_REFS} backendRefs, the "
                "Gateway API maximum; the candidate cannot be added"
            )
    return problems


def idle_baseline_problem(
    rules: Sequence[Mapping[str, Any]], indices: Sequence[int], shape: RouteShape
) -> str | None:
    """A baseline at weight 0 in every chosen rule has no traffic to share with a candidate."""
    weights = [
        int(ref.get("weight", 1))
        for index in indices
        for ref in rules[index].get("backendRefs") or []
        if shape.baseline.matches(ref, shape.namespace)
    ]
    if weights and not any(weights):
        return (
            f"the baseline {shape.baseline.kind} {shape.baseline.name} has weight 0 in every "
            "rule that references it, so it receives no traffic to share with the candidate"
        )
    return None


def candidate_ref(baseline_ref: Mapping[str, Any], shape: RouteShape) -> Manifest:
    """The candidate's backendRef: the baseline's (port, filters, kind) with the candidate's name
    and, for a route in another namespace, the candidate's namespace."""
    ref = {k: copy.deepcopy(v) for k, v in baseline_ref.items() if k != "weight"}
    ref["name"] = shape.candidate.name
    if shape.port is not None:
        ref["port"] = shape.port
    if shape.cross_namespace:
        ref["namespace"] = shape.candidate.namespace
    else:
        ref.pop("namespace", None)
    return ref


def split_rule(refs: Sequence[Mapping[str, Any]], shape: RouteShape, weight: int) -> list[Manifest]:
    """One rule's backendRefs with ``weight`` percent of the baseline's share on the candidate.
    A rule whose baseline has weight 0 sends it nothing, so there is nothing to split: it stays
    as found."""
    original = [dict(r) for r in refs]
    position = _baseline_position(original, shape)
    base = original[position]
    if int(base.get("weight", 1)) == 0:
        return copy.deepcopy(original)
    # ``split`` finds the baseline by Service name; the position found here (namespace- and
    # kind-aware: it may be an InferencePool) is handed to it through a stand-in Service ref.
    marker = "\0baseline"
    stand_in = {k: v for k, v in base.items() if k not in ("kind", "group")} | {"name": marker}
    marked = [stand_in if i == position else r for i, r in enumerate(original)]
    result = split(marked, marker, candidate_ref(base, shape), weight)
    weighted = {"weight": result[position]["weight"]} if "weight" in result[position] else {}
    result[position] = dict(base, **weighted)
    return result


def _baseline_position(refs: Sequence[Mapping[str, Any]], shape: RouteShape) -> int:
    for position, ref in enumerate(refs):
        if shape.baseline.matches(ref, shape.namespace):
            return position
    names = ", ".join(str(r.get("name")) for r in refs) or "none"
    raise RoutingError(
        f"the rule has no backendRef to {shape.baseline.kind} {shape.baseline.name} ({names})"
    )


def rule_percent(refs: Sequence[Mapping[str, Any]], shape: RouteShape) -> int | None:
    """The candidate's percentage of the baseline's share in one rule; None where the baseline
    (as found) has weight 0 and the rule was left alone."""
    baseline = next((r for r in refs if shape.baseline.matches(r, shape.namespace)), None)
    candidate = next((r for r in refs if shape.candidate.matches(r, shape.namespace)), None)
    if candidate is None:
        return 0 if baseline is None or int(baseline.get("weight", 1)) > 0 else None
    total = int(candidate.get("weight", 1)) + int((baseline or {}).get("weight", 1))
    return 0 if total == 0 else round(100 * int(candidate.get("weight", 1)) / total)


def expected_rules(
    found: Sequence[Mapping[str, Any]],
    indices: Sequence[int],
    shape: RouteShape,
    weight: int,
    mirror: int = 0,
) -> list[Manifest]:
    """spec.rules as the trial leaves them at ``weight`` (and ``mirror``): the recorded rules
    split, the rest as found."""
    rules = copy.deepcopy([dict(rule) for rule in found])
    for index in indices:
        rules[index]["backendRefs"] = split_rule(rules[index]["backendRefs"], shape, weight)
        filters = mirrored_filters(rules[index], shape, mirror)
        if filters is None:
            rules[index].pop("filters", None)
        else:
            rules[index]["filters"] = filters
    return rules


def mirror_filter(rule: Mapping[str, Any], shape: RouteShape, percent: int) -> Manifest:
    """The filter that copies ``percent`` of ``rule``'s requests to the candidate (Gateway API
    ``RequestMirror``; the gateway discards its answers), at the port the candidate's
    backendRef has (a Service reference must name one)."""
    baseline = (rule.get("backendRefs") or [])[_baseline_position(rule["backendRefs"], shape)]
    weighted = candidate_ref(baseline, shape)
    ref = {k: weighted[k] for k in ("group", "kind", "name", "namespace", "port") if k in weighted}
    return {"type": "RequestMirror", "requestMirror": {"backendRef": ref, "percent": percent}}


def is_candidate_mirror(rule_filter: Mapping[str, Any], shape: RouteShape) -> bool:
    """Whether a rule filter is the trial's RequestMirror to the candidate."""
    if rule_filter.get("type") != "RequestMirror":
        return False
    ref = (rule_filter.get("requestMirror") or {}).get("backendRef") or {}
    return shape.candidate.matches(ref, shape.namespace)


def mirrored_filters(
    rule: Mapping[str, Any],
    shape: RouteShape,
    percent: int,
    recorded: Mapping[str, Any] | None = None,
) -> list[Manifest] | None:
    """A rule's filters with the trial's mirror at ``percent`` (none at 0) and everyone else's
    kept in place; None (no ``filters`` at all) where none is left and the rule as the trial
    recorded it (``recorded``, default ``rule``) had none."""
    filters = rule.get("filters")
    kept = [copy.deepcopy(dict(f)) for f in filters or [] if not is_candidate_mirror(f, shape)]
    if percent:
        kept.append(mirror_filter(rule, shape, percent))
    if not kept and "filters" not in (rule if recorded is None else recorded):
        return None
    return kept


def mirror_percent(rule: Mapping[str, Any], shape: RouteShape) -> int:
    """The percentage of a rule's requests the trial's mirror copies to the candidate (0: none)."""
    for rule_filter in rule.get("filters") or []:
        if is_candidate_mirror(rule_filter, shape):
            mirror = rule_filter.get("requestMirror") or {}
            if "fraction" in mirror:
                fraction = mirror["fraction"]
                return round(
                    100 * int(fraction["numerator"]) / int(fraction.get("denominator", 100))
                )
            return int(mirror.get("percent", 100))
    return 0


def locate(live: Sequence[Mapping[str, Any]], recorded: Mapping[str, Any]) -> int | None:
    """Where a recorded rule is in the live route now (by name or content), None if gone."""
    key = rule_key(recorded)
    places = [i for i, rule in enumerate(live) if rule_key(rule) == key]
    return places[0] if len(places) == 1 else None


def restored_refs(
    live: Sequence[Mapping[str, Any]],
    original: Sequence[Mapping[str, Any]],
    written: Sequence[Mapping[str, Any]],
    shape: RouteShape,
) -> list[Manifest]:
    """A rule's backendRefs with only the trial's change undone: the candidate goes; a ref whose
    weight the trial set and nobody changed since gets its original back, verbatim; refs others
    added or changed stay as they are. When nobody else wrote, this is ``original`` exactly."""
    if [dict(r) for r in live] == [dict(r) for r in written]:
        return copy.deepcopy([dict(r) for r in original])
    restored = []
    for ref in live:
        if shape.candidate.matches(ref, shape.namespace):
            continue
        ours = _same_backend(ref, written, shape.namespace)
        found = _same_backend(ref, original, shape.namespace)
        if ours is not None and found is not None and dict(ours) == dict(ref):
            restored.append(copy.deepcopy(dict(found)))
        else:
            restored.append(copy.deepcopy(dict(ref)))
    return restored


def _same_backend(
    ref: Mapping[str, Any], refs: Sequence[Mapping[str, Any]], route_namespace: str
) -> Mapping[str, Any] | None:
    def identity(r: Mapping[str, Any]) -> tuple[str, str, str, str]:
        return (
            r.get("group", ""),
            r.get("kind", "Service"),
            r.get("name", ""),
            r.get("namespace", route_namespace),
        )

    return next((r for r in refs if identity(r) == identity(ref)), None)


def last_writers(managed_fields: Sequence[Mapping[str, Any]], ours: str) -> tuple[str, ...]:
    """The field managers of the latest write to the route's spec by anyone but us: one, or
    several when their writes fall in the same second (the API server stamps managedFields to
    the second), sorted; none when nobody else wrote."""
    others = [
        entry
        for entry in managed_fields
        if entry.get("manager") and entry.get("manager") != ours and not entry.get("subresource")
    ]
    if not others:
        return ()
    latest = max(str(entry.get("time") or "") for entry in others)
    return tuple(sorted({str(e["manager"]) for e in others if str(e.get("time") or "") == latest}))


def gateway_refusal(route: Mapping[str, Any]) -> str | None:
    """The gateway's reason for not using the route as it stands (this generation), from
    ``status.parents[].conditions``; None while no parent refuses it (or none reported yet)."""
    generation = route.get("metadata", {}).get("generation")
    for parent in (route.get("status") or {}).get("parents") or []:
        for condition in parent.get("conditions") or []:
            current = generation is None or condition.get("observedGeneration") == generation
            refused = condition.get("type") in ("Accepted", "ResolvedRefs") and (
                condition.get("status") == "False"
            )
            if current and refused:
                gateway = (parent.get("parentRef") or {}).get("name", "the gateway")
                return (
                    f"{gateway} reports {condition['type']}=False, reason "
                    f"{condition.get('reason', 'unknown')}: {condition.get('message', '')}"
                ).rstrip(": ")
    return None


def grant_allows(
    grants: Sequence[Mapping[str, Any]], route_namespace: str, service: Service
) -> bool:
    """Whether a ReferenceGrant in the backend's namespace lets HTTPRoutes of
    ``route_namespace`` refer to it."""
    for grant in grants:
        spec = grant.get("spec") or {}
        sources = any(
            source.get("group") == GATEWAY_GROUP
            and source.get("kind") == "HTTPRoute"
            and source.get("namespace") == route_namespace
            for source in spec.get("from") or []
        )
        targets = any(
            _group(target.get("group", "")) == _group(service.group)
            and target.get("kind") == service.kind
            and target.get("name") in (None, "", service.name)
            for target in spec.get("to") or []
        )
        if sources and targets:
            return True
    return False


def grant_manifest(route_namespace: str, service: Service) -> Manifest:
    """The ReferenceGrant that lets the route reach ``service`` (a Service or an InferencePool)
    in its own namespace."""
    return {
        "apiVersion": f"{GATEWAY_GROUP}/v1beta1",
        "kind": "ReferenceGrant",
        "metadata": {"name": f"{route_namespace}-httproutes", "namespace": service.namespace},
        "spec": {
            "from": [{"group": GATEWAY_GROUP, "kind": "HTTPRoute", "namespace": route_namespace}],
            "to": [{"group": service.group, "kind": service.kind, "name": service.name}],
        },
    }
