"""The Gateway API router: weights on the HTTPRoute rules that send traffic to the baseline.

Every rule referencing the baseline Service is split alike (or the rules the trial chose, by name
or index). spec.rules is recorded verbatim before the first change; rules are found again by name
or content, never by position alone, so a rule someone inserts is never written into. Each write
tests the route's resourceVersion, goes in under the field manager ``acceltrial`` and is read
back to verify. Between ticks the route is compared with what the trial left: a difference written
by another field manager is a conflict that pauses the trial (:meth:`GatewayApiRouter.conflict`).
Rollback undoes only the trial's change (:func:`~acceltrial.engine.routes.restored_refs`). The
gateway's verdict is read from ``status.parents[].conditions`` (:meth:`GatewayApiRouter.refusal`).

A route in another namespace than the Services names the candidate's namespace in its
backendRef; preflight requires a ReferenceGrant allowing it and otherwise prints the one to
create. While the trial changes the route, it carries the annotation
``acceltrial.dev/trial: <namespace>/<name>``, so GitOps tools can be told to leave its weights
alone (docs/gitops.md); it goes at rollback and at promotion.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from acceltrial.api.status import GatewayApiOriginal, HttpRouteOriginal, OriginalRouting
from acceltrial.engine.metrics import Variant
from acceltrial.engine.routes import (
    RouteShape,
    baseline_rules,
    expected_rules,
    gateway_refusal,
    grant_allows,
    grant_manifest,
    idle_baseline_problem,
    last_writers,
    locate,
    mirror_percent,
    mirrored_filters,
    restored_refs,
    rule_label,
    rule_percent,
    rule_problems,
    split_rule,
)
from acceltrial.engine.routing import RoutingError
from acceltrial.kube.calls import KubeError
from acceltrial.kube.gateway import FIELD_MANAGER, Kube
from acceltrial.providers.routing.port import RoutingProblem

TRIAL_ANNOTATION = "acceltrial.dev/trial"
Manifest = dict[str, Any]


@dataclass
class GatewayApiRouter:
    """Splits the baseline's HTTPRoute rules between the baseline and the candidate Service."""

    kube: Kube
    route_name: str
    shape: RouteShape
    chosen: Sequence[str | int] = field(default_factory=tuple)
    """Rules to split (names or indices); empty: every rule referencing the baseline."""
    trial: str = ""
    """``<namespace>/<name>`` of the trial, written into the route's annotation."""
    step_weights: Sequence[int] = field(default_factory=tuple)
    """The weights the trial may have written, to tell its own unfinished write from another's."""
    step_mirrors: Sequence[int] = field(default_factory=tuple)
    """The mirror percentages of its shadow steps, likewise."""
    _seen: Manifest | None = field(default=None, init=False, repr=False, compare=False)
    """The route as this tick observed it: weight, conflict and refusal read it once; any write
    forgets it, so read-backs see the server's answer. A copy of the router (another tick)
    reads it again."""
    notes: tuple[str, ...] = field(default=(), compare=False)
    """Problems found while configuring the router (a v1alpha2 InferencePool), for preflight."""

    def seen_as(self, route: Manifest | None) -> GatewayApiRouter:
        """This tick's route, as configuring the router already read it (None: read it)."""
        self._seen = route
        return self

    @property
    def namespace(self) -> str:
        return self.shape.namespace

    @property
    def _where(self) -> str:
        return f"HTTPRoute {self.namespace}/{self.route_name}"

    def problems(self) -> list[str]:
        route = self.kube.http_route(self.namespace, self.route_name)
        if route is None:
            return [f"{self._where} not found"]
        rules = _rules(route)
        try:
            indices = baseline_rules(rules, self.shape, self.chosen)
        except RoutingError as error:
            return [f"{self._where}: {p}" for p in (str(error), *self.notes)]
        idle = idle_baseline_problem(rules, indices, self.shape)
        found = [*rule_problems(rules, indices), *([idle] if idle else [])]
        refused = gateway_refusal(route)
        if refused:
            # Refused before the trial: a later refusal could not be told to be the candidate's.
            found.append(f"the gateway already does not use it as it is: {refused}")
        problems = [f"{self._where}: {p}" for p in [*found, *self.notes]]
        return problems + self._grant_problems()

    def _grant_problems(self) -> list[str]:
        if not self.shape.cross_namespace:
            return []
        grants = self.kube.reference_grants(self.shape.candidate.namespace)
        if grant_allows(grants, self.namespace, self.shape.candidate):
            return []
        manifest = yaml.safe_dump(grant_manifest(self.namespace, self.shape.candidate))
        return [
            f"{self._where} is in another namespace than the candidate Service; no "
            f"ReferenceGrant in {self.shape.candidate.namespace} lets it refer to "
            f"{self.shape.candidate.name} (the gateway would answer HTTP 500). Create:\n{manifest}"
        ]

    def unselected_labels(self) -> frozenset[str]:
        """The baseline Service's selector is dropped by the candidate's derivation itself."""
        return frozenset()

    def snapshot(self) -> OriginalRouting:
        rules = _rules(self._route())
        try:
            indices = baseline_rules(rules, self.shape, self.chosen)
        except RoutingError as error:
            raise RoutingProblem(f"{self._where}: {error}") from None
        return GatewayApiOriginal(
            router="gatewayapi",
            http_route=HttpRouteOriginal(
                name=self.route_name,
                namespace=self.namespace,
                rule_index=indices[0],
                backend_refs=list(rules[indices[0]].get("backendRefs") or []),
                rules=rules,
                split_rules=indices,
            ),
        )

    def set_weight(self, weight: int, original: OriginalRouting, mirror: int = 0) -> None:
        found, indices = _recorded(original)
        route = self._route()
        live = _rules(route)
        changes, filters = {}, {}
        for index in indices:
            place = self._place(live, found, index, original)
            changes[place] = split_rule(found[index]["backendRefs"], self.shape, weight)
            if mirror or mirror_percent(live[place], self.shape):
                filters[place] = mirrored_filters(live[place], self.shape, mirror, found[index])
        self._write(route, changes, self.trial, filters)
        held = self.weight(original)
        if held is not None and held != weight:
            raise RoutingProblem(f"wrote {weight}% but the {self._where} holds {held}%")

    def weight(self, original: OriginalRouting | None = None) -> int | None:
        live = _rules(self._observed())
        if not isinstance(original, GatewayApiOriginal):
            return None
        found, indices = _recorded(original)
        held = []
        for index in indices:
            place = _locate(live, found, index, original)
            percent = (
                None if place is None else rule_percent(live[place]["backendRefs"], self.shape)
            )
            if percent is not None:
                held.append(percent)
        if not held:
            return None
        # Rules that disagree: report one that differs from the first, so drift is seen.
        return next((p for p in held if p != held[0]), held[0])

    def share(self, serving: Callable[[], Mapping[Variant, int]]) -> int | None:
        return None  # the gateway splits by weight: the weight written is the share

    def conflict(self, weight: int, original: OriginalRouting, mirror: int = 0) -> str | None:
        """Who changed the route since the trial's last write, with what; None if nobody did.
        The trial's own unfinished write (the route at another of its weights, written last by
        us) is not a conflict: the next write sets it right."""
        route = self._observed()
        found, indices = _recorded(original)
        live = _rules(route)
        expected = expected_rules(found, indices, self.shape, weight, mirror)
        if _legacy(original) or live == expected:
            return None  # a trial recorded by an older version kept no rules to compare
        entries = [
            e for e in route["metadata"].get("managedFields") or [] if not e.get("subresource")
        ]
        if _latest_is_ours(entries) or (not entries and self._own_state(live, found, indices)):
            return None
        writers = last_writers(entries, FIELD_MANAGER)
        named = "a writer the API server does not name"
        if writers:
            named = "field manager " + " or ".join(repr(w) for w in writers)
        if len(writers) > 1:
            named += " (they wrote in the same second)"
        what = self._what(live, expected)
        return f"{self._where} was changed by {named} since the trial's last write: {what}"

    def _own_state(self, live: list[Manifest], found: list[Manifest], indices: list[int]) -> bool:
        splits = {(w, 0) for w in (0, 100, *self.step_weights)}
        splits |= {(0, m) for m in self.step_mirrors}
        return any(live == expected_rules(found, indices, self.shape, *s) for s in splits)

    def _what(self, live: list[Manifest], expected: list[Manifest]) -> str:
        if len(live) != len(expected):
            return f"it has {len(live)} rules, the trial recorded {len(expected)}"
        for index, rule in enumerate(live):
            if rule != expected[index]:
                return f"{rule_label(rule, index)} differs from what the trial wrote"
        return "its rules differ from what the trial wrote"

    def refusal(self) -> str | None:
        """The gateway's reason for not using the route as it stands, if it gives one."""
        try:
            return gateway_refusal(self._observed())
        except RoutingProblem:
            return None

    def restore(self, original: OriginalRouting) -> None:
        route = self.kube.http_route(self.namespace, self.route_name)
        if route is None:
            return
        found, indices = _recorded(original)
        live = _rules(route)
        changes, filters = {}, {}
        for index in indices:
            place = _locate(live, found, index, original)
            if place is None:
                continue  # gone or no longer recognisable: never write into another rule
            refs = live[place].get("backendRefs") or []
            written = split_rule(
                found[index]["backendRefs"], self.shape, rule_percent(refs, self.shape) or 0
            )
            changes[place] = restored_refs(refs, found[index]["backendRefs"], written, self.shape)
            if mirror_percent(live[place], self.shape):
                filters[place] = mirrored_filters(live[place], self.shape, 0, found[index])
        self._write(route, changes, None, filters)

    def release(self) -> None:
        """After promotion the route is the user's again: the trial's annotation goes, and so
        does the operator's ownership of the fields it wrote (the weights)."""
        route = self.kube.http_route(self.namespace, self.route_name)
        if route is not None:
            self.kube.disown_route(route, {TRIAL_ANNOTATION: None})

    def committed(self) -> dict[str, dict[str, Any]]:
        route = self.kube.http_route(self.namespace, self.route_name)
        return {"httpRoute": route} if route is not None else {}

    def _place(
        self, live: list[Manifest], found: list[Manifest], index: int, original: OriginalRouting
    ) -> int:
        place = _locate(live, found, index, original)
        if place is None:
            raise RoutingProblem(
                f"{self._where}: the recorded {rule_label(found[index], index)} cannot be found "
                "any more"
            )
        return place

    def _write(
        self,
        route: Manifest,
        changes: dict[int, list[Manifest]],
        trial: str | None,
        filters: dict[int, list[Manifest] | None] | None = None,
    ) -> None:
        self._seen = None
        try:
            self.kube.set_route_rules(route, changes, {TRIAL_ANNOTATION: trial}, filters)
        except KubeError as error:
            if error.permanent and not self._changed_since(route):
                # Refused as written (the route's own validation): retrying cannot help, and
                # the trial ends with the server's reason.
                raise error.doing(f"update the {self._where}") from None
            raise RoutingProblem(f"cannot update the {self._where}: {error}") from None

    def _changed_since(self, route: Manifest) -> bool:
        """Whether the route moved on since ``route`` was read: a failed resourceVersion test
        (422 on the API server, as a refusal is), a conflict to retry."""
        now = self.kube.http_route(self.namespace, self.route_name)
        version = route["metadata"].get("resourceVersion")
        return now is None or now["metadata"].get("resourceVersion") != version

    def _observed(self) -> Manifest:
        if self._seen is None:
            self._seen = self._route()
        return self._seen

    def _route(self) -> Manifest:
        route = self.kube.http_route(self.namespace, self.route_name)
        if route is None:
            raise RoutingProblem(f"{self._where} not found")
        return route


