"""How many replicas the candidate needs before it takes all traffic, and why.

Pure: from the spec, the latest cost figures and the bounds of an autoscaler (if one scales the
workload), the replica count and a sentence saying how it was chosen. The projection is the cost
model's: production throughput / (measured capacity per replica x ``targetUtilization``).
"""

from __future__ import annotations

from dataclasses import dataclass

from acceltrial.api.spec import TrialSpec
from acceltrial.api.status import EconomicsStatus


@dataclass(frozen=True)
class AutoscalerBounds:
    """minReplicas and maxReplicas of the HorizontalPodAutoscaler that will scale the candidate."""

    name: str
    min_replicas: int
    max_replicas: int


def promotion_replicas(
    spec: TrialSpec, economics: EconomicsStatus | None, autoscaler: AutoscalerBounds | None
) -> tuple[int, str]:
    """The candidate's replicas for all production traffic, and how they were chosen."""
    trial_replicas = spec.candidate.replicas
    projected = (
        economics.candidate.projected_replicas if economics and economics.candidate else None
    )
    target = spec.economics.target_utilization
    if projected is None:
        replicas = trial_replicas
        reason = "no capacity was measured, so candidate.replicas"
    elif projected <= trial_replicas:
        replicas = trial_replicas
        reason = (
            f"production needs {projected} at {target:.0%} utilization; candidate.replicas "
            f"({trial_replicas}) is enough"
        )
    else:
        replicas = projected
        reason = f"production throughput / (measured capacity per replica x {target:.0%})"
    limit = spec.promotion.max_replicas
    if limit is not None and replicas > limit:
        replicas = limit
        reason += f", capped by promotion.maxReplicas ({limit})"
    if autoscaler is not None:
        bounded = min(max(replicas, autoscaler.min_replicas), autoscaler.max_replicas)
        if bounded != replicas:
            reason += (
                f", kept within the bounds of HorizontalPodAutoscaler {autoscaler.name} "
                f"({autoscaler.min_replicas}..{autoscaler.max_replicas})"
            )
        replicas = bounded
    return max(1, replicas), reason
