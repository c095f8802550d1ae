"""Where a trial stands on its schedule, read from its spec and status: the weight it asks
the router for now and the share that weight really gives, the share of requests it mirrors,
the step the route already holds, whether a measurement is due, whether a spec duration has
passed; and the hash of what is frozen at its start (the steps and the analysis), by which a
later change to them is refused.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta

from acceltrial.api.durations import duration_seconds
from acceltrial.api.spec import TrialSpec
from acceltrial.api.status import Phase, ReplicasOriginal, TrialStatus
from acceltrial.engine.routing import replica_share
from acceltrial.engine.ticks import Observation

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


def share_of(status: TrialStatus, weight: int) -> int:
    """The share ``weight`` really gives: for the replicas router, whole pods beside the
    baseline's recorded replicas (the next ticks read the ready pods behind the Service)."""
    original = status.original
    if isinstance(original, ReplicasOriginal) and original.baseline_replicas:
        return replica_share(original.baseline_replicas, weight)
    return weight


def mirror_at(spec: TrialSpec, status: TrialStatus) -> int:
    """The percentage of requests the trial copies to the candidate now: a mirror step's, while
    the trial is at that step before promotion; 0 otherwise."""
    if status.phase not in ("Progressing", "Paused") or not status.step:
        return 0
    if requested_weight(status):
        return 0
    return spec.steps[status.step - 1].mirrored if status.step <= len(spec.steps) else 0


def routed_step(spec: TrialSpec, status: TrialStatus, seen: Observation) -> int | None:
    """The next step, when the route already holds its weight, written by this trial (no
    conflict): the tick that advanced applied its route write but lost its status write.
    Judging the old step again could set the route back a step before moving it forward again
    (a weight twice); the advance was decided, so the next step starts now (its measurement
    from this moment). A pending user action is left to the ordinary path, which repeats that
    tick's decision."""
    step, observed = status.step or 0, seen.observed_weight
    if seen.action is not None or seen.routing_conflict is not None:
        return None
    if observed is None or step >= len(spec.steps):
        return None
    current, following = spec.steps[step - 1].share, spec.steps[step].share
    if observed == current or observed != following:
        return None
    return step + 1


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


def stage_end(spec: TrialSpec, status: TrialStatus) -> datetime | None:
    """When the current step (or the bake) has lasted its duration, counted from its last
    share change; None while paused, where nothing ends by itself. A step passes only on a
    measurement taken at or after it (``measured_to_end``): its verdict rests on its last
    window, not on one a busy operator took well before its end. (No extra measurement is
    taken at the end: each window spans one ``analysis.interval``, and one less than an
    interval after the last would count requests twice in the promotion's evidence.)"""
    if status.step_started_at is None:
        return None
    if status.phase == "BakingIn":
        return status.step_started_at + as_timedelta(spec.promotion.bake_time)
    if status.phase == "Progressing" and status.step:
        duration = spec.steps[status.step - 1].duration
        return status.step_started_at + as_timedelta(duration)
    return None


def measured_to_end(spec: TrialSpec, status: TrialStatus) -> bool:
    """Whether the latest measurement covers the current step or bake to its end."""
    end = stage_end(spec, status)
    last = status.last_measurement_at
    return end is not None and last is not None and last >= end


def as_timedelta(duration: str) -> timedelta:
    """A spec duration (``30s``, ``5m``) as a timedelta."""
    return timedelta(seconds=duration_seconds(duration))


def elapsed(since: datetime, duration: str, now: datetime) -> bool:
    """Whether the spec ``duration`` has passed ``since`` at ``now``."""
    return now >= since + as_timedelta(duration)
