"""Traffic-split arithmetic for the routers, on plain values.

Gateway API weights are proportional (``weight`` defaults to 1). To give the candidate ``w``
percent of the baseline's share while leaving every other backend's share exactly as found, all
original weights are scaled by 100 and the baseline's is split ``(100 - w) : w`` with the
candidate. Weight 0 is the original list itself, byte for byte. Reading back, the candidate's
percentage is recovered from the same ratio, so a router can tell whether the cluster still holds
what it wrote.

The replicas router has no weights: the share is the candidate's fraction of ready pods behind
the baseline Service, in whole pods, so a step rarely gets exactly the weight it asks for (one
candidate pod beside two baseline pods is 33%, asked 25% or 30%). :func:`replica_share` says what
a weight really gives; :func:`share_text` says it with the asked weight beside it.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from typing import Any

BackendRef = dict[str, Any]
GATEWAY_MAX_WEIGHT = 1_000_000


class RoutingError(ValueError):
    """The route cannot be split as asked; the message names what is missing."""


def split(
    original: list[BackendRef], baseline_service: str, candidate_ref: BackendRef, weight: int
) -> list[BackendRef]:
    """The rule's backendRefs giving the candidate ``weight`` percent of the baseline's share."""
    if not 0 <= weight <= 100:
        raise RoutingError(f"weight must be within 0..100, got {weight}")
    index = baseline_index(original, baseline_service)
    if weight == 0:
        return copy.deepcopy(original)
    refs = []
    for position, ref in enumerate(original):
        scaled = dict(ref, weight=_weight(ref) * 100)
        if position == index:
            scaled["weight"] = _weight(ref) * (100 - weight)
        refs.append(scaled)
    refs.append(dict(candidate_ref, weight=_weight(original[index]) * weight))
    if max(r["weight"] for r in refs) > GATEWAY_MAX_WEIGHT:
        raise RoutingError("the route's weights are too large to split by percent")
    return refs


def candidate_percent(refs: list[BackendRef], baseline_service: str, candidate_service: str) -> int:
    """The candidate's percentage of the baseline's share, as the refs hold it (0 if absent)."""
    candidate = next((r for r in refs if _is_service(r, candidate_service)), None)
    if candidate is None:
        return 0
    baseline = refs[baseline_index(refs, baseline_service)]
    total = _weight(baseline) + _weight(candidate)
    return 0 if total == 0 else round(100 * _weight(candidate) / total)


def baseline_index(refs: list[BackendRef], baseline_service: str) -> int:
    """Position of the baseline Service's backendRef in a rule."""
    for position, ref in enumerate(refs):
        if _is_service(ref, baseline_service):
            return position
    names = ", ".join(str(r.get("name")) for r in refs) or "none"
    raise RoutingError(
        f"the HTTPRoute rule has no backendRef to Service {baseline_service} (it has: {names})"
    )


def replicas_for_share(baseline_ready: int, weight: int) -> int:
    """Candidate replicas giving it about ``weight`` percent of the pods behind one Service."""
    if weight >= 100:
        return max(baseline_ready, 1)
    if weight <= 0:
        return 0
    return max(1, math.ceil(baseline_ready * weight / (100 - weight) - 1e-9))


def replica_percent(baseline_ready: int, candidate_ready: int) -> int:
    """The candidate's share of ready pods, in percent."""
    total = baseline_ready + candidate_ready
    return 0 if total == 0 else round(100 * candidate_ready / total)


def replica_share(baseline_ready: int, weight: int) -> int:
    """The share (percent) the replicas router really gives when asked for ``weight``: the
    candidate's pods (:func:`replicas_for_share`) over all pods behind the Service."""
    if weight >= 100:
        return 100  # the baseline's pods leave the Service before all traffic is the candidate's
    return replica_percent(baseline_ready, replicas_for_share(baseline_ready, weight))


def serving(pod: Mapping[str, Any]) -> bool:
    """Whether a pod takes a Service's traffic: Ready and not terminating (the EndpointSlice
    controller marks a terminating pod not ready, whatever its own Ready condition says)."""
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def share_text(share: int, asked: int | None) -> str:
    """A share as people read it, with the asked weight beside it when they differ:
    ``33% (asked 25%)``."""
    if asked is None or asked == share:
        return f"{share}%"
    return f"{share}% (asked {asked}%)"


def _weight(ref: BackendRef) -> int:
    return int(ref.get("weight", 1))


def _is_service(ref: BackendRef, name: str) -> bool:
    return (
        ref.get("name") == name
        and ref.get("kind", "Service") == "Service"
        and ref.get("group", "") in ("", "core")
    )
