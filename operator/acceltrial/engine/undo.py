"""What undoes a trial's changes: a rollback's actions (``undo``), and the actions before a
deleted trial's finalizer is removed (``on_delete``; docs/lifecycle.md, "Deleting a trial").
Pure: from the status, the actions, in order, each idempotent.
"""

from __future__ import annotations

from acceltrial.api.status import TERMINAL_PHASES, Phase, TrialStatus
from acceltrial.engine.ticks import (
    Action,
    HandOverCandidate,
    RemoveCandidate,
    RestoreAutoscaler,
    RestoreRouting,
    ScaleBaselineToZero,
)


def on_delete(status: TrialStatus, candidate_handed_over: bool) -> tuple[Action, ...]:
    """Actions before a deleted trial's finalizer is removed (docs/lifecycle.md, "Deleting a
    trial"): an unfinished trial is rolled back exactly; a promoted one changes nothing but makes
    sure the candidate no longer belongs to the trial, so garbage collection cannot take it."""
    phase = status.phase
    if phase == "Promoted":
        return (HandOverCandidate(),)
    if phase in (*TERMINAL_PHASES, None, "Pending"):
        return ()
    if phase in ("Promoting", "BakingIn") and candidate_handed_over:
        # The promotion was decided and the handover done; only the bookkeeping was left.
        return (HandOverCandidate(), ScaleBaselineToZero())
    return undo(status)


def undo(status: TrialStatus) -> tuple[Action, ...]:
    """Routing back first (the baseline still has its pods), then its autoscaler, then the
    candidate goes."""
    autoscaler = (RestoreAutoscaler(),) if status.original and status.original.hpa else ()
    return (RestoreRouting(), *autoscaler, RemoveCandidate())


def rolled_back(status: TrialStatus) -> tuple[Phase, str]:
    """Where a rollback ends (Aborted for a person's abort) and what it says it left."""
    decision = status.decision
    final: Phase = "Aborted" if decision and decision.verdict == "abort" else "RolledBack"
    # The candidate is deployed as the trial leaves preflight (step 0): before, nothing was.
    if status.step is None:
        return final, "nothing was changed: the candidate was never deployed"
    return final, "routing restored as found; candidate removed"
