"""What a trial does when the route is not what it wrote: another writer's change pauses it
(condition ``RouteChanged`` names the writer's field manager) and nothing more is written until a
person resolves it and resumes, or aborts; a candidate the gateway refuses (its Accepted or
ResolvedRefs condition False) ends the trial with the gateway's reason, routing restored.

Pure: ``route_guard`` returns a ``RouteVerdict`` that the state machine (``lifecycle``) applies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from acceltrial.api.reasons import ROUTE_REFUSED
from acceltrial.api.status import PauseReason, Phase
from acceltrial.engine.ticks import Observation
from acceltrial.engine.verdict import GateVerdict

ROUTE_CHANGED: Final = "RouteChanged"
_ROUTED_PHASES = frozenset({"Progressing", "Paused", "BakingIn"})


@dataclass(frozen=True)
class RouteVerdict(GateVerdict):
    """The tick goes on (``passed``), rolls back (the gateway refused the candidate), pauses for
    another writer's change, or holds, paused for that already; and condition RouteChanged."""

    route_changed: str | None = None
    """Another writer's change stands: condition RouteChanged True, with this message."""
    conflict_gone: bool = False
    """No other writer's change stands: condition RouteChanged goes."""


def route_guard(
    phase: Phase, pause_reason: PauseReason | None, observation: Observation
) -> RouteVerdict:
    """The verdict on this tick's routing observations (conflict, refusal) in ``phase``."""
    conflict, refused = observation.routing_conflict, observation.route_refused
    gone = conflict is None
    if phase not in _ROUTED_PHASES:
        return RouteVerdict(passed=True, conflict_gone=gone)
    if refused is not None:
        reason = f"the gateway does not accept the route: {refused}"
        return RouteVerdict(roll_back=ROUTE_REFUSED, reason=reason, conflict_gone=gone)
    if conflict is None:
        return RouteVerdict(passed=True, conflict_gone=True)
    message = f"{conflict}; nothing more is written. Resolve it and resume, or abort."
    if phase == "Paused" and pause_reason == ROUTE_CHANGED:
        return RouteVerdict(route_changed=message)  # paused for it already: one Event a conflict
    return RouteVerdict(message=f"paused: {message}", pause=ROUTE_CHANGED, route_changed=message)
