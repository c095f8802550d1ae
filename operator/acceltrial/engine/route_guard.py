"""What a trial does when the route is not what it wrote: another writer's change pauses it
(condition ``RouteChanged`` names the writer's field manager) and nothing more is written until a
person resolves it and resumes, or aborts; a candidate the gateway refuses (its Accepted or
ResolvedRefs condition False) ends the trial with the gateway's reason, routing restored."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from acceltrial.api.reasons import ROUTE_REFUSED
from acceltrial.engine.conditions import remove_condition

if TYPE_CHECKING:
    from acceltrial.api.status import Phase
    from acceltrial.engine.lifecycle import _Tick

ROUTE_CHANGED: Final = "RouteChanged"
_ROUTED_PHASES = frozenset({"Progressing", "Paused", "BakingIn"})


def route_guard(tick: _Tick, phase: Phase) -> bool:
    """Act on this tick's routing verdicts; True when that ended the tick's work."""
    conflict, refused = tick.obs.routing_conflict, tick.obs.route_refused
    if conflict is None:
        tick._update(conditions=remove_condition(tick._conditions(), ROUTE_CHANGED))
    if phase not in _ROUTED_PHASES:
        return False
    if refused is not None:
        tick._roll_back(
            "rollback", ROUTE_REFUSED, f"the gateway does not accept the route: {refused}"
        )
        return True
    if conflict is None:
        return False
    message = f"{conflict}; nothing more is written. Resolve it and resume, or abort."
    conditions = tick._condition(tick._conditions(), ROUTE_CHANGED, "True", message, ROUTE_CHANGED)
    tick._update(conditions=conditions)
    if phase != "Paused" or tick.status.pause_reason != ROUTE_CHANGED:
        tick._pause(ROUTE_CHANGED, f"paused: {message}")
    return True
