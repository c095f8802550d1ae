"""The replicas router: the candidate's pods join the baseline Service; the share follows the
ratio of ready pods behind it, in whole pods (one candidate pod beside two baseline pods is 33%,
whatever the step asked).

Before all traffic moves (weight 100) the baseline's Deployment is scaled to zero, so the bake
runs on the candidate alone, as a replica-based canary (Argo Rollouts' without traffic routing)
ends with the stable ReplicaSet at zero. Restoring scales the baseline back to the replicas it
recorded before the trial; until then the baseline is never touched, only the candidate is
scaled.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from acceltrial.api.status import OriginalRouting, ReplicasOriginal
from acceltrial.engine.metrics import Variant
from acceltrial.engine.routing import replica_percent, replicas_for_share
from acceltrial.kube.gateway import Kube
from acceltrial.providers.routing.port import RoutingProblem


@dataclass
class ReplicasRouter:
    """Shares traffic by scaling the candidate against the baseline's replicas."""

    kube: Kube
    namespace: str
    baseline_deployment: str
    candidate_deployment: str

    def problems(self) -> list[str]:
        return []

    def snapshot(self) -> OriginalRouting:
        baseline = self.kube.deployment(self.namespace, self.baseline_deployment)
        replicas = int((baseline or {}).get("spec", {}).get("replicas", 1))
        return ReplicasOriginal(router="replicas", baseline_replicas=replicas)

    def set_weight(self, weight: int, original: OriginalRouting, mirror: int = 0) -> None:
        # Mirror steps are refused at admission for this router: pods behind one Service
        # cannot copy requests.
        wanted = replicas_for_share(original.baseline_replicas or 1, weight)
        if weight >= 100:
            # All traffic never shrinks a candidate already scaled for production.
            current = self.kube.deployment(self.namespace, self.candidate_deployment) or {}
            wanted = max(wanted, int(current.get("spec", {}).get("replicas") or 0))
        self.kube.scale(self.namespace, self.candidate_deployment, wanted)
        held = self.kube.deployment(self.namespace, self.candidate_deployment)
        if held is None or held.get("spec", {}).get("replicas") != wanted:
            raise RoutingProblem(f"scaled the candidate to {wanted} replicas but it does not hold")
        if weight >= 100:
            # The baseline's pods leave the Service: the bake is at 100%, as it says.
            self.kube.scale(self.namespace, self.baseline_deployment, 0)

    def weight(self, original: OriginalRouting | None = None) -> int | None:
        return None  # the share is a ratio of pods, not a setting to read back

    def share(self, serving: Callable[[], Mapping[Variant, int]]) -> int | None:
        """The candidate's serving pods over all serving pods behind the baseline Service (the
        baseline's and the candidate's, which carries the baseline's labels)."""
        pods = serving()
        return replica_percent(pods.get("baseline", 0), pods.get("candidate", 0))

    def conflict(self, weight: int, original: OriginalRouting, mirror: int = 0) -> str | None:
        return None  # only the candidate is scaled, which nobody else writes

    def refusal(self) -> str | None:
        return None  # a Service has no verdict to read

    def restore(self, original: OriginalRouting) -> None:
        """The baseline back to its recorded replicas if the bake took its pods out; otherwise
        nothing: the baseline was not touched, and removing the candidate suffices."""
        baseline = self.kube.deployment(self.namespace, self.baseline_deployment)
        recorded = original.baseline_replicas
        if baseline is None or not recorded:
            return
        if baseline.get("spec", {}).get("replicas") == 0:
            self.kube.scale(self.namespace, self.baseline_deployment, recorded)

    def release(self) -> None:
        """Nothing marks the baseline Service as the trial's."""

    def committed(self) -> dict[str, dict[str, Any]]:
        """The routing is the baseline Service, which the trial never changed."""
        return {}
