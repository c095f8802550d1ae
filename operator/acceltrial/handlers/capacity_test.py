"""The capacity sweep as one trial's world runs it: the candidate's Service reached through the
``ACCELTRIAL_MODEL_URL`` template (as the quality check reaches it), the sweep run by
providers/quality/load.py in the background, since it lasts up to
``spec.capacityTest.maxDuration``, longer than a tick may. One sweep per trial; the tick that
finds it finished takes its outcome. Decides nothing: engine/capacity_gate.py judges it.

Beside it, unless ``spec.capacityTest.baseline`` is ``production``, the baseline's temporary
replica (engine/baseline_replica.py) is created, waited for (it goes unswept when the scheduler
finds no room for it on the baseline's GPU nodes for :data:`UNSCHEDULABLE_PATIENCE`, or it is
not Ready within ``maxDuration``), swept alike within what is left of ``maxDuration``, and
deleted, whatever happened. The candidate's removal deletes it too (engine/undo.py's
``RemoveCandidate``), and it is owned by the trial, so deleting the trial deletes it.

An operator restarted mid-sweep starts it again on its next tick (``status.capacityTest`` is
only written once a sweep finished); the replica's apply is idempotent.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from acceltrial.engine.baseline_replica import (
    derive_replica,
    derive_replica_service,
    hostnames,
    replica_labels,
    replica_name,
    unschedulable,
)
from acceltrial.engine.capacity_gate import sweep_settings
from acceltrial.engine.capacity_sweep import Bounds, SweepOutcome, SweepShape
from acceltrial.engine.routing import serving
from acceltrial.handlers.config import config_from_env
from acceltrial.handlers.measure import baseline_request_shape
from acceltrial.handlers.snapshot import TickSnapshot
from acceltrial.kube.calls import KubeError
from acceltrial.kube.gateway import Kube
from acceltrial.providers.quality.load import LoadShape, sweep
from acceltrial.providers.quality.openai import OpenAiClient
from acceltrial.providers.quality.services import service_port, service_url

LOG = logging.getLogger(__name__)
TIMEOUT_SECONDS = 60.0
"""Per request: a long answer under a full batch and a queue takes seconds, not minutes."""
PARALLEL_SWEEPS = 4
"""Trials whose sweeps run at once; more wait for a free slot."""
UNSCHEDULABLE_PATIENCE = 10.0
"""Seconds the scheduler may find no room for the baseline's replica before it goes unswept
(the scheduler answers in about a second; a pod just leaving a GPU frees it within this)."""
Sweep = Callable[[threading.Event], SweepOutcome]
Manifest = dict[str, Any]


class Sweeps:
    """The sweeps under way, by trial uid."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(PARALLEL_SWEEPS, thread_name_prefix="capacity-sweep")
        self._running: dict[str, tuple[Future[SweepOutcome], threading.Event]] = {}
        self._lock = threading.Lock()

    def poll(
        self, key: str, start: Callable[[threading.Event], SweepOutcome]
    ) -> SweepOutcome | None:
        """The finished sweep of ``key`` (taken: the next poll starts another), or None after
        starting it or while it runs. ``start`` stops early once its event is set."""
        with self._lock:
            running = self._running.get(key)
            if running is None:
                stop = threading.Event()
                self._running[key] = (self._pool.submit(start, stop), stop)
                return None
            future, _ = running
            if not future.done():
                return None
            del self._running[key]
        try:
            return future.result()
        except Exception as error:
            return SweepOutcome(problem=f"the sweep stopped: {type(error).__name__}: {error}")

    def cancel(self, key: str) -> None:
        """Stop ``key``'s sweep, if one runs (the trial ended, moved on or was deleted): its
        clients send no further request."""
        with self._lock:
            running = self._running.pop(key, None)
        if running is not None:
            running[1].set()


SWEEPS = Sweeps()


