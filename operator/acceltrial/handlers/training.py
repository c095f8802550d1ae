"""The kopf handler that runs a TrainingTrial: a timer reads the trial's Jobs, their first
pod's log, the prices, preflight's findings and Prometheus (handlers/training_reads.py), asks
the engine (engine/training/lifecycle.py) what comes next, creates or stops Jobs as it says,
then writes the status. Decides nothing itself.

Deleting a trial deletes its Jobs through their owner reference (the API server's garbage
collector), and nothing else.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any, cast

import kopf
from pydantic import ValidationError

from acceltrial.api.report import REPORT_KEY, report_name
from acceltrial.api.training import TRAINING_TERMINAL_PHASES, TrainingTrial, TrainingTrialStatus
from acceltrial.api.training.resource import TRAINING_GVR
from acceltrial.engine.candidate import TRIAL_LABEL, TrialRef, owner_reference
from acceltrial.engine.compile_gate import JOB_NAME_LABEL
from acceltrial.engine.training.jobs import ROLES, Role, job_name, training_job
from acceltrial.engine.training.lifecycle import (
    CreateJob,
    JobPhase,
    JobView,
    NodePrice,
    TrainingTick,
    TrainingWorld,
    Variant,
    training_tick,
)
from acceltrial.engine.training.report import training_report
from acceltrial.handlers.config import config_from_env
from acceltrial.handlers.freshness import WrittenStatuses
from acceltrial.handlers.lifecycle import status_patch
from acceltrial.handlers.neuron import failure_text, job_conditions
from acceltrial.handlers.retries import backoff_seconds
from acceltrial.handlers.specs import spec_problems
from acceltrial.handlers.training_reads import exported_readings, training_preflight
from acceltrial.kube.calls import KubeError
from acceltrial.kube.gateway import Kube
from acceltrial.providers.pricing.sources import price_sources
from acceltrial.providers.pricing.trial import trial_prices

LOG = logging.getLogger(__name__)
GROUP, VERSION, PLURAL = TRAINING_GVR
TICK_SECONDS = config_from_env().tick_seconds
WRITTEN = WrittenStatuses()
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
Manifest = dict[str, Any]


@kopf.timer(GROUP, VERSION, PLURAL, interval=TICK_SECONDS, initial_delay=TICK_SECONDS / 2)
def tick_training(body: kopf.Body, memo: kopf.Memo, retry: int = 0, **_: Any) -> None:
    kube = cast(Kube, memo.kube)
    delay = backoff_seconds(retry, TICK_SECONDS)
    raw = _fresh(kube, dict(body), delay)
    if raw is None:
        return
    trial = TrialRef(raw["metadata"]["name"], raw["metadata"]["namespace"],
                     raw["metadata"]["uid"])  # fmt: skip
    recorded = raw.get("status") or {}
    if recorded.get("phase") in TRAINING_TERMINAL_PHASES:
        return
    problems = spec_problems(raw)
    if problems:
        # Bad input: say which field and why; nothing is created.
        reason = "; ".join(problems)
        _write(kube, trial, recorded, {"phase": "Failed", "message": reason}, delay)
        return
    loaded = TrainingTrial.model_validate(raw)
    status = _status(recorded)
    try:
        world = _world(kube, loaded, trial, status)
        result = training_tick(loaded.spec, status, world)
        _act(kube, loaded, trial, result)
    except KubeError as error:
        if not error.permanent:
            raise kopf.TemporaryError(f"will retry in {delay:g}s: {error}", delay=delay) from error
        failed = {"phase": "Failed", "message": f"the API server refused: {error}"}
        _write(kube, trial, recorded, failed, delay)
        return
    if result.status.phase in TRAINING_TERMINAL_PHASES:
        _write_report(kube, loaded, trial, result.status, delay)
    written = result.status.model_dump(mode="json", by_alias=True, exclude_none=True)
    _write(kube, trial, recorded, written, delay)
    if result.status.phase != status.phase:
        LOG.info("training trial %s/%s: %s -> %s: %s", trial.namespace, trial.name,
                 status.phase, result.status.phase, result.status.message)  # fmt: skip


def _fresh(kube: Kube, raw: Manifest, delay: float) -> Manifest | None:
    """The trial with the last status this process wrote (read afresh when kopf's copy is
    behind it, so a run never starts twice or a decision is never made again)."""
    meta = raw.get("metadata") or {}
    uid = str(meta.get("uid", ""))
    if not WRITTEN.behind(uid, raw.get("status") or {}):
        return raw
    try:
        fresh = kube.trial(meta["namespace"], meta["name"], PLURAL)
    except KubeError as error:
        raise kopf.TemporaryError(f"will retry in {delay:g}s: {error}", delay=delay) from error
    WRITTEN.forget(uid)
    return fresh


def _status(recorded: Manifest) -> TrainingTrialStatus:
    try:
        return TrainingTrialStatus.model_validate(recorded)
    except ValidationError:
        return TrainingTrialStatus()  # an unreadable status: start over, Jobs are found again


def _world(
    kube: Kube, loaded: TrainingTrial, trial: TrialRef, status: TrainingTrialStatus
) -> TrainingWorld:
    jobs = {role: _job(kube, trial, role, _needs_log(status, role)) for role in ROLES}
    prices = _prices(loaded)
    starting = status.phase in ("Pending", "Preflight")  # preflight is judged at the start only
    return TrainingWorld(
        now=datetime.now(UTC),
        jobs={role: view for role, view in jobs.items() if view.phase != "Absent"},
        prices=prices,
        preflight=training_preflight(kube, loaded, prices) if starting else None,
        exported=exported_readings(kube, loaded, trial, status),
    )


def _job(kube: Kube, trial: TrialRef, role: Role, read_log: bool) -> JobView:
    """The Job of ``role``, with its first pod's log when the run still needs reading."""
    name = job_name(trial, role)
    job = kube.job(trial.namespace, name)
    if job is None or job["metadata"].get("deletionTimestamp"):
        return JobView("Absent")
    conditions = job_conditions(job)
    phase: JobPhase = "Running"
    failure = None
    if "Complete" in conditions:
        phase = "Succeeded"
    elif "Failed" in conditions:
        phase, failure = "Failed", failure_text(conditions["Failed"])
    return JobView(
        phase=phase,
        created_at=_time(job["metadata"].get("creationTimestamp")),
        finished_at=_time((job.get("status") or {}).get("completionTime")),
        failure=failure,
        log=tuple(_first_pod_log(kube, trial.namespace, name)) if read_log else (),
    )


