"""What a TrainingTrial's tick reads besides its Jobs: preflight's findings (each variant's
price, the Neuron devices a pod asks against its instance type, the candidate's Trainium
capacity from the capacity provider ``spec.capacity`` names, the S3 compile cache) and, once a
run has finished, Prometheus over its steady steps (``spec.metrics``).
"""

from __future__ import annotations

import logging

from acceltrial.api.training import RunStatus, TrainingTrial, TrainingTrialStatus
from acceltrial.api.training.status import ExportedReading
from acceltrial.engine.candidate import TrialRef
from acceltrial.engine.capacity import CapacityNeed
from acceltrial.engine.metrics import Accelerator
from acceltrial.engine.training.jobs import job_name
from acceltrial.engine.training.lifecycle import VARIANTS, NodePrice, Preflight, Variant
from acceltrial.handlers.capacity import instance_shape
from acceltrial.handlers.metrics_source import resolve_secrets
from acceltrial.handlers.neuron import shape_of
from acceltrial.handlers.secrets import SecretProblem
from acceltrial.kube.gateway import Kube
from acceltrial.providers.capacity import registry
from acceltrial.providers.capacity.nodes import fitting_nodes
from acceltrial.providers.compiled_artifacts.s3 import compile_cache_check
from acceltrial.providers.metrics.factory import client_for
from acceltrial.providers.metrics.prometheus.training import (
    AskAgain,
    SteadyWindow,
    exported_reading,
)

LOG = logging.getLogger(__name__)
NEURON = "aws.amazon.com/neuron"
ACCELERATORS: dict[Variant, Accelerator] = {"baseline": "gpu", "candidate": "neuron"}


def training_preflight(
    kube: Kube, loaded: TrainingTrial, prices: dict[Variant, NodePrice]
) -> Preflight:
    """What keeps the trial from starting (problems), what it waits for, what it notes."""
    spec = loaded.spec
    instances = {"baseline": spec.baseline.instance_type, "candidate": spec.candidate.instance_type}
    problems = [
        f"spec.{variant}.instanceType: no price for {instance} in {spec.economics.region}; "
        "set spec.economics.pricing: explicit with prices"
        for variant, instance in instances.items()
        if variant not in prices
    ]
    shape = shape_of(spec.candidate.instance_type, spec.economics.region)
    if shape is not None and spec.candidate.neuron_devices > shape.devices:
        problems.append(
            f"spec.candidate.neuronDevices: {spec.candidate.instance_type} has "
            f"{shape.devices} Neuron devices; a pod cannot take {spec.candidate.neuron_devices}"
        )
    capacity = _capacity(kube, loaded)
    problems += capacity.problems
    notes = []
    if spec.compile_cache is not None:
        cache = compile_cache_check(spec.compile_cache.url, spec.economics.region)
        problems += [cache.problem] if cache.problem else []
        notes += [f"{cache.wait}; the Neuron pods use their own role"] if cache.wait else []
    return Preflight(tuple(problems), capacity.waits, tuple(notes), capacity.capacity_source)


def _capacity(kube: Kube, loaded: TrainingTrial) -> Preflight:
    """The candidate's nodes: ``candidate.nodes`` of its instance type, each taking one pod
    with ``neuronDevices`` devices."""
    spec = loaded.spec
    candidate, nodes = spec.candidate, kube.nodes()
    need = CapacityNeed(candidate.instance_type, NEURON, candidate.neuron_devices, candidate.nodes)
    context = registry.CapacityContext(
        kube, spec.capacity, nodes, need, instance_shape(candidate.instance_type)
    )
    found = registry.capacity_provider(context).check(need)
    problems = list(found.problems)
    if spec.capacity.provider == "nodes" and not problems:
        fitting = fitting_nodes(nodes, candidate.instance_type, NEURON, candidate.neuron_devices)
        if fitting < candidate.nodes:
            problems.append(
                f"spec.candidate.nodes: {candidate.nodes} {candidate.instance_type} nodes with "
                f"{candidate.neuron_devices} allocatable {NEURON} are needed, the cluster has "
                f"{fitting}; lower spec.candidate.nodes, add nodes, or use "
                "spec.capacity.provider karpenter or eks-nodegroup"
            )
    return Preflight(tuple(problems), found.waits, capacity_source=found.source)


def exported_readings(
    kube: Kube, loaded: TrainingTrial, trial: TrialRef, status: TrainingTrialStatus
) -> dict[Variant, ExportedReading]:
    """Prometheus over the steady steps of each finished run that has no reading yet; a run
    Prometheus could not answer now is left out (read again next tick)."""
    metrics = loaded.spec.metrics
    if metrics is None or status.runs is None:
        return {}
    finished = {
        v: run for v in VARIANTS
        if (run := getattr(status.runs, v)) is not None
        and run.state == "Finished" and run.prometheus is None
    }  # fmt: skip
    if not finished:
        return {}
    try:
        secrets = resolve_secrets(kube, trial.namespace, metrics.prometheus)
    except SecretProblem as problem:
        if problem.temporary:
            return {}
        return {v: ExportedReading(note=f"metrics.prometheus: {problem}") for v in finished}
    client = client_for(metrics.prometheus, secrets)
    found: dict[Variant, ExportedReading] = {}
    for variant, run in finished.items():
        window = _window(trial, variant, run)
        if window is None:
            found[variant] = ExportedReading(note="no timestamped step after the warm-up")
            continue
        try:
            found[variant] = exported_reading(
                client, window, metrics.interval, metrics.tokens_per_second
            )
        except AskAgain as error:
            LOG.info("training trial %s: Prometheus, again next tick: %s", trial.name, error)
    return found


def _window(trial: TrialRef, variant: Variant, run: RunStatus) -> SteadyWindow | None:
    if run.steady_from is None or run.last_step_at is None:
        return None
    job = job_name(trial, variant)
    return SteadyWindow(variant, trial.namespace, job, ACCELERATORS[variant],
                        run.steady_from, run.last_step_at)  # fmt: skip