def trial_sweeps(snapshot: TickSnapshot, pods: int, unselected: frozenset[str]) -> Sweep:
    """The candidate's sweep over its ``pods`` (its Available replicas) and, beside it, the
    baseline replica's, unless ``spec.capacityTest.baseline`` is ``production``: one outcome,
    the baseline's in it. Everything is read in the background, once: a tick that finds the
    sweep running reads nothing for it."""
    settings = snapshot.spec.capacity_test
    assert settings is not None  # only swept when the spec asks for it
    pods = max(1, pods)

    def both(stop: threading.Event) -> SweepOutcome:
        read = request_shape(snapshot, datetime.now(UTC))
        if isinstance(read, str):
            return SweepOutcome(problem=read, pods=pods)
        shape, said = read
        if settings.baseline == "production":
            return replace(candidate_sweep(snapshot, pods, shape)(stop), requests=said)
        with ThreadPoolExecutor(1, thread_name_prefix="baseline-sweep") as side:
            swept = side.submit(baseline_sweep(snapshot, unselected, shape), stop)
            outcome = candidate_sweep(snapshot, pods, shape)(stop)
            try:
                beside = swept.result()
            except Exception as error:  # its own problem: the candidate's outcome stands
                beside = SweepOutcome(problem=f"{type(error).__name__}: {error}")
        return replace(outcome, baseline=beside, requests=said)

    return both


def request_shape(snapshot: TickSnapshot, now: datetime) -> tuple[LoadShape, SweepShape] | str:
    """The sweep's requests, as ``spec.capacityTest.requests`` gives them or the baseline's
    own means, and what the status says of them; why not, when those cannot be read."""
    settings = snapshot.spec.capacity_test
    assert settings is not None  # only swept when the spec asks for it
    # Streamed only when the SLO limits the first token or the gaps between tokens.
    streamed = settings.slo.ttft_p99 is not None or settings.slo.itl_p99 is not None
    if settings.requests is not None:
        given = settings.requests
        said = SweepShape(given.prompt_tokens, given.generated_tokens, "spec")
        return LoadShape(given.prompt_tokens, given.generated_tokens, streamed), said
    read = baseline_request_shape(snapshot, now)
    if isinstance(read, str):
        return (
            f"spec.capacityTest.requests is not given and {read}; give requests.promptTokens "
            "and requests.generatedTokens"
        )
    said = SweepShape(read.prompt_tokens, read.generated_tokens, "baseline", read.requests)
    return LoadShape(read.prompt_tokens, read.generated_tokens, stream=streamed), said


def candidate_sweep(snapshot: TickSnapshot, pods: int, shape: LoadShape) -> Sweep:
    """The sweep of the candidate's ``pods`` (its Available replicas), to run in the
    background."""
    service = snapshot.baseline_service
    if service is None:
        missing = f"Service {snapshot.baseline_service_name} not found"
        return lambda _stop: SweepOutcome(problem=missing, pods=pods)
    # The candidate's Service copies the baseline's ports.
    return _service_sweep(snapshot, snapshot.candidate_name, service_port(service), pods, shape)


def _service_sweep(
    snapshot: TickSnapshot,
    service: str,
    port: int,
    pods: int,
    shape: LoadShape,
    *,
    bounds: Bounds | None = None,
) -> Sweep:
    settings = snapshot.spec.capacity_test
    assert settings is not None  # only swept when the spec asks for it
    url = service_url(config_from_env().model_url, service, snapshot.namespace, port)
    client = OpenAiClient(url, settings.model, TIMEOUT_SECONDS)
    slo, planned = sweep_settings(settings)
    bounds = bounds or planned
    return lambda stop: sweep(client, shape, slo, bounds, pods=pods, stop=stop)


@dataclass(frozen=True)
class ReplicaPlan:
    """The baseline's temporary replica: its objects and how it is swept."""

    kube: Kube
    namespace: str
    name: str
    objects: tuple[Manifest, ...]
    labels: dict[str, str]
    sweep: Callable[[float], Sweep]
    """The sweep, given the seconds left of ``maxDuration``."""
    max_seconds: float


