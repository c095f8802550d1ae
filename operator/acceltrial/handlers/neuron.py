"""Neuron preflight and the compile Job, as one trial's world sees them: the engine's checks
(engine/neuron_fit.py, engine/compile_gate.py) fed from the catalog or EC2, S3 and the cluster,
and the compile Job created and read through the kube gateway. Decides nothing itself."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from acceltrial.api.spec import TrialSpec
from acceltrial.engine.candidate import TrialRef
from acceltrial.engine.compile_gate import (
    JOB_NAME_LABEL,
    CompileJobState,
    compile_job,
    compile_job_name,
)
from acceltrial.engine.neuron_fit import (
    NeuronShape,
    device_plugin_problem,
    fit_problems,
    scheduler_name,
)
from acceltrial.kube.calls import KubeError
from acceltrial.kube.gateway import Kube
from acceltrial.providers.compiled_artifacts.s3 import S3Artifacts
from acceltrial.providers.pricing.shapes import NeuronShapes

Manifest = dict[str, Any]
_shapes: dict[tuple[str, str], NeuronShape | None] = {}
"""Shapes looked up, per (instance type, region): an instance type does not change shape, and
asking EC2 on every tick would cost a round trip (or a credential timeout) each time."""


def neuron_shape(spec: TrialSpec) -> NeuronShape | None:
    return shape_of(spec.candidate.instance_type, spec.economics.region)


def shape_of(instance_type: str, region: str) -> NeuronShape | None:
    """An instance type's Neuron shape, looked up once per process."""
    key = (instance_type, region)
    if key not in _shapes:
        _shapes[key] = NeuronShapes().shape(*key)
    return _shapes[key]


def neuron_preflight(nodes: list[Manifest], spec: TrialSpec) -> tuple[list[str], list[str]]:
    """What prevents the candidate from running on Neuron (the model does not fit, a device
    count the instance refuses, no device plugin, compiled artifacts missing), and what it waits
    for (S3 not reachable yet). Artifacts a compile Job is to write are not checked."""
    candidate = spec.candidate
    problems = fit_problems(candidate, neuron_shape(spec))
    plugin = device_plugin_problem(nodes, candidate.instance_type)
    if plugin is not None:
        problems.append(plugin)
    waits: list[str] = []
    if candidate.compiled_artifacts is not None and candidate.compile is None and not problems:
        found = S3Artifacts().check(candidate.compiled_artifacts)
        problems += [found.problem] if found.problem else []
        waits += [found.wait] if found.wait else []
    return problems, waits


def with_neuron_scheduler(deployment: Manifest, spec: TrialSpec) -> Manifest:
    """The candidate Deployment, scheduled by the Neuron scheduler extension when it needs it."""
    name = scheduler_name(spec.candidate, neuron_shape(spec))
    if name is not None:
        deployment["spec"]["template"]["spec"]["schedulerName"] = name
    return deployment


def start_compile(kube: Kube, spec: TrialSpec, trial: TrialRef) -> None:
    kube.apply(compile_job(spec, trial))


def observe_compile(kube: Kube, spec: TrialSpec, trial: TrialRef) -> CompileJobState | None:
    """The compile Job's state, with the reason and log tail when it failed; None when the spec
    asks for no compile."""
    settings = spec.candidate.compile
    if settings is None:
        return None
    name = compile_job_name(trial)
    job = kube.job(trial.namespace, name)
    if job is None:
        return CompileJobState(name, "Absent")
    conditions = job_conditions(job)
    started = _time(job, "startTime", {})
    if "Complete" in conditions:
        ended = _time(job, "completionTime", conditions)
        return CompileJobState(name, "Succeeded", ended, started)
    failed = conditions.get("Failed")
    if failed is None:
        return CompileJobState(name, "Running")
    why = failure_text(failed)
    tail = _log_tail(kube, trial.namespace, name, settings.log_lines)
    reason = f"{why}; log tail:\n{tail}" if tail else why
    return CompileJobState(name, "Failed", _time(job, None, conditions), started, reason)


def job_conditions(job: Manifest) -> dict[str, Manifest]:
    """A Job's conditions that hold (Complete, Failed, ...), by type."""
    found = job.get("status", {}).get("conditions") or []
    return {c.get("type"): c for c in found if c.get("status") == "True"}


def failure_text(condition: Manifest) -> str:
    """A Job's Failed condition as a person reads it: reason, then message."""
    return f"{condition.get('reason', 'Failed')}: {condition.get('message', '')}".rstrip(": ")


def _time(job: Manifest, field: str | None, conditions: dict[str, Manifest]) -> datetime | None:
    """When the Job ended: its completionTime, else its ending condition's transition time."""
    text = job.get("status", {}).get(field) if field else None
    if text is None:
        found = conditions.get("Complete") or conditions.get("Failed") or {}
        text = found.get("lastTransitionTime")
    return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None


def _log_tail(kube: Kube, namespace: str, job: str, lines: int) -> str:
    """The log tail of the Job's last failed pod (else its newest pod); empty when none."""
    pods = kube.pods(namespace, {JOB_NAME_LABEL: job})
    if not pods:
        return ""
    pods.sort(key=lambda p: (p.get("status", {}).get("phase") == "Failed",
                             p["metadata"].get("creationTimestamp") or ""))  # fmt: skip
    try:
        return kube.pod_log(namespace, pods[-1]["metadata"]["name"], lines).rstrip()
    except KubeError as error:
        return f"(the log cannot be read: {error})"
