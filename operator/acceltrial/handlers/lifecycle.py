"""The kopf handlers that run a trial: a timer ticks the state machine; deletion undoes it.

Each tick reads the trial into models, lets :class:`~acceltrial.handlers.world.TrialWorld`
observe, asks the engine to decide, applies the actions in order and only then writes the new
status. If an action fails, no status is written and the tick is retried: every action is
idempotent, a tick writes the route at most once, and a route already at the next step's weight
(the status write of the tick that advanced was lost) is that step begun, so a crash or a retry
never shifts a weight twice or skips one.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, cast

import kopf
from pydantic import ValidationError

from acceltrial.api.actions import ACTION_ANNOTATION, UserAction, requested_action
from acceltrial.api.spec import TrialSpec
from acceltrial.api.status import PHASES, TERMINAL_PHASES, TrialStatus
from acceltrial.api.trial import GROUP, PLURAL, VERSION
from acceltrial.engine.candidate import TrialRef
from acceltrial.engine.capacity import (
    ScaleNodeGroup,
    capacity_tick,
    counts_launched,
    release_on_delete,
)
from acceltrial.engine.capacity_gate import capacity_due
from acceltrial.engine.lifecycle import decide
from acceltrial.engine.notifications import Transition
from acceltrial.engine.ticks import ClearUserAction, Observation, SetWeight, TickResult
from acceltrial.engine.undo import on_delete
from acceltrial.handlers.capacity_test import SWEEPS
from acceltrial.handlers.config import config_from_env
from acceltrial.handlers.freshness import WrittenStatuses
from acceltrial.handlers.metrics import (
    ANALYSIS_RESULTS,
    MEASUREMENTS,
    RECONCILE_SECONDS,
    record_costs,
    record_trial,
)
from acceltrial.handlers.notify import notify
from acceltrial.handlers.retries import backoff_seconds
from acceltrial.handlers.specs import valid_spec
from acceltrial.handlers.trials import TrialIndex
from acceltrial.handlers.world import TrialWorld
from acceltrial.kube.calls import KubeError
from acceltrial.kube.gateway import Kube
from acceltrial.providers.capacity.nodegroup import CapacityError
from acceltrial.providers.reports.port import ReportChanged
from acceltrial.providers.reports.s3 import ReportUploadError
from acceltrial.providers.routing.port import RoutingProblem

LOG = logging.getLogger(__name__)
TICK_SECONDS = config_from_env().tick_seconds
WRITTEN = WrittenStatuses()
"""The last status this process wrote for each trial (handlers/freshness.py)."""
Loaded = tuple[TrialSpec, TrialStatus, TrialRef]


@kopf.timer(GROUP, VERSION, PLURAL, interval=TICK_SECONDS, initial_delay=TICK_SECONDS / 2)
def tick(body: kopf.Body, memo: kopf.Memo, retry: int = 0, **indexes: Any) -> None:
    # kopf passes every index by its function's name (handlers/trials.py).
    on_baselines = cast(TrialIndex, indexes["trials_by_baseline"])
    with RECONCILE_SECONDS.time():
        _tick(body, memo, on_baselines, backoff_seconds(retry, TICK_SECONDS))


def _tick(body: kopf.Body, memo: kopf.Memo, on_baselines: TrialIndex, delay: float) -> None:
    kube = cast(Kube, memo.kube)
    if _ended(body):
        # Checked before the spec is validated: an ended trial costs no CPU per tick.
        observed = (body.get("status") or {}).get("observedGeneration")
        _observe_edit(body, kube, observed, delay)
        return
    current = _current(body, kube, delay)
    if current is None:
        return  # invalid (the admission handler reports it, and nothing is touched), or gone
    body, (spec, status, trial) = current
    recorded = body.get("status") or {}
    on_baseline = on_baselines.get((trial.namespace, spec.baseline.deployment_ref.name), ())
    world = TrialWorld(kube, spec, trial, list(on_baseline))
    action = _user_action(body)
    now = datetime.now(UTC)
    generation = int(body.meta.get("generation") or 0)
    try:
        observation = world.observe(status, now, generation, action)
        result = _act(world, decide(spec, status, observation), delay, now)
        result = _settle_capacity(world, status, result, now)
    except KubeError as error:
        if not error.permanent or status.phase == "RollingBack":
            raise kopf.TemporaryError(f"will retry in {delay:g}s: {error}", delay=delay) from error
        LOG.warning("trial %s: %s", trial.name, error)
        observation = Observation(now=now, generation=generation, refused=str(error))
        result = _act(world, decide(spec, status, observation), delay, now)
        result = _settle_capacity(world, status, result, now)
    except RoutingProblem as error:
        raise kopf.TemporaryError(f"will retry in {delay:g}s: {error}", delay=delay) from error
    if not capacity_due(spec, result.status, True):
        SWEEPS.cancel(trial.uid)  # moved on, ended or failed: no sweep should load the pods
    _log_decisions(trial, status, result.status, observation)
    if observation.measurement is not None or result.status.phase != status.phase:
        _report(world, result.status, observation, now)
    cleared = any(isinstance(step, ClearUserAction) for step in result.actions)
    written = _dump(result.status)
    _write(kube, trial, status_patch(recorded, written), cleared, delay)
    WRITTEN.remember(trial.uid, written)
    if spec.notifications:
        notify(kube, trial, spec, Transition(status, result.status, now))
    _export(trial, result.status, observation)
    for event in result.events:
        kopf.event(body, type=event.type, reason=event.reason, message=event.message)


def _ended(body: kopf.Body) -> bool:
    return (body.get("status") or {}).get("phase") in TERMINAL_PHASES


def _current(body: kopf.Body, kube: Kube, delay: float) -> tuple[kopf.Body, Loaded] | None:
    """The trial as loaded, read afresh when kopf's copy does not hold this process's last
    status write for it yet (handlers/freshness.py); None when invalid, gone or ended since."""
    loaded = _load(body)
    if loaded is None or not WRITTEN.behind(loaded[2].uid, _dump(loaded[1])):
        return None if loaded is None else (body, loaded)
    trial = loaded[2]
    LOG.info("[%s/%s] kopf's copy is behind this operator's last status write; reading the "
             "trial afresh", trial.namespace, trial.name)  # fmt: skip
    try:
        fresh = kube.trial(trial.namespace, trial.name)
    except KubeError as error:
        raise kopf.TemporaryError(f"will retry in {delay:g}s: {error}", delay=delay) from error
    if fresh is None:
        return None
    WRITTEN.forget(trial.uid)  # the API server's copy is the truth from here on
    body = kopf.Body(cast(kopf.RawBody, fresh))
    loaded = _load(body)
    if loaded is None or _ended(body):
        return None
    return body, loaded


def _observe_edit(body: kopf.Body, kube: Kube, observed: object, delay: float) -> None:
    """An ended trial acts on no edit, but records that it saw it: kstatus and Argo CD read a
    status.observedGeneration behind metadata.generation as a trial still in progress."""
    generation = body.meta.get("generation")
    if generation is not None and observed != generation:
        trial = TrialRef(str(body.meta["name"]), str(body.meta["namespace"]), "")
        _write(kube, trial, {"observedGeneration": generation}, False, delay)


def _write(
    kube: Kube, trial: TrialRef, status: dict[str, Any], clear_action: bool, delay: float
) -> None:
    """Write the tick's status, then clear a handled user action, through the gateway. Not
    through kopf's patch: kopf (1.45) does not retry a timer's failed patch, and the timer then
    never runs again for that trial; a failure here is retried like any temporary error, and
    the actions already applied are idempotent."""
    try:
        if status:
            kube.patch_trial_status(trial.namespace, trial.name, status)
        if clear_action:
            kube.annotate_trial(trial.namespace, trial.name, {ACTION_ANNOTATION: None})
    except KubeError as error:
        raise kopf.TemporaryError(f"will retry in {delay:g}s: {error}", delay=delay) from error


def _act(world: TrialWorld, result: TickResult, delay: float, began: datetime) -> TickResult:
    """Apply the engine's actions in order (an error leaves the status unwritten)."""
    try:
        for step in result.actions:
            if not isinstance(step, ClearUserAction):  # cleared once the status is written
                world.execute(step, result.status)
    except RoutingProblem as error:
        raise kopf.TemporaryError(f"will retry in {delay:g}s: {error}", delay=delay) from error
    return counted_from_the_write(result, began)


