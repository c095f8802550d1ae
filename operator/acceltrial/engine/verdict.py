"""A gate's verdict: what one of the engine's rules (engine/gates.py, engine/route_guard.py)
tells the state machine (``lifecycle``) on a tick, for it to apply. The rule only judges; the
state machine alone writes the status, the actions and the Events.
"""

from __future__ import annotations

from dataclasses import dataclass

from acceltrial.api.reasons import ReasonCode
from acceltrial.api.status import PauseReason
from acceltrial.engine.ticks import Action, Event


@dataclass(frozen=True)
class GateVerdict:
    """The trial goes on (``passed``), rolls back, fails, pauses, or else waits where it is."""

    passed: bool = False
    """The gate lets the trial's work on this tick go on."""
    roll_back: ReasonCode | None = None
    """Roll the trial back, for ``reason``, with this ``status.decision.reasonCode``."""
    fail: ReasonCode | None = None
    """End the trial Failed before anything is routed, for ``reason``, with this reasonCode."""
    pause: PauseReason | None = None
    """Pause the trial, saying ``message``, for this ``status.pauseReason``."""
    reason: str = ""
    """Why the trial rolls back or fails (``status.decision.reason``)."""
    message: str = ""
    """The status message, when the verdict says one: why the trial pauses, what it waits for,
    or for a failure what it left as it was."""
    actions: tuple[Action, ...] = ()
    """What to do whatever the verdict (each action idempotent)."""
    events: tuple[Event, ...] = ()
    """Events to post whatever the verdict."""


PASSED = GateVerdict(passed=True)
WAIT = GateVerdict()
