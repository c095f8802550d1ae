"""The replicas router: the candidate's pods join the baseline Service; the share follows the
ratio of ready pods behind it, in whole pods (one candidate pod beside two baseline pods is 33%,
whatever the step asked). Only the candidate is scaled during the steps.

Before the bake (weight 100) the baseline Service's selector is narrowed to the candidate's pods
(``acceltrial.dev/variant: candidate`` added, as Argo Rollouts adds its pod-template hash to a
canary's Services), so the bake is at 100% while the baseline's pods keep running, warm and out
of traffic, until promotion scales them to zero. A rollback writes the selector back exactly as
recorded; after promotion it stays narrowed (the report gives the Service to commit).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from acceltrial.api.status import OriginalRouting, ReplicasOriginal
from acceltrial.engine.candidate import VARIANT_LABEL
from acceltrial.engine.metrics import Variant
from acceltrial.engine.routing import replica_percent, replicas_for_share
from acceltrial.kube.gateway import Kube
from acceltrial.providers.routing.port import RoutingProblem

CANDIDATE_ONLY = {VARIANT_LABEL: "candidate"}
"""What the bake adds to the baseline Service's selector: only the candidate's pods match."""


@dataclass
class ReplicasRouter:
    """Shares traffic by scaling the candidate against the baseline's replicas."""

    kube: Kube
    namespace: str
    baseline_deployment: str
    candidate_deployment: str
    baseline_service: str

    def problems(self) -> list[str]:
        service = self.kube.service(self.namespace, self.baseline_service)
        if service is not None and not _selector(service):
            return [
                f"Service {self.namespace}/{self.baseline_service} has no selector: the "
                "replicas router shares traffic by the pods a selector picks"
            ]
        return []

    def unselected_labels(self) -> frozenset[str]:
        """The candidate's pods keep the baseline's labels: the baseline Service takes them in."""
        return frozenset()

    def snapshot(self) -> OriginalRouting:
        baseline = self.kube.deployment(self.namespace, self.baseline_deployment)
        replicas = int((baseline or {}).get("spec", {}).get("replicas", 1))
        service = self.kube.service(self.namespace, self.baseline_service)
        selector = _selector(service) if service is not None else None
        return ReplicasOriginal(
            router="replicas", baseline_replicas=replicas, service_selector=selector
        )

    def set_weight(self, weight: int, original: OriginalRouting, mirror: int = 0) -> None:
        # Mirror steps are refused at admission for this router: pods behind one Service
        # cannot copy requests.
        wanted = replicas_for_share(original.baseline_replicas or 1, weight)
        if weight >= 100:
            # The candidate was scaled for production before (Promoting); the baseline's pods
            # leave the Service rather than being matched pod for pod.
            current = self.kube.deployment(self.namespace, self.candidate_deployment) or {}
            wanted = max(1, int(current.get("spec", {}).get("replicas") or 0))
        self.kube.scale(self.namespace, self.candidate_deployment, wanted)
        held = self.kube.deployment(self.namespace, self.candidate_deployment)
        if held is None or held.get("spec", {}).get("replicas") != wanted:
            raise RoutingProblem(f"scaled the candidate to {wanted} replicas but it does not hold")
        if weight >= 100:
            self._narrow()

    def _narrow(self) -> None:
        """The baseline Service's selector picks the candidate's pods only."""
        service = self._service()
        selector = _selector(service)
        if not CANDIDATE_ONLY.items() <= selector.items():
            self.kube.set_service_selector(service, {**selector, **CANDIDATE_ONLY})

    def weight(self, original: OriginalRouting | None = None) -> int | None:
        return None  # the share is a ratio of pods, not a setting to read back

    def share(self, serving: Callable[[], Mapping[Variant, int]]) -> int | None:
        """The candidate's serving pods over all serving pods behind the baseline Service: the
        baseline's and the candidate's (which carries the baseline's labels), or the
        candidate's alone once the selector is narrowed."""
        pods = serving()
        candidate = pods.get("candidate", 0)
        service = self.kube.service(self.namespace, self.baseline_service)
        if service is not None and CANDIDATE_ONLY.items() <= _selector(service).items():
            return 100 if candidate else 0
        return replica_percent(pods.get("baseline", 0), candidate)

    def conflict(self, weight: int, original: OriginalRouting, mirror: int = 0) -> str | None:
        return None  # only the candidate (and, for the bake, the selector) is written

    def refusal(self) -> str | None:
        return None  # a Service has no verdict to read

    def restore(self, original: OriginalRouting) -> None:
        """The baseline Service's selector back as recorded, if the bake narrowed it; the
        baseline's pods were never scaled, so removing the candidate does the rest."""
        recorded = original.service_selector if isinstance(original, ReplicasOriginal) else None
        service = self.kube.service(self.namespace, self.baseline_service)
        if recorded is None or service is None:
            return
        if _selector(service) != recorded:
            self.kube.set_service_selector(service, recorded)

    def release(self) -> None:
        """Nothing marks the baseline Service as the trial's."""

    def committed(self) -> dict[str, dict[str, Any]]:
        """The baseline Service once the bake narrowed its selector: commit it, or a sync puts
        the baseline's selector back (harmless once the baseline is at zero replicas)."""
        service = self.kube.service(self.namespace, self.baseline_service)
        if service is None or not CANDIDATE_ONLY.items() <= _selector(service).items():
            return {}
        return {"service": service}

    def _service(self) -> dict[str, Any]:
        service = self.kube.service(self.namespace, self.baseline_service)
        if service is None:
            raise RoutingProblem(f"Service {self.namespace}/{self.baseline_service} not found")
        return service


def _selector(service: Mapping[str, Any]) -> dict[str, str]:
    return dict((service.get("spec") or {}).get("selector") or {})