def counted_from_the_write(result: TickResult, began: datetime) -> TickResult:
    """A step (or the bake) this tick began counts from when its weight was written, not from
    when the tick began: on a busy cluster a tick's reads and writes take seconds, and a step's
    windows from the tick's start would hold the previous share's requests and miss as many of
    its own at its end."""
    weighed = any(isinstance(step, SetWeight) for step in result.actions)
    if not weighed or result.status.step_started_at != began:
        return result
    written = result.status.model_copy(update={"step_started_at": datetime.now(UTC)})
    return replace(result, status=written)


def _settle_capacity(
    world: TrialWorld, before: TrialStatus, result: TickResult, now: datetime
) -> TickResult:
    """Add or give back node group capacity as the tick moved the trial (engine/capacity.py),
    after the engine's actions: a rollback removes the candidate before its nodes go."""
    launched = world.launched_nodes() if counts_launched(before) else None
    status, sizes = capacity_tick(before, result.status, world.capacity_finding, now, launched)
    for size in sizes:
        _set_size(world, size)
    return replace(result, status=status)


def _set_size(world: TrialWorld, size: ScaleNodeGroup) -> None:
    try:
        world.capacity.set_desired_size(size.desired_size)
    except CapacityError as error:
        raise kopf.TemporaryError(f"will retry: {error}", delay=TICK_SECONDS) from error


