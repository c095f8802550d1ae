"""A gate's verdict: what one of the engine's rules (engine/route_guard.py, engine/gates.py)
tells the state machine (``lifecycle``) on a tick, for it to apply. The rule only judges; the
state machine alone writes the status, the actions and the Events.
"""

from __future__ import annotations

from dataclasses import dataclass

from acceltrial.api.reasons import ReasonCode
from acceltrial.api.status import PauseReason


@dataclass(frozen=True)
class GateVerdict:
    """The trial goes on (``passed``), rolls back, pauses, or else waits as it is."""

    passed: bool = False
    """The gate lets the trial's work on this tick go on."""
    message: str = ""
    """Why it rolls back or pauses (the status message and the Event)."""
    roll_back: ReasonCode | None = None
    """Roll the trial back, with this ``status.decision.reasonCode``."""
    pause: PauseReason | None = None
    """Pause the trial, for this ``status.pauseReason``."""


PASSED = GateVerdict(passed=True)
WAIT = GateVerdict()
