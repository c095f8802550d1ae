"""Admission of a trial by the operator: the checks the API server may not have made.

A CRD installed on a cluster without CEL support, or an object written before the CRD was
updated, can hold a spec the API would refuse today. Such a trial must change nothing in the
cluster: it is reported through conditions (and an Event, by the caller) naming every problem.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from acceltrial.api.status import Condition
from acceltrial.api.validation import Problem, validate_trial
from acceltrial.engine.conditions import ConditionStatus, remove_condition, set_condition

INVALID_SPEC = "InvalidSpec"


@dataclass(frozen=True)
class Admission:
    """The verdict on a trial's spec and the conditions that report it."""

    problems: tuple[Problem, ...]
    conditions: tuple[Condition, ...]
    message: str

    @property
    def valid(self) -> bool:
        return not self.problems


def admit(
    body: dict[str, Any], conditions: Sequence[Condition], generation: int | None, now: datetime
) -> Admission:
    """Judge ``body`` (a whole AcceleratorTrial object) and update its conditions."""

    def condition(
        current: Sequence[Condition], type_: str, status: ConditionStatus, reason: str, message: str
    ) -> list[Condition]:
        return set_condition(
            current,
            type_=type_,
            status=status,
            reason=reason,
            message=message,
            generation=generation,
            now=now,
        )

    problems = tuple(validate_trial(_without_status(body)))
    if problems:
        listed = "; ".join(str(p) for p in problems)
        message = f"invalid spec, nothing was changed in the cluster: {listed}"
        updated = condition(conditions, "Ready", "False", INVALID_SPEC, message)
        updated = condition(updated, "Degraded", "True", INVALID_SPEC, message)
        # kstatus: only a person can fix the spec, so the trial is Stalled, not Reconciling.
        updated = condition(updated, "Stalled", "True", INVALID_SPEC, message)
        return Admission(problems, tuple(remove_condition(updated, "Reconciling")), message)
    message = "spec is valid; the trial waits to start"
    updated = remove_condition(
        condition(conditions, "Ready", "False", "Pending", message), "Degraded"
    )
    updated = condition(updated, "Reconciling", "True", "Pending", message)
    return Admission((), tuple(remove_condition(updated, "Stalled")), message)


def _without_status(body: dict[str, Any]) -> dict[str, Any]:
    # Admission judges what the user wrote; status is the operator's and kopf's bookkeeping.
    return {k: v for k, v in body.items() if k != "status"}
