"""Status conditions in the metav1.Condition shape, kept the way kstatus readers expect.

``lastTransitionTime`` changes only when a condition's status flips; reason and message may change
without a transition. Conditions are kept sorted by type so a status written twice is identical.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Literal

from acceltrial.api.status import Condition

ConditionStatus = Literal["True", "False", "Unknown"]


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
