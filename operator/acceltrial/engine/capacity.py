"""Capacity bookkeeping of a trial: what the capacity provider found at preflight, what the
trial adds to a node group and when it gives it back. Pure: plain values in, the next
``status.capacity`` and the node group sizes to set out.

The node group's desiredSize is raised only on the tick after the original size is recorded in
the status, so a crash between the two can never record a size the trial itself set. Every
size set is absolute (never "plus one"), so a replayed tick sets the same size again. The
original size comes back when the trial ends without promotion (RolledBack, Aborted, Failed,
or deleted before the handover); after promotion the nodes the promoted candidate needs stay.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from acceltrial.api.capacity import CapacityProviderName, CapacityStatus
from acceltrial.api.status import Phase, TrialStatus

_ENDED_WITHOUT_PROMOTION: frozenset[Phase] = frozenset({"RolledBack", "Aborted", "Failed"})
_RUNNING: frozenset[Phase] = frozenset({"Progressing", "Paused", "Promoting", "BakingIn"})


@dataclass(frozen=True)
class CapacityNeed:
    """What the candidate asks of a node: ``per_pod`` of ``resource`` on ``instance_type``,
    for ``replicas`` pods."""

    instance_type: str
    resource: str
    per_pod: int
    replicas: int


@dataclass(frozen=True)
class ScalePlan:
    """A node group the trial may grow: its sizes now and how many candidate pods a node
    holds."""

    desired_size: int
    max_size: int
    pods_per_node: int
    nodes_to_add: int


@dataclass(frozen=True)
class CapacityFinding:
    """What a capacity provider found at preflight."""

    provider: CapacityProviderName
    source: str
    """Where the nodes come from, for status and report (NodePool x, node group c/n, Nodes)."""
    problems: tuple[str, ...] = ()
    """Why the trial cannot start; empty when it can."""
    plan: ScalePlan | None = None
    """A node group to grow for the trial (eks-nodegroup with scale: true)."""
    waits: tuple[str, ...] = ()
    """What may pass by itself (EKS throttled or unreachable): the trial waits for it, within
    progressDeadline."""


@dataclass(frozen=True)
class ScaleNodeGroup:
    """Set the trial's node group's desiredSize to ``desired_size``."""

    desired_size: int


def nodes_for(pods: int, pods_per_node: int) -> int:
    """Nodes that hold ``pods`` candidate pods."""
    return math.ceil(pods / max(1, pods_per_node))


def capacity_tick(
    before: TrialStatus,
    after: TrialStatus,
    finding: CapacityFinding | None,
    now: datetime,
    launched: int | None = None,
) -> tuple[TrialStatus, tuple[ScaleNodeGroup, ...]]:
    """The status with ``capacity`` brought up to date, and the node group size to set, for a
    tick that moved the trial from ``before`` to ``after``. ``launched``: the NodePool's nodes
    that run candidate pods (Karpenter), counted once the trial asks for them."""
    recorded = before.capacity
    if recorded is None:
        started = before.phase == "Preflight" and after.phase == "Progressing"
        if not started or finding is None or finding.provider == "nodes":
            return after, ()
        # Recorded now, acted on from the next tick (see the module docstring).
        return after.model_copy(update={"capacity": _record(finding)}), ()
    if launched and recorded.provider == "karpenter" and recorded.added_at is None:
        message = f"Karpenter launched {launched} node(s) from {recorded.source} for the candidate"
        recorded = _with(recorded, added_nodes=launched, added_at=now, message=message)
    capacity, actions = _follow(recorded, after, now)
    return after.model_copy(update={"capacity": capacity}), actions


def counts_launched(status: TrialStatus) -> bool:
    """Whether this tick should count the nodes Karpenter launched for the candidate (once, while
    the candidate runs)."""
    capacity = status.capacity
    return (
        capacity is not None
        and capacity.provider == "karpenter"
        and capacity.added_at is None
        and capacity.released_at is None
        and status.phase in _RUNNING
    )


def release_on_delete(status: TrialStatus, handed_over: bool) -> tuple[ScaleNodeGroup, ...]:
    """The node group size to restore when an unfinished trial is deleted."""
    capacity = status.capacity
    if capacity is None or capacity.original_desired_size is None or capacity.added_at is None:
        return ()
    if capacity.released_at is not None or status.phase == "Promoted" or handed_over:
        return ()
    return (ScaleNodeGroup(capacity.original_desired_size),)


def _record(finding: CapacityFinding) -> CapacityStatus:
    plan = finding.plan
    if plan is None:
        message = (
            f"Karpenter provisions the candidate's nodes from {finding.source}"
            if finding.provider == "karpenter"
            else f"the candidate fits on the nodes {finding.source} has"
        )
        return CapacityStatus(provider=finding.provider, source=finding.source, message=message)
    target = min(plan.max_size, plan.desired_size + plan.nodes_to_add)
    return CapacityStatus(
        provider=finding.provider,
        source=finding.source,
        original_desired_size=plan.desired_size,
        desired_size=target,
        max_size=plan.max_size,
        pods_per_node=plan.pods_per_node,
        message=f"will raise desiredSize from {plan.desired_size} to {target}",
    )


def _follow(
    capacity: CapacityStatus, after: TrialStatus, now: datetime
) -> tuple[CapacityStatus, tuple[ScaleNodeGroup, ...]]:
    if capacity.released_at is not None or capacity.kept_nodes is not None:
        return capacity, ()
    if after.phase in _ENDED_WITHOUT_PROMOTION:
        return _release(capacity, now)
    if after.phase == "Promoted":
        return _keep(capacity), ()
    if capacity.original_desired_size is None or after.phase not in _RUNNING:
        return capacity, ()
    return _grow(capacity, after, now)


def _release(
    capacity: CapacityStatus, now: datetime
) -> tuple[CapacityStatus, tuple[ScaleNodeGroup, ...]]:
    original = capacity.original_desired_size
    if original is None:
        message = f"the candidate was removed; {capacity.source} scales its nodes in"
        return _with(capacity, released_at=now, message=message), ()
    message = f"desiredSize restored to {original}"
    return _with(capacity, released_at=now, message=message), (ScaleNodeGroup(original),)


def _keep(capacity: CapacityStatus) -> CapacityStatus:
    if capacity.original_desired_size is None:
        message = f"the promoted candidate keeps its nodes from {capacity.source}"
        return _with(capacity, kept_nodes=capacity.added_nodes, message=message)
    message = f"{capacity.added_nodes} added node(s) kept for the promoted candidate"
    return _with(capacity, kept_nodes=capacity.added_nodes, message=message)


def _grow(
    capacity: CapacityStatus, after: TrialStatus, now: datetime
) -> tuple[CapacityStatus, tuple[ScaleNodeGroup, ...]]:
    original = capacity.original_desired_size or 0
    target = _target(capacity, after)
    if capacity.added_at is not None and target == capacity.desired_size:
        return capacity, ()
    updated = _with(
        capacity,
        desired_size=target,
        added_nodes=target - original,
        added_at=capacity.added_at or now,
        message=f"desiredSize raised from {original} to {target} for the candidate",
    )
    return updated, (ScaleNodeGroup(target),)


def _target(capacity: CapacityStatus, after: TrialStatus) -> int:
    """The size the trial needs now: what preflight planned, more while promotion scales the
    candidate for all traffic (never beyond maxSize)."""
    planned = capacity.desired_size or 0
    if after.phase not in ("Promoting", "BakingIn") or after.promotion is None:
        return planned
    original = capacity.original_desired_size or 0
    needed = original + nodes_for(after.promotion.replicas, capacity.pods_per_node or 1)
    limit = capacity.max_size if capacity.max_size is not None else needed
    return max(planned, min(limit, needed))


def _with(capacity: CapacityStatus, **changes: object) -> CapacityStatus:
    return capacity.model_copy(update=changes)
