"""The Gateway API router: weights on one rule of an HTTPRoute.

The rule's backendRefs are recorded verbatim before the first change and written back verbatim
on rollback. Each write tests the route's resourceVersion, and is read back to verify. While the
trial changes the route, it carries the annotation ``acceltrial.dev/trial: <namespace>/<name>``,
so GitOps tools can be told to leave its weights alone (docs/gitops.md); it goes at rollback and at
promotion.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from acceltrial.api.status import HttpRouteOriginal, OriginalRouting
from acceltrial.engine.routing import RoutingError, baseline_index, candidate_percent, split
from acceltrial.kube.gateway import Kube, KubeError
from acceltrial.providers.routing.port import RoutingProblem

TRIAL_ANNOTATION = "acceltrial.dev/trial"


@dataclass
class GatewayApiRouter:
    """Splits one HTTPRoute rule between the baseline and the candidate Service."""

    kube: Kube
    namespace: str
    route_name: str
    rule_index: int
    baseline_service: str
    candidate_service: str
    port: int | None = None
    trial: str = ""
    """``<namespace>/<name>`` of the trial, written into the route's annotation."""

    def problems(self) -> list[str]:
        route = self.kube.http_route(self.namespace, self.route_name)
        if route is None:
            return [f"HTTPRoute {self.namespace}/{self.route_name} not found"]
        try:
            baseline_index(self._refs(route), self.baseline_service)
        except (RoutingError, RoutingProblem) as error:
            return [f"HTTPRoute {self.namespace}/{self.route_name}: {error}"]
        return []

    def snapshot(self) -> OriginalRouting:
        route = self._route()
        return OriginalRouting(
            router="gatewayapi",
            http_route=HttpRouteOriginal(
                name=self.route_name,
                namespace=self.namespace,
                rule_index=self.rule_index,
                backend_refs=self._refs(route),
            ),
        )

    def set_weight(self, weight: int, original: OriginalRouting) -> None:
        refs = _original_refs(original)
        base = refs[baseline_index(refs, self.baseline_service)]
        candidate = {"name": self.candidate_service, "port": self.port or base.get("port")}
        self._write(split(refs, self.baseline_service, candidate, weight), self.trial)
        held = self.weight()
        if held != weight:
            raise RoutingProblem(f"wrote {weight}% but the HTTPRoute holds {held}%")

    def weight(self) -> int | None:
        return candidate_percent(self._refs(self._route()), self.baseline_service,
                                 self.candidate_service)  # fmt: skip

    def restore(self, original: OriginalRouting) -> None:
        if self.kube.http_route(self.namespace, self.route_name) is not None:
            self._write(_original_refs(original), None)

    def release(self) -> None:
        """After promotion the route is the user's again: the trial's annotation goes."""
        route = self.kube.http_route(self.namespace, self.route_name)
        if route is not None and TRIAL_ANNOTATION in (route["metadata"].get("annotations") or {}):
            self._write(self._refs(route), None)

    def committed(self) -> dict[str, dict[str, Any]]:
        route = self.kube.http_route(self.namespace, self.route_name)
        return {"httpRoute": route} if route is not None else {}

    def _write(self, refs: list[dict[str, Any]], trial: str | None) -> None:
        try:
            annotations = {TRIAL_ANNOTATION: trial}
            self.kube.set_route_backends(self._route(), self.rule_index, refs, annotations)
        except KubeError as error:
            raise RoutingProblem(f"cannot update the HTTPRoute: {error}") from None

    def _route(self) -> dict[str, Any]:
        route = self.kube.http_route(self.namespace, self.route_name)
        if route is None:
            raise RoutingProblem(f"HTTPRoute {self.namespace}/{self.route_name} not found")
        return route

    def _refs(self, route: dict[str, Any]) -> list[dict[str, Any]]:
        rules = route.get("spec", {}).get("rules") or []
        if self.rule_index >= len(rules):
            raise RoutingProblem(f"has no rule {self.rule_index} (it has {len(rules)})")
        return list(rules[self.rule_index].get("backendRefs") or [])


def _original_refs(original: OriginalRouting) -> list[dict[str, Any]]:
    if original.http_route is None:
        raise RoutingProblem("no HTTPRoute was recorded before the trial changed it")
    return [dict(ref) for ref in original.http_route.backend_refs]
