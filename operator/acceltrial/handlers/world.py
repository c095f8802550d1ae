"""What one trial sees of the cluster and Prometheus in one tick, and how its actions are applied.

:class:`TrialWorld` lives for one tick. It reads the cluster through one
:class:`~acceltrial.handlers.snapshot.TickSnapshot` (each object read once), gathers an
:class:`~acceltrial.engine.ticks.Observation` (preflight, routing, candidate readiness, a
measurement when due) and hands the engine's actions to the executor and the tick's outcome to
the report writer. The rules live in the engine (engine/preflight.py, engine/measurement.py,
engine/report.py); the router is the one the spec names (providers/routing/registry.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from acceltrial.api.actions import UserAction
from acceltrial.api.spec import TrialSpec
from acceltrial.api.status import HpaOriginal, OriginalRouting, TrialStatus
from acceltrial.engine.candidate import TrialRef, candidate_labels
from acceltrial.engine.capacity import CapacityFinding
from acceltrial.engine.capacity_gate import best_within_slo, capacity_due
from acceltrial.engine.capacity_sweep import SweepOutcome
from acceltrial.engine.compile_gate import CompileJobState
from acceltrial.engine.metrics import Variant
from acceltrial.engine.preflight import available, available_replicas
from acceltrial.engine.promotion import AutoscalerBounds
from acceltrial.engine.quality.check import quality_due
from acceltrial.engine.schedule import measurement_due, mirror_at, requested_weight
from acceltrial.engine.ticks import Action, Measurement, Observation
from acceltrial.handlers import measure as measuring
from acceltrial.handlers import preflight as preflighting
from acceltrial.handlers.capacity import capacity_need, capacity_provider
from acceltrial.handlers.capacity_test import SWEEPS, trial_sweeps
from acceltrial.handlers.executor import Executor
from acceltrial.handlers.lazy import lazy
from acceltrial.handlers.neuron import neuron_preflight, observe_compile
from acceltrial.handlers.quality import run_quality_check
from acceltrial.handlers.report_writer import write_report
from acceltrial.handlers.snapshot import TickSnapshot
from acceltrial.kube.gateway import Kube
from acceltrial.providers.capacity.karpenter import NODEPOOL_LABEL
from acceltrial.providers.capacity.port import CapacityProvider
from acceltrial.providers.quality.services import prompt_set
from acceltrial.providers.routing.port import Router
from acceltrial.providers.routing.registry import RouterContext, router_for

Manifest = dict[str, Any]


@dataclass
class TrialWorld:
    """The cluster and metrics as one trial sees them during one tick."""

    kube: Kube
    spec: TrialSpec
    trial: TrialRef
    known_trials: Sequence[Manifest] | None = None
    """The trials on this baseline as the operator's index holds them; None: list them."""
    measured_pods: dict[Variant, int] | None = field(default=None, init=False)
    """Pods each variant had when this tick's measurement ran, before any action scaled them."""
    capacity_finding: CapacityFinding | None = field(default=None, init=False)
    """What the capacity provider found at this tick's preflight."""

    @lazy
    def snapshot(self) -> TickSnapshot:
        return TickSnapshot(self.kube, self.spec, self.trial, self.known_trials)

    @property
    def baseline_name(self) -> str:
        return self.snapshot.baseline_name

    @property
    def baseline_service_name(self) -> str:
        return self.snapshot.baseline_service_name

    @lazy
    def router(self) -> Router:
        snapshot = self.snapshot
        return router_for(
            RouterContext(
                self.kube,
                self.spec,
                self.trial,
                baseline_deployment=snapshot.baseline_name,
                baseline_service=snapshot.baseline_service_name,
                candidate=snapshot.candidate_name,
                baseline=lambda: snapshot.baseline,
            )
        )

    # -- observing -------------------------------------------------------------------------

    def observe(
        self,
        status: TrialStatus,
        now: datetime,
        generation: int,
        action: UserAction | None,
    ) -> Observation:
        phase = status.phase
        problems, waits = self.preflight() if phase == "Preflight" else ((), ())
        routing = None
        if phase == "Preflight" and not problems and not waits and status.original is None:
            routing = self._snapshot()
        observed_weight = conflict = refusal = share = serving = None
        routed = phase in ("Progressing", "Paused", "BakingIn")
        if routed and status.step:
            observed_weight = self.router.weight(status.original)
            conflict, refusal = self._route_verdicts(status)
        if routed:
            share, serving = self._share()
        due = measurement_due(self.spec, status, now, share)
        measurement = self.measure(status, now) if due else None
        forecast = phase == "Preflight" and not problems and not waits
        rate = measuring.baseline_request_rate(self.snapshot, now) if forecast else None
        candidate = self.snapshot.candidate
        candidate_available = candidate is not None and available(candidate)
        checking = quality_due(self.spec, status, candidate_available)
        sweeping = capacity_due(self.spec, status, candidate_available)
        return Observation(
            now=now,
            generation=generation,
            preflight_problems=problems,
            preflight_waits=waits,
            routing=routing,
            observed_weight=observed_weight,
            observed_share=share,
            routing_conflict=conflict,
            route_refused=refusal,
            candidate_available=candidate_available,
            candidate_available_replicas=available_replicas(candidate),
            candidate_serving_replicas=serving,
            autoscaler=self._autoscaler(status) if phase == "Promoting" else None,
            measurement=measurement,
            action=action,
            compile_job=self._compile_job() if phase == "Preflight" and not problems else None,
            candidate_handed_over=phase == "BakingIn" and self.candidate_handed_over(),
            baseline_request_rate=rate,
            quality=run_quality_check(self.snapshot) if checking else None,
            capacity_test=self._swept(candidate, now) if sweeping else None,
        )

    def _swept(self, candidate: Manifest | None, now: datetime) -> SweepOutcome | None:
        """The capacity sweeps (the candidate's, the baseline replica's) once finished; started
        in the background first."""
        unselected = self.router.unselected_labels()
        sweep = trial_sweeps(self.snapshot, available_replicas(candidate), unselected)
        outcome = SWEEPS.poll(self.trial.uid, sweep)
        if outcome is None or outcome.problem is not None:
            return outcome
        cost = measuring.cost_at_capacity(self.snapshot, outcome, now)
        best = best_within_slo(self.spec, outcome)
        busy = None
        if best is not None and best.began is not None and best.ended is not None:
            busy = measuring.candidate_utilization(self.snapshot, best.began, best.ended)
        return replace(outcome, cost=cost, utilization=busy)

    def _route_verdicts(self, status: TrialStatus) -> tuple[str | None, str | None]:
        """Another writer's change to the routing, and the gateway's refusal of it, if any."""
        if status.original is None or status.canary_weight is None:
            return None, None
        mirror = mirror_at(self.spec, status)
        conflict = self.router.conflict(requested_weight(status), status.original, mirror)
        return conflict, self.router.refusal()

    def _share(self) -> tuple[int | None, int | None]:
        """The share the router reads, and the candidate pods it counted for it (None when it
        reads no pods: the gateway's share is the weight written)."""
        counted: list[dict[Variant, int]] = []

        def serving() -> dict[Variant, int]:
            counted.append(self._serving())
            return counted[-1]

        share = self.router.share(serving)
        return share, counted[-1].get("candidate", 0) if counted else None

    def _serving(self) -> dict[Variant, int]:
        """Each variant's pods that take traffic now, as the measurement's targets count them."""
        return {variant: target.replicas for variant, target in self.snapshot.targets.items()}

    def _compile_job(self) -> CompileJobState | None:
        return observe_compile(self.kube, self.spec, self.trial)

    def _snapshot(self) -> OriginalRouting:
        """The routing as found, with the baseline's replicas and autoscaler to remember across
        promotion."""
        replicas = (self.snapshot.baseline or {}).get("spec", {}).get("replicas")
        routing = self.router.snapshot()
        if routing.baseline_replicas is None and isinstance(replicas, int):
            routing = routing.model_copy(update={"baseline_replicas": replicas})
        hpa = self._baseline_autoscaler()
        if hpa is not None:
            routing = routing.model_copy(update={"hpa": hpa})
        return routing

    def _baseline_autoscaler(self) -> HpaOriginal | None:
        """The HorizontalPodAutoscaler that scales the baseline Deployment, if one does."""
        for hpa in self.snapshot.autoscalers:
            target = hpa.get("spec", {}).get("scaleTargetRef") or {}
            if target.get("kind") == "Deployment" and target.get("name") == self.baseline_name:
                return HpaOriginal(name=hpa["metadata"]["name"], scale_target_ref=target)
        return None

    def _autoscaler(self, status: TrialStatus) -> AutoscalerBounds | None:
        recorded = status.original.hpa if status.original else None
        if recorded is None:
            return None
        hpa = self.kube.autoscaler(self.trial.namespace, recorded.name)
        if hpa is None:
            return None
        spec = hpa.get("spec", {})
        return AutoscalerBounds(
            recorded.name, int(spec.get("minReplicas", 1)), int(spec.get("maxReplicas", 1))
        )

    def candidate_handed_over(self) -> bool:
        """Whether the candidate Deployment exists and no longer belongs to this trial."""
        deployment = self.snapshot.candidate
        if deployment is None:
            return False
        owners = deployment.get("metadata", {}).get("ownerReferences") or []
        return all(owner.get("uid") != self.trial.uid for owner in owners)

    def preflight(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """What prevents the trial from starting, and what it waits for; nothing is changed."""
        problems, waits = preflighting.preflight(self.snapshot, self.router, self._check_capacity)
        if self.snapshot.baseline is None:
            return problems, waits
        neuron_problems, neuron_waits = neuron_preflight(self.snapshot.nodes, self.spec)
        problems += tuple(neuron_problems)
        if self.spec.quality is not None:
            prompts = prompt_set(self.kube, self.trial.namespace, self.spec.quality)
            problems += (prompts,) if isinstance(prompts, str) else ()
        return problems, waits + tuple(neuron_waits)

    @lazy
    def capacity(self) -> CapacityProvider:
        """The capacity provider spec.capacity names (handlers/capacity.py)."""
        return capacity_provider(self.spec, self.kube, self.snapshot.nodes)

    def launched_nodes(self) -> int:
        """Nodes of a Karpenter NodePool that run the candidate's pods."""
        pods = self.kube.pods(self.trial.namespace, candidate_labels(self.trial))
        hosts = {p.get("spec", {}).get("nodeName") for p in pods}
        return sum(
            1
            for node in self.snapshot.nodes
            if node["metadata"]["name"] in hosts
            and NODEPOOL_LABEL in (node["metadata"].get("labels") or {})
        )

    def _check_capacity(self) -> CapacityFinding:
        self.capacity_finding = self.capacity.check(capacity_need(self.spec))
        return self.capacity_finding

    def measure(self, status: TrialStatus, now: datetime) -> Measurement:
        measured = measuring.measure(self.snapshot, status, now)
        self.measured_pods = measured.pods
        return measured.measurement

    def metric_problems(self, now: datetime) -> list[str]:
        """Every criterion's query run for the baseline: what cannot be judged, and why."""
        return measuring.metric_problems(self.snapshot, now)

    # -- reporting and acting --------------------------------------------------------------

    def write_report(
        self, status: TrialStatus, measurement: Measurement | None, now: datetime
    ) -> None:
        """Bring the ``<trial>-report`` ConfigMap up to date with this tick."""
        write_report(
            self.snapshot,
            self.router,
            status,
            measurement=measurement,
            measured_pods=self.measured_pods,
            now=now,
        )

    def execute(self, action: Action, status: TrialStatus) -> None:
        """Apply one action; each is idempotent, so a retry after a crash is harmless. A refusal
        says which action it stopped."""
        Executor(self.snapshot, self.router).execute(action, status)