@kopf.on.delete(GROUP, VERSION, PLURAL)
def deleted(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    loaded = _load(body)
    if loaded is None:
        return
    spec, status, trial = loaded
    SWEEPS.cancel(trial.uid)
    world = TrialWorld(cast(Kube, memo.kube), spec, trial)
    try:
        handed_over = world.candidate_handed_over()
        for action in on_delete(status, handed_over):
            world.execute(action, status)
        for size in release_on_delete(status, handed_over):
            _set_size(world, size)
    except (KubeError, RoutingProblem) as error:
        raise kopf.TemporaryError(f"will retry: {error}", delay=TICK_SECONDS) from error


def _log_decisions(
    trial: TrialRef, before: TrialStatus, after: TrialStatus, observation: Observation
) -> None:
    """The operator's decisions in its own log: each measurement's outcome, each phase change and
    the final decision, so a log read after the fact tells why the trial went where it did."""
    name = f"{trial.namespace}/{trial.name}"
    measurement = observation.measurement
    if measurement is not None:
        first = measurement.results[0] if measurement.results else None
        weight = first.weight if first else before.canary_weight or 0
        LOG.info("[%s] measurement at %d%%: %s: %s", name, weight, measurement.outcome,
                 measurement.reason)  # fmt: skip
        for result in measurement.results:
            if result.verdict != "Pass":
                LOG.info("[%s]   %s %s: %s", name, result.criterion, result.verdict, result.reason)
    if after.phase != before.phase:
        LOG.info("[%s] phase %s -> %s: %s", name, before.phase or "(new)", after.phase,
                 after.message or "")  # fmt: skip
    if after.decision is not None and after.decision != before.decision:
        LOG.info("[%s] decision %s: %s", name, after.decision.verdict, after.decision.reason)


def _report(
    world: TrialWorld, status: TrialStatus, observation: Observation, now: datetime
) -> None:
    """Keep the report current; a failure to write it never holds the trial up."""
    try:
        world.write_report(status, observation.measurement, now)
    except (KubeError, ReportUploadError, ReportChanged) as error:
        LOG.warning("could not write the report of %s: %s", world.trial.name, error)


def status_patch(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """A JSON merge patch turning ``old`` into ``new``: vanished keys become null, at any depth."""
    patch: dict[str, Any] = {key: None for key in old if key not in new}
    for key, value in new.items():
        before = old.get(key)
        if isinstance(value, dict) and isinstance(before, dict):
            nested = status_patch(before, value)
            if nested:
                patch[key] = nested
        elif value != before:
            patch[key] = value
    return patch


def _export(trial: TrialRef, status: TrialStatus, observation: Observation) -> None:
    phase = status.phase or "Pending"
    record_trial(trial.namespace, trial.name, phase, status.canary_weight or 0, PHASES)
    record_costs(trial.namespace, trial.name, status.economics)
    if observation.measurement is not None:
        MEASUREMENTS.labels(trial.namespace, trial.name, observation.measurement.outcome).inc()
        for result in observation.measurement.results:
            ANALYSIS_RESULTS.labels(
                trial.namespace, trial.name, result.criterion, result.verdict
            ).inc()


def _load(body: kopf.Body) -> Loaded | None:
    raw = dict(body)
    spec = valid_spec(raw)
    if spec is None:
        return None
    try:
        status = TrialStatus.model_validate(raw.get("status") or {})
    except ValidationError:
        return None
    meta = body.meta
    return spec, status, TrialRef(str(meta["name"]), str(meta["namespace"]), str(meta["uid"]))


def _user_action(body: kopf.Body) -> UserAction | None:
    return requested_action(body.meta.annotations)


def _dump(status: TrialStatus) -> dict[str, Any]:
    return status.model_dump(mode="json", by_alias=True, exclude_none=True)
