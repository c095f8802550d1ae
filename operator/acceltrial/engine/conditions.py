"""Status conditions in the metav1.Condition shape, kept the way kstatus readers expect, and
the ones a trial's phase says (``phase_conditions``): Ready, Progressing, Degraded, and kstatus'
Reconciling and Stalled.

``lastTransitionTime`` changes only when a condition's status flips; reason and message may change
without a transition. Conditions are kept sorted by type so a status written twice is identical.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Literal

from acceltrial.api.status import Condition, Phase, TrialStatus

ConditionStatus = Literal["True", "False", "Unknown"]
SPEC_CHANGE_REJECTED = "SpecChangeRejected"
SPEC_CHANGE_HELD = (
    "spec.steps or spec.analysis changed after the trial started; the change is refused and the "
    "trial holds. Restore them, or delete and re-create the trial to restart."
)
"""Condition: spec.steps or spec.analysis changed after the start; the trial holds."""
_PROGRESSING_PHASES: frozenset[Phase] = frozenset(
    {"Pending", "Preflight", "Progressing", "Promoting", "BakingIn"}
)
_RECONCILING_PHASES: frozenset[Phase] = frozenset({*_PROGRESSING_PHASES, "RollingBack"})
"""Phases the operator moves on from by itself: kstatus' Reconciling."""
_STALLED_PHASES: frozenset[Phase] = frozenset({"RolledBack", "Failed", "Aborted"})
"""Phases only a person can move on from (a new trial): kstatus' Stalled."""


def set_condition(
    conditions: Sequence[Condition],
    *,
    type_: str,
    status: ConditionStatus,
    reason: str,
    message: str,
    generation: int | None,
    now: datetime,
) -> list[Condition]:
    """Return ``conditions`` with condition ``type_`` set; other conditions are kept as they are."""
    previous = next((c for c in conditions if c.type == type_), None)
    transition = now
    if previous is not None and previous.status == status:
        transition = previous.last_transition_time
    updated = Condition(
        type=type_,
        status=status,
        reason=reason,
        message=message,
        observed_generation=generation,
        last_transition_time=transition,
    )
    others = [c for c in conditions if c.type != type_]
    return sorted([*others, updated], key=lambda c: c.type)


def remove_condition(conditions: Sequence[Condition], type_: str) -> list[Condition]:
    """Return ``conditions`` without condition ``type_``."""
    return [c for c in conditions if c.type != type_]


def phase_conditions(status: TrialStatus, generation: int, now: datetime) -> list[Condition]:
    """``status.conditions`` with Ready, Progressing and Degraded set from the phase, then
    Reconciling while the operator moves the trial on by itself, Stalled while only a person
    can; otherwise neither (kstatus reads an absent condition as False, and then Ready). A
    person's pause and a wait for approval are neither: kstatus reads them from Ready=False as
    InProgress, since the trial has not reached its outcome and nothing is wrong with it."""
    phase = status.phase or "Pending"
    message = status.message or ""

    def put(
        conditions: list[Condition],
        type_: str,
        value: ConditionStatus,
        text: str,
        reason: str = phase,
    ) -> list[Condition]:
        return set_condition(
            conditions,
            type_=type_,
            status=value,
            reason=reason,
            message=text,
            generation=generation,
            now=now,
        )

    conditions = list(status.conditions or [])
    conditions = put(conditions, "Ready", "True" if phase == "Promoted" else "False", message)
    progressing: ConditionStatus = "True" if phase in _PROGRESSING_PHASES else "False"
    conditions = put(conditions, "Progressing", progressing, message)
    if phase in _STALLED_PHASES:
        decided = status.decision.reason if status.decision else message
        conditions = put(conditions, "Degraded", "True", decided)
    else:
        conditions = remove_condition(conditions, "Degraded")
    stalled = _stalled(status, conditions)
    if stalled is not None:
        reason, why = stalled
        conditions = remove_condition(conditions, "Reconciling")
        return put(conditions, "Stalled", "True", why, reason)
    conditions = remove_condition(conditions, "Stalled")
    if phase in _RECONCILING_PHASES:
        return put(conditions, "Reconciling", "True", message)
    return remove_condition(conditions, "Reconciling")


def _stalled(status: TrialStatus, conditions: list[Condition]) -> tuple[str, str] | None:
    """(reason, message) when the trial cannot go on without a person, else None."""
    phase = status.phase or "Pending"
    message = status.message or ""
    if phase in _STALLED_PHASES:
        return phase, status.decision.reason if status.decision else message
    if phase == "Paused" and status.pause_reason in (
        "Inconclusive",
        "RouteChanged",
        "QualityInconclusive",
        "CapacityInconclusive",
    ):
        return status.pause_reason, message
    held = next((c for c in conditions if c.type == SPEC_CHANGE_REJECTED), None)
    if held is not None and held.status == "True" and phase != "RollingBack":
        return SPEC_CHANGE_REJECTED, held.message
    return None
