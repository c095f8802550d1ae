"""Where a trial stands on its schedule, read from its spec and status: the weight it asks
the router for now, the share of requests it mirrors, whether a measurement is due, whether a
spec duration has passed; and the hash of what is frozen at its start (the steps and the
analysis), by which a later change to them is refused.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta

from acceltrial.api.durations import duration_seconds
from acceltrial.api.spec import TrialSpec
from acceltrial.api.status import Phase, TrialStatus

MEASURED_PHASES: frozenset[Phase] = frozenset({"Progressing", "Paused", "BakingIn"})
"""Phases in which the candidate serves and its measurements are judged."""


def criteria_hash(spec: TrialSpec) -> str:
    """Hash of what is frozen at the start: the steps and the analysis."""
    frozen = {
        # Unset fields (a step's mirror) are left out, so trials started before they existed
        # keep their hash.
        "steps": [s.model_dump(mode="json", by_alias=True, exclude_none=True) for s in spec.steps],
        "analysis": spec.analysis.model_dump(mode="json", by_alias=True),
    }
    return hashlib.sha256(json.dumps(frozen, sort_keys=True).encode()).hexdigest()


def requested_weight(status: TrialStatus) -> int:
    """The weight the trial asks the router for now (``status.requestedWeight``; on a status
    written before it existed, ``canaryWeight``, which then held it)."""
    if status.requested_weight is not None:
        return status.requested_weight
    return status.canary_weight or 0


def mirror_at(spec: TrialSpec, status: TrialStatus) -> int:
    """The percentage of requests the trial copies to the candidate now: a mirror step's, while
    the trial is at that step before promotion; 0 otherwise."""
    if status.phase not in ("Progressing", "Paused") or not status.step:
        return 0
    if requested_weight(status):
        return 0
    return spec.steps[status.step - 1].mirrored if status.step <= len(spec.steps) else 0


def measurement_due(
    spec: TrialSpec, status: TrialStatus, now: datetime, share: int | None = None
) -> bool:
    """Whether a measurement should be taken now (one ``analysis.interval`` after the last);
    never when the router reads a ``share`` other than ``status.canaryWeight``: the window
    would straddle the change, and the step counts from it (see ``_follow_share`` in
    lifecycle.py)."""
    if status.phase not in MEASURED_PHASES or not status.step or status.step_started_at is None:
        return False
    if share is not None and share != status.canary_weight:
        return False
    since = max(status.step_started_at, status.last_measurement_at or status.step_started_at)
    return elapsed(since, spec.analysis.interval, now)


def as_timedelta(duration: str) -> timedelta:
    """A spec duration (``30s``, ``5m``) as a timedelta."""
    return timedelta(seconds=duration_seconds(duration))


def elapsed(since: datetime, duration: str, now: datetime) -> bool:
    """Whether the spec ``duration`` has passed ``since`` at ``now``."""
    return now >= since + as_timedelta(duration)
