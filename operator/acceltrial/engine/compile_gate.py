"""The compile gate: ``candidate.compile`` runs a Neuron compile Job before the candidate is
deployed. This module owns the Job's manifest and the decision on each preflight tick: start the
Job, wait for it (within ``compile.timeout``), let the trial go on once it succeeded, or fail the
trial with the Job's reason and log tail. Pure: the Job comes in as a :class:`CompileJobState`.

The Job belongs to the trial (garbage-collected with it) and is left in place after it ends, so
its pods and logs stay readable; it never receives traffic.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from acceltrial.api.durations import duration_seconds
from acceltrial.api.neuron import CompileStatus
from acceltrial.api.report import Compatibility
from acceltrial.api.spec import TrialSpec
from acceltrial.engine.candidate import TRIAL_LABEL, VARIANT_LABEL, TrialRef

Manifest = dict[str, Any]
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
"""The label the Job controller puts on a Job's pods (Kubernetes 1.27+)."""
COMPILE_VARIANT = "compile"

JobPhase = Literal["Absent", "Running", "Succeeded", "Failed"]


@dataclass(frozen=True)
class StartCompile:
    """Create the compile Job (server-side apply: creating it twice changes nothing)."""


@dataclass(frozen=True)
class CompileJobState:
    """The compile Job as the cluster holds it."""

    name: str
    phase: JobPhase
    finished_at: datetime | None = None
    started_at: datetime | None = None
    """The Job's status.startTime: with finished_at, both the API server's (second precision),
    the compile's duration."""
    reason: str | None = None
    """For a failed Job: its condition's reason and message, then the tail of its pod's log."""


@dataclass(frozen=True)
class GateResult:
    """What the gate decided on this tick."""

    verdict: Literal["proceed", "wait", "fail"]
    message: str = ""
    status: CompileStatus | None = None
    """The new status.compile, when it changed."""
    actions: tuple[StartCompile, ...] = ()


def compile_job_name(trial: TrialRef) -> str:
    return f"{trial.name}-compile"[:63].rstrip("-")


def compile_job(spec: TrialSpec, trial: TrialRef) -> Manifest:
    """The compile Job: the user's pod template, ``restartPolicy: Never`` unless it says
    otherwise, ``NEURON_COMPILED_ARTIFACTS`` set to where the candidate will read the artifacts,
    the trial's labels, and ``activeDeadlineSeconds`` from ``compile.timeout``."""
    settings = spec.candidate.compile
    assert settings is not None  # only called when the spec asks for a compile
    labels = {TRIAL_LABEL: trial.name, VARIANT_LABEL: COMPILE_VARIANT}
    template = copy.deepcopy(settings.template)
    metadata = template.setdefault("metadata", {})
    metadata["labels"] = {**(metadata.get("labels") or {}), **labels}
    pod = template.setdefault("spec", {})
    pod.setdefault("restartPolicy", "Never")
    artifacts = spec.candidate.compiled_artifacts
    for container in pod.get("containers") or []:
        env = container.get("env") or []
        if artifacts is not None and all(e.get("name") != "NEURON_COMPILED_ARTIFACTS" for e in env):
            container["env"] = [*env, {"name": "NEURON_COMPILED_ARTIFACTS", "value": artifacts}]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": compile_job_name(trial),
            "namespace": trial.namespace,
            "labels": labels,
            "ownerReferences": [
                {
                    "apiVersion": "acceltrial.dev/v1alpha1",
                    "kind": "AcceleratorTrial",
                    "name": trial.name,
                    "uid": trial.uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "backoffLimit": settings.backoff_limit,
            "activeDeadlineSeconds": int(duration_seconds(settings.timeout)),
            "template": template,
        },
    }


def compile_gate(
    spec: TrialSpec, recorded: CompileStatus | None, job: CompileJobState | None, now: datetime
) -> GateResult:
    """The gate's decision for one preflight tick (see the module docstring)."""
    settings = spec.candidate.compile
    if settings is None or job is None:
        return GateResult("proceed")
    if recorded is None:
        started = CompileStatus(job=job.name, outcome="Running", started_at=now)
        message = f"compiling the model: Job {job.name} started (timeout {settings.timeout})"
        return GateResult("wait", message, started, (StartCompile(),))
    if recorded.outcome == "Succeeded":
        return GateResult("proceed")
    if job.phase == "Succeeded":
        return GateResult("proceed", status=_finished(recorded, "Succeeded", job, now))
    if job.phase == "Failed":
        why = job.reason or "the Job failed"
        return _failed(recorded, job, now, f"the compile Job {job.name} failed: {why}")
    return _running(settings.timeout, recorded, job, now)


def _running(
    timeout: str, recorded: CompileStatus, job: CompileJobState, now: datetime
) -> GateResult:
    """A Job not ended yet: wait for it, within the timeout."""
    if now >= recorded.started_at + timedelta(seconds=duration_seconds(timeout)):
        return _failed(
            recorded, job, now, f"the compile Job {job.name} did not finish within {timeout}"
        )
    waited = int((now - recorded.started_at).total_seconds())
    message = f"compiling the model: Job {job.name} running for {waited}s of {timeout}"
    # A Job deleted by someone mid-compile is created again: the gate still needs its answer.
    actions = (StartCompile(),) if job.phase == "Absent" else ()
    return GateResult("wait", message, actions=actions)


def _failed(recorded: CompileStatus, job: CompileJobState, now: datetime, why: str) -> GateResult:
    status = _finished(recorded, "Failed", job, now).model_copy(update={"reason": why[:8192]})
    return GateResult("fail", why, status)


def _finished(
    recorded: CompileStatus,
    outcome: Literal["Succeeded", "Failed"],
    job: CompileJobState,
    now: datetime,
) -> CompileStatus:
    finished = job.finished_at or now
    started = job.started_at if job.started_at and job.finished_at else recorded.started_at
    seconds = max(0.0, (finished - started).total_seconds())
    return recorded.model_copy(
        update={"outcome": outcome, "finished_at": finished, "seconds": seconds}
    )


def with_compile_note(
    compatibility: Compatibility, compiled: CompileStatus | None
) -> Compatibility:
    """The report's compatibility notes with what the compile Job did and how long it took."""
    if compiled is None or compiled.outcome == "Running":
        return compatibility
    took = f" in {compiled.seconds:.0f} s" if compiled.seconds is not None else ""
    if compiled.outcome == "Succeeded":
        note = f"compiled for Neuron by Job {compiled.job}{took}"
    else:
        note = f"the Neuron compile Job {compiled.job} failed{took}: {compiled.reason}"
    return compatibility.model_copy(update={"notes": [*compatibility.notes, note]})