def _needs_log(status: TrainingTrialStatus, role: Role) -> bool:
    """Whether the engine still reads the log of ``role``'s Job: not once its run finished
    (the status keeps what it measured) or its precompile succeeded."""
    candidate = status.runs.candidate if status.runs else None
    if role == "precompile":
        return candidate is None or candidate.precompile_seconds is None
    run = getattr(status.runs, role) if status.runs else None
    return run is None or run.state != "Finished"


def _first_pod_log(kube: Kube, namespace: str, job: str) -> list[str]:
    """The log of the Job's first pod (completion index 0, else the oldest), stamped."""
    pods = kube.pods(namespace, {JOB_NAME_LABEL: job})
    if not pods:
        return []
    pods.sort(key=lambda p: ((p["metadata"].get("annotations") or {}).get(COMPLETION_INDEX, "0")
                             != "0", p["metadata"].get("creationTimestamp") or ""))  # fmt: skip
    phase = (pods[0].get("status") or {}).get("phase")
    if phase == "Pending":
        return []
    try:
        text = kube.pod_log(namespace, pods[0]["metadata"]["name"], None, timestamps=True)
    except KubeError as error:
        if error.permanent and error.status != 400:
            raise
        return []  # a container not started yet answers 400
    return text.splitlines()


def _time(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None


def _prices(loaded: TrainingTrial) -> dict[Variant, NodePrice]:
    spec = loaded.spec
    _, source = price_sources(spec.economics.pricing)
    prices = trial_prices(spec.economics, spec.baseline.instance_type,
                          spec.candidate.instance_type, source)  # fmt: skip
    found: dict[Variant, NodePrice] = {}
    for variant, price in (("baseline", prices.baseline), ("candidate", prices.candidate)):
        if price.usd_per_hour is not None:
            found[cast(Variant, variant)] = NodePrice(price.usd_per_hour, price.source)
    return found


def _act(kube: Kube, loaded: TrainingTrial, trial: TrialRef, result: TrainingTick) -> None:
    for action in result.actions:
        if isinstance(action, CreateJob):
            kube.apply(training_job(loaded.spec, trial, action.role))
        else:
            kube.delete("Job", trial.namespace, job_name(trial, action.role))


def _write_report(
    kube: Kube, loaded: TrainingTrial, trial: TrialRef, status: TrainingTrialStatus, delay: float
) -> None:
    """The decision report, a ConfigMap <trial>-report owned by the trial (before the status
    that says the trial ended: a retried tick writes it again, never loses it)."""
    report = training_report(trial.name, trial.namespace, loaded.spec, status)
    manifest = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": report_name(trial.name),
            "namespace": trial.namespace,
            "labels": {TRIAL_LABEL: trial.name},
            "ownerReferences": [owner_reference(trial, "TrainingTrial")],
        },
        "data": {REPORT_KEY: report.model_dump_json(by_alias=True, exclude_none=True)},
    }
    try:
        kube.apply(manifest)
    except KubeError as error:
        if not error.permanent:
            raise kopf.TemporaryError(f"will retry in {delay:g}s: {error}", delay=delay) from error
        LOG.warning("training trial %s: the report was not written: %s", trial.name, error)


def _write(kube: Kube, trial: TrialRef, old: Manifest, new: Manifest, delay: float) -> None:
    patch = status_patch(old, new)
    try:
        if patch:
            kube.patch_trial_status(trial.namespace, trial.name, patch, PLURAL)
    except KubeError as error:
        raise kopf.TemporaryError(f"will retry in {delay:g}s: {error}", delay=delay) from error
    WRITTEN.remember(trial.uid, new)
