"""The Gateway API router where the route's baseline is an InferencePool (docs/routing.md).

The route's rules are split as the Gateway API router splits Services (the same rules found
again, the same conflicts, the same exact restore: :class:`GatewayApiRouter` with pool backends);
around it, the candidate's pool: created before the first write to the route (the baseline
pool's spec, the candidate's pods as its selector, an endpoint picker of its own where the
baseline's pool has one), deleted after the route is restored, handed over at promotion as the
candidate's Deployment is. The trial owns both until then, so deleting the trial deletes them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from acceltrial.api.status import OriginalRouting
from acceltrial.engine.candidate import (
    PROMOTED_BY_LABEL,
    TRIAL_LABEL,
    TrialRef,
    owner_reference,
)
from acceltrial.engine.metrics import Variant
from acceltrial.engine.pools import (
    candidate_pool,
    matches,
    picker_for_pool,
    picker_service,
    picker_service_name,
    pod_labels,
    pool_problems,
)
from acceltrial.engine.routes import Service, rule_label
from acceltrial.kube.calls import KubeError
from acceltrial.kube.gateway import Kube, Manifest
from acceltrial.providers.routing.gatewayapi import GatewayApiRouter
from acceltrial.providers.routing.port import RoutingProblem

PART_LABEL = "acceltrial.dev/part"
"""What a trial's object other than the candidate's Deployment and Service is for."""
PICKER_SUFFIX = "-epp"
"""The candidate picker's Deployment and Service: the candidate pool's name and this."""


@dataclass
class PoolRouter:
    """Splits the route between the baseline's InferencePool and the candidate's."""

    routes: GatewayApiRouter
    """Splits the rules; its shape's baseline and candidate are the two pools."""
    kube: Kube
    trial: TrialRef
    baseline: Manifest
    """The baseline Deployment, whose pods the baseline pool selects."""
    candidate_selector: Mapping[str, str]
    """Labels of the candidate's pods, and only theirs: the candidate pool's selector."""
    mirrors: bool = False
    """Whether the trial has mirror steps (refused with pools)."""
    baseline_service: str = ""
    """The baseline's Service: a route sending to it as well as to the pool is refused."""
    pools: Mapping[str, Manifest | None] = field(default_factory=dict)
    """Every v1 pool the route names, by name, as this tick read them (None: not found)."""

    @property
    def namespace(self) -> str:
        """Where the pools, the pods and the pickers are: the trial's namespace (the route may
        be in another, a shared gateway's)."""
        return self.trial.namespace

    @property
    def baseline_pool(self) -> str:
        return self.routes.shape.baseline.name

    @property
    def candidate_pool(self) -> str:
        return self.routes.shape.candidate.name

    @property
    def picker(self) -> str:
        return f"{self.candidate_pool}{PICKER_SUFFIX}"[:63].rstrip("-")

    def problems(self) -> list[str]:
        found = self.routes.problems()
        route = self.kube.http_route(self.routes.namespace, self.routes.route_name)
        if route is None:
            return found
        rules = route.get("spec", {}).get("rules") or []
        pools = {**self.pools, self.baseline_pool: self._baseline_pool()}
        deployments = self.kube.deployments(self.namespace)
        found += pool_problems(rules, pools, self.baseline, deployments, self.mirrors)
        return found + self._service_problems(rules) + self._picker_problems()

    def _service_problems(self, rules: Sequence[Manifest]) -> list[str]:
        """Rules to the baseline's Service beside rules to its pool: splitting only the pool's
        would leave the Service's on the baseline, which promotion scales to zero."""
        service = Service(self.baseline_service, self.namespace)
        both = [
            rule_label(rule, index)
            for index, rule in enumerate(rules)
            if any(
                service.matches(ref, self.routes.namespace) for ref in rule.get("backendRefs") or []
            )
        ]
        if not both or not self.baseline_service:
            return []
        return [
            f"HTTPRoute {self.routes.namespace}/{self.routes.route_name}: {', '.join(both)} send "
            f"the baseline's traffic to Service {self.baseline_service} as well as other rules to "
            f"InferencePool {self.baseline_pool}; a trial splits one of them: send all of the "
            "baseline's traffic through the pool (or all through the Service)"
        ]

    def _picker_problems(self) -> list[str]:
        try:
            self._candidate_objects()
        except (ValueError, RoutingProblem) as error:
            return [f"InferencePool {self.baseline_pool}: {error}"]
        return []

    def unselected_labels(self) -> frozenset[str]:
        """The baseline pool's selector keys: the candidate's pods must not join its pool."""
        pool = self._baseline_pool() or {}
        return frozenset(((pool.get("spec") or {}).get("selector") or {}).get("matchLabels") or {})

    def snapshot(self) -> OriginalRouting:
        return self.routes.snapshot()

    def set_weight(self, weight: int, original: OriginalRouting, mirror: int = 0) -> None:
        if weight or mirror:
            self._ensure_candidate_pool()
        self.routes.set_weight(weight, original, mirror)

    def weight(self, original: OriginalRouting | None = None) -> int | None:
        return self.routes.weight(original)

    def share(self, serving: Callable[[], Mapping[Variant, int]]) -> int | None:
        return None  # the gateway splits by weight between the pools

    def conflict(self, weight: int, original: OriginalRouting, mirror: int = 0) -> str | None:
        return self.routes.conflict(weight, original, mirror)

    def refusal(self) -> str | None:
        return self.routes.refusal()

    def restore(self, original: OriginalRouting) -> None:
        """The route as found, then the candidate's pool (and picker) removed: never a route
        naming a pool that is gone."""
        self.routes.restore(original)
        self.kube.delete_inference_pool(self.namespace, self.candidate_pool)
        self.kube.delete("Service", self.namespace, self.picker)
        self.kube.delete("Deployment", self.namespace, self.picker)

    def release(self) -> None:
        """The candidate's pool and picker are the user's from now on, as its Deployment is."""
        self.routes.release()
        promoted_by = {PROMOTED_BY_LABEL: self.trial.name}
        self.kube.release("InferencePool", self.namespace, self.candidate_pool, self.trial.uid,
                          promoted_by)  # fmt: skip
        for kind in ("Deployment", "Service"):
            self.kube.release(kind, self.namespace, self.picker, self.trial.uid, promoted_by)

    def committed(self) -> dict[str, dict[str, Any]]:
        """The route, and the candidate's pool and picker a GitOps user commits beside it."""
        found = {
            **self.routes.committed(),
            "inferencePool": self.kube.inference_pool(self.namespace, self.candidate_pool),
            "endpointPickerDeployment": self.kube.deployment(self.namespace, self.picker),
            "endpointPickerService": self.kube.service(self.namespace, self.picker),
        }
        return {key: manifest for key, manifest in found.items() if manifest is not None}

    def _baseline_pool(self) -> Manifest | None:
        if self.baseline_pool in self.pools:  # read by this tick's configuration already
            return self.pools[self.baseline_pool]
        return self.kube.inference_pool(self.namespace, self.baseline_pool)

    def _ensure_candidate_pool(self) -> None:
        objects = self._candidate_objects()
        for manifest in objects[:-1]:
            self.kube.apply(manifest)
        try:
            self.kube.apply_inference_pool(objects[-1])
        except KubeError as error:
            raise error.doing(
                f"create InferencePool {self.namespace}/{self.candidate_pool}"
            ) from None

    def _candidate_objects(self) -> Sequence[Manifest]:
        """The picker's Deployment and Service (where the baseline pool has a picker), then the
        candidate's pool."""
        pool = self._baseline_pool()
        if pool is None:
            raise RoutingProblem(f"InferencePool {self.namespace}/{self.baseline_pool} not found")
        owner = owner_reference(self.trial)
        service_name = picker_service_name(pool)
        picker: list[Manifest] = []
        if service_name is not None:
            service, deployment = self._picker(service_name)
            # Not the candidate's pod labels: the picker is neither in its pool nor its Service.
            labels = {TRIAL_LABEL: self.trial.name, PART_LABEL: "endpoint-picker"}
            picker = [
                picker_for_pool(deployment, self.candidate_pool, self.picker, labels, owner),
                picker_service(service, self.picker, labels, owner),
            ]
        created = candidate_pool(
            pool,
            self.candidate_pool,
            selector=self.candidate_selector,
            labels={TRIAL_LABEL: self.trial.name, PART_LABEL: "inferencepool"},
            owner=owner,
            picker=self.picker if picker else None,
        )
        return [*picker, created]

    def _picker(self, service_name: str) -> tuple[Manifest, Manifest]:
        """The baseline picker's Service and the one Deployment whose pods it selects."""
        service = self.kube.service(self.namespace, service_name)
        if service is None:
            raise RoutingProblem(f"its endpoint picker's Service {service_name} not found")
        selector = (service.get("spec") or {}).get("selector") or {}
        matching = [
            d for d in self.kube.deployments(self.namespace) if matches(selector, pod_labels(d))
        ]
        if len(matching) != 1:
            raise RoutingProblem(
                f"its endpoint picker's Service {service_name} selects the pods of "
                f"{len(matching)} Deployments; acceltrial copies the picker from exactly one"
            )
        return service, matching[0]