def _rules(route: Manifest) -> list[Manifest]:
    return list(route.get("spec", {}).get("rules") or [])


def _recorded(original: OriginalRouting) -> tuple[list[Manifest], list[int]]:
    if not isinstance(original, GatewayApiOriginal):
        raise RoutingProblem(
            f"the routing was recorded by the {original.router} router, not by gatewayapi: "
            "a trial's router cannot change once it has started"
        )
    recorded = original.http_route
    if recorded.rules is None or recorded.split_rules is None:
        # Recorded by an older version: one rule, by index.
        rules: list[Manifest] = [{} for _ in range(recorded.rule_index)]
        rules.append({"backendRefs": [dict(r) for r in recorded.backend_refs]})
        return rules, [recorded.rule_index]
    return [dict(rule) for rule in recorded.rules], list(recorded.split_rules)


def _legacy(original: OriginalRouting) -> bool:
    """Recorded by an older version: one rule, by index, without the route's rules."""
    return isinstance(original, GatewayApiOriginal) and original.http_route.rules is None


def _locate(
    live: list[Manifest], found: list[Manifest], index: int, original: OriginalRouting
) -> int | None:
    if _legacy(original):
        return index if index < len(live) else None
    return locate(live, found[index])


def _latest_is_ours(entries: list[Manifest]) -> bool:
    """Whether the trial wrote the route's spec last (alone at that second: a tie is not ours)."""
    if not entries:
        return False
    latest = max(str(e.get("time") or "") for e in entries)
    at_latest = {e.get("manager") for e in entries if str(e.get("time") or "") == latest}
    return at_latest == {FIELD_MANAGER}