def baseline_sweep(
    snapshot: TickSnapshot,
    unselected: frozenset[str],
    shape: LoadShape,
    clock: Callable[[], float] = time.monotonic,
    pause: Callable[[float], None] = time.sleep,
) -> Sweep:
    """Create the baseline's replica, wait for it, sweep it, delete it: to run in the
    background. An outcome with a ``problem`` when it could not be swept."""
    baseline, service = snapshot.baseline, snapshot.baseline_service
    if baseline is None or service is None:
        missing = f"the baseline {snapshot.baseline_name} or its Service is gone"
        return lambda _stop: SweepOutcome(problem=missing)
    hosts = hostnames(snapshot.baseline_pods, snapshot.nodes)
    if not hosts:
        return lambda _stop: SweepOutcome(problem="no node runs a pod of the baseline")
    trial = snapshot.trial
    settings = snapshot.spec.capacity_test
    assert settings is not None  # only swept when the spec asks for it
    _, bounds = sweep_settings(settings)
    port = service_port(service)
    plan = ReplicaPlan(
        kube=snapshot.kube,
        namespace=snapshot.namespace,
        name=replica_name(trial),
        objects=(derive_replica(baseline, service, trial, hosts, unselected),
                 derive_replica_service(service, trial)),
        labels=replica_labels(trial),
        sweep=lambda left: _service_sweep(snapshot, replica_name(trial), port, 1, shape,
                                          bounds=replace(bounds, max_seconds=left)),
        max_seconds=bounds.max_seconds,
    )  # fmt: skip
    return lambda stop: sweep_replica(plan, stop, clock, pause)


def sweep_replica(
    plan: ReplicaPlan,
    stop: threading.Event,
    clock: Callable[[], float] = time.monotonic,
    pause: Callable[[float], None] = time.sleep,
) -> SweepOutcome:
    """Apply the replica's objects, wait until its pod is Ready, sweep it with what is left of
    ``maxDuration``, and delete the objects whatever happened."""
    began = clock()
    try:
        for manifest in plan.objects:
            plan.kube.apply(dict(manifest))
        unready = _wait_ready(plan, stop, began + plan.max_seconds, clock, pause)
        if unready is not None:
            return SweepOutcome(problem=unready)
        return plan.sweep(plan.max_seconds - (clock() - began))(stop)
    except KubeError as error:
        return SweepOutcome(problem=f"its replica could not be created: {error}")
    finally:
        remove_replica(plan.kube, plan.namespace, plan.name)


def _wait_ready(
    plan: ReplicaPlan,
    stop: threading.Event,
    deadline: float,
    clock: Callable[[], float],
    pause: Callable[[float], None],
) -> str | None:
    """None once the replica's pod is Ready; else why it will not be (no room, too slow,
    stopped)."""
    refused_since: float | None = None
    while not stop.is_set():
        pods = plan.kube.pods(plan.namespace, plan.labels)
        if any(serving(pod) for pod in pods):
            return None
        now, refused = clock(), unschedulable(pods)
        if refused is None or refused_since is None:
            refused_since = None if refused is None else now
        patient = refused_since is None or now - refused_since < UNSCHEDULABLE_PATIENCE
        if refused is not None and (not patient or now >= deadline):
            return (
                "no GPU node that serves the baseline has room for one more pod "
                f"(the scheduler: {refused})"
            )
        if now >= deadline:
            return f"its replica was not Ready within maxDuration ({plan.max_seconds:g} s)"
        pause(1.0)
    return "the sweep was stopped"


def remove_replica(kube: Kube, namespace: str, name: str) -> None:
    """Delete the baseline replica's Deployment and Service; a failure is logged (the trial
    owns both, and its candidate's removal deletes them again)."""
    for kind in ("Service", "Deployment"):
        try:
            kube.delete(kind, namespace, name)
        except KubeError as error:
            LOG.warning("could not delete the baseline's replica %s %s: %s", kind, name, error)
