"""What a trial does when the route is not what it wrote: another writer's change pauses it
(condition ``RouteChanged`` names the writer's field manager) and nothing more is written until a
person resolves it and resumes, or aborts; a candidate the gateway refuses (its Accepted or
ResolvedRefs condition False) ends the trial with the gateway's reason, routing restored; a
weight that drifted with no other writer known is set back (``set_back``), and never twice in
one tick with another route write (``one_route_write``).

Pure: ``route_guard`` returns a ``RouteVerdict`` that the state machine (``lifecycle``) applies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from acceltrial.api.reasons import ROUTE_REFUSED
from acceltrial.api.spec import TrialSpec
from acceltrial.api.status import PauseReason, Phase, TrialStatus
from acceltrial.engine.schedule import mirror_at, requested_weight
from acceltrial.engine.ticks import Action, Event, Observation, RestoreRouting, SetWeight
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


def set_back(
    spec: TrialSpec, status: TrialStatus, seen: Observation
) -> tuple[SetWeight, Event] | None:
    """The write that re-applies the weight when the cluster no longer holds what the trial set,
    with its RoutingDrift Event; None when it holds it."""
    observed, expected = seen.observed_weight, requested_weight(status)
    if seen.routing_conflict is not None:
        return None  # someone else's change: never overwritten (the trial pauses instead)
    if observed is not None and expected is not None and observed != expected:
        drift = f"routing held {observed}%, set back to {expected}%"
        return SetWeight(expected, mirror_at(spec, status)), Event("Warning", "RoutingDrift", drift)
    return None


def one_route_write(
    actions: list[Action], events: list[Event], set_back_at: int | None
) -> tuple[list[Action], list[Event]]:
    """Only the tick's last route write kept: a set-back (at ``set_back_at`` in ``actions``)
    followed by a step's new weight (or a restore) would move the route twice within one tick;
    a set-back dropped takes its RoutingDrift Event along."""
    route_write = SetWeight | RestoreRouting
    writes = [i for i, a in enumerate(actions) if isinstance(a, route_write)]
    if len(writes) < 2:
        return actions, events
    last = writes[-1]
    actions = [a for i, a in enumerate(actions) if i == last or not isinstance(a, SetWeight)]
    if set_back_at is not None and set_back_at != last:
        events = [e for e in events if e.reason != "RoutingDrift"]
    return actions, events
