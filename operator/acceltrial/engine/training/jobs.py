"""The Jobs of a training trial: the baseline's (the user's GPU pod template as it is), the
candidate's (derived for Trainium) and the precompile's. Pure: manifests from the spec.

Each Job runs one pod per node (an indexed Job when there are several, so each pod knows its
rank from ``JOB_COMPLETION_INDEX``), never retries (``backoffLimit: 0``: a training run that
fails is a finding, not something to hide), is bounded by ``run.timeout`` and belongs to the
trial, so deleting the trial deletes its Jobs and their pods, and nothing else.

The candidate's pod template is the baseline's with:
- the training container's image replaced by ``candidate.image``;
- GPUs (``nvidia.com/gpu``) replaced by ``aws.amazon.com/neuron: <neuronDevices>``, and
  ``vpc.amazonaws.com/efa`` set to ``efaInterfaces`` when given;
- ``candidate.env`` set after the baseline's, and ``NEURON_COMPILE_CACHE_URL`` from
  ``compileCache.url``;
- the node selector ``node.kubernetes.io/instance-type: <candidate.instanceType>`` and a
  toleration of the ``aws.amazon.com/neuron`` taint, as EKS's Neuron node groups carry it;
- ``candidate.podTemplatePatch`` merged last (RFC 7386).
"""

from __future__ import annotations

import copy
from typing import Any, Literal

from acceltrial.api.durations import duration_seconds
from acceltrial.api.training import TrainingTrialSpec
from acceltrial.engine.candidate import (
    GPU_RESOURCE,
    INSTANCE_TYPE_LABEL,
    NEURON_TOLERATION,
    TRIAL_LABEL,
    VARIANT_LABEL,
    TrialRef,
    merge_patch,
    owner_reference,
)

Manifest = dict[str, Any]
Role = Literal["baseline", "candidate", "precompile"]
ROLES: tuple[Role, ...] = ("baseline", "candidate", "precompile")
NEURON_DEVICE_RESOURCE = "aws.amazon.com/neuron"
EFA_RESOURCE = "vpc.amazonaws.com/efa"
COMPILE_CACHE_ENV = "NEURON_COMPILE_CACHE_URL"
STEPS_ENV = "ACCELTRIAL_TRIAL_STEPS"
"""The steps the trial runs, for a script that can stop by itself (it is stopped anyway)."""


def job_name(trial: TrialRef, role: Role) -> str:
    return f"{trial.name}-{role}"


def training_job(spec: TrainingTrialSpec, trial: TrialRef, role: Role) -> Manifest:
    """The Job of ``role``."""
    timeout = spec.run.timeout
    if role == "baseline":
        template, nodes = _baseline_template(spec), spec.baseline.nodes
    else:
        template, nodes = _candidate_template(spec), spec.candidate.nodes
        if role == "precompile":
            assert spec.precompile is not None
            template, timeout = _precompile_template(spec, template), spec.precompile.timeout
    labels = {TRIAL_LABEL: trial.name, VARIANT_LABEL: role}
    metadata = template.setdefault("metadata", {})
    metadata["labels"] = {**(metadata.get("labels") or {}), **labels}
    template["spec"].setdefault("restartPolicy", "Never")
    job_spec: Manifest = {
        "backoffLimit": 0,
        "activeDeadlineSeconds": int(duration_seconds(timeout)),
        "completions": nodes,
        "parallelism": nodes,
        "template": template,
    }
    if nodes > 1:
        job_spec["completionMode"] = "Indexed"
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name(trial, role),
            "namespace": trial.namespace,
            "labels": labels,
            "ownerReferences": [owner_reference(trial, "TrainingTrial")],
        },
        "spec": job_spec,
    }


def training_container(spec: TrainingTrialSpec, template: Manifest) -> Manifest:
    """The training container of ``template`` (``baseline.container``, else the first)."""
    containers: list[Manifest] = template["spec"]["containers"]
    wanted = spec.baseline.container
    return next((c for c in containers if c.get("name") == wanted), containers[0])


def _baseline_template(spec: TrainingTrialSpec) -> Manifest:
    template = copy.deepcopy(spec.baseline.template.model_dump(by_alias=True, exclude_none=True))
    pod = template["spec"]
    pod["nodeSelector"] = {
        **(pod.get("nodeSelector") or {}),
        INSTANCE_TYPE_LABEL: spec.baseline.instance_type,
    }
    steps = [{"name": STEPS_ENV, "value": str(spec.run.steps)}]
    _add_env(training_container(spec, template), steps)
    return template


def _candidate_template(spec: TrainingTrialSpec) -> Manifest:
    candidate = spec.candidate
    template = _baseline_template(spec)
    pod = template["spec"]
    pod["nodeSelector"][INSTANCE_TYPE_LABEL] = candidate.instance_type
    tolerations = pod.get("tolerations") or []
    if NEURON_TOLERATION not in tolerations:
        pod["tolerations"] = [*tolerations, dict(NEURON_TOLERATION)]
    container = training_container(spec, template)
    container["image"] = candidate.image
    resources = container.setdefault("resources", {})
    for kind in ("limits", "requests"):
        amounts = {k: v for k, v in (resources.get(kind) or {}).items() if k != GPU_RESOURCE}
        amounts[NEURON_DEVICE_RESOURCE] = candidate.neuron_devices
        if candidate.efa_interfaces is not None:
            amounts[EFA_RESOURCE] = candidate.efa_interfaces
        resources[kind] = amounts
    env = [{"name": e.name, "value": e.value} for e in candidate.env or []]
    if spec.compile_cache is not None:
        env.append({"name": COMPILE_CACHE_ENV, "value": spec.compile_cache.url})
    _add_env(container, env)
    if candidate.pod_template_patch:
        template = merge_patch(template, candidate.pod_template_patch)
    return template


def _precompile_template(spec: TrainingTrialSpec, template: Manifest) -> Manifest:
    """The candidate's pod running ``neuron_parallel_compile`` before the training command
    (or ``precompile.command``): it traces a few steps and fills the compile cache."""
    assert spec.precompile is not None
    container = training_container(spec, template)
    if spec.precompile.command is not None:
        container["command"] = list(spec.precompile.command)
        container.pop("args", None)
    else:
        original = [*(container.get("command") or []), *(container.get("args") or [])]
        container["command"] = ["neuron_parallel_compile", *original]
        container.pop("args", None)
    return template


def _add_env(container: Manifest, env: list[Manifest]) -> None:
    """Set ``env`` on the container, replacing variables of the same name."""
    names = {e["name"] for e in env}
    kept = [e for e in container.get("env") or [] if e.get("name") not in names]
    if env or kept:
        container["env"] = [*kept, *env]
