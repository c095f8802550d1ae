"""Applying the engine's actions to the cluster, through the kube gateway and the router.

Each action is idempotent, so a retry after a crash is harmless; a refusal says which action it
stopped. What to do and when is the engine's (engine/lifecycle.py); this module only does it.
"""

from __future__ import annotations

from dataclasses import dataclass

from acceltrial.api.status import TrialStatus
from acceltrial.engine.baseline_replica import replica_name
from acceltrial.engine.candidate import PROMOTED_BY_LABEL, derive_deployment, derive_service
from acceltrial.engine.compile_gate import StartCompile
from acceltrial.engine.ticks import (
    Action,
    DeployCandidate,
    HandOverCandidate,
    RemoveCandidate,
    RestoreAutoscaler,
    RestoreRouting,
    RetargetAutoscaler,
    ScaleBaselineToZero,
    ScaleCandidate,
    SetWeight,
)
from acceltrial.handlers.neuron import start_compile, with_neuron_scheduler
from acceltrial.handlers.snapshot import TickSnapshot
from acceltrial.kube.calls import KubeError
from acceltrial.providers.routing.port import Router


@dataclass
class Executor:
    """Applies one trial's actions."""

    snapshot: TickSnapshot
    router: Router

    def execute(self, action: Action, status: TrialStatus) -> None:
        try:
            self._execute(action, status)
        except KubeError as error:
            raise error.doing(_describe(action, self.snapshot.candidate_name)) from None

    def _execute(self, action: Action, status: TrialStatus) -> None:
        snapshot, kube = self.snapshot, self.snapshot.kube
        namespace, name, trial = snapshot.namespace, snapshot.candidate_name, snapshot.trial
        if isinstance(action, DeployCandidate):
            baseline, service = snapshot.baseline, snapshot.baseline_service
            if baseline is None or service is None:
                raise KubeError(404, f"baseline {snapshot.baseline_name} vanished after preflight")
            unselected = self.router.unselected_labels()
            deployment = derive_deployment(baseline, service, snapshot.spec, trial, unselected)
            kube.apply(with_neuron_scheduler(deployment, snapshot.spec))
            kube.apply(derive_service(service, trial))
        elif isinstance(action, SetWeight) and status.original is not None:
            self.router.set_weight(action.weight, status.original, action.mirror)
        elif isinstance(action, RestoreRouting) and status.original is not None:
            self.router.restore(status.original)
        elif isinstance(action, RemoveCandidate):
            kube.delete("Service", namespace, name)
            kube.delete("Deployment", namespace, name)
            # The baseline's replica for the capacity sweep, should a sweep have left it.
            for kind in ("Service", "Deployment"):
                kube.delete(kind, namespace, replica_name(trial))
        elif isinstance(action, ScaleBaselineToZero):
            kube.scale(namespace, snapshot.baseline_name, 0)
        elif isinstance(action, ScaleCandidate):
            kube.scale(namespace, name, action.replicas)
        elif isinstance(action, RetargetAutoscaler | RestoreAutoscaler):
            self._point_autoscaler(action, status)
        elif isinstance(action, HandOverCandidate):
            promoted_by = {PROMOTED_BY_LABEL: trial.name}
            for kind in ("Deployment", "Service"):
                kube.release(kind, namespace, name, trial.uid, promoted_by)
            self.router.release()
        elif isinstance(action, StartCompile):
            start_compile(kube, snapshot.spec, trial)

    def _point_autoscaler(
        self, action: RetargetAutoscaler | RestoreAutoscaler, status: TrialStatus
    ) -> None:
        recorded = status.original.hpa if status.original else None
        if recorded is None:
            return
        target = recorded.scale_target_ref
        if isinstance(action, RetargetAutoscaler):
            candidate = self.snapshot.candidate_name
            target = {"apiVersion": "apps/v1", "kind": "Deployment", "name": candidate}
        self.snapshot.kube.set_autoscaler_target(self.snapshot.namespace, recorded.name, target)


def _describe(action: Action, candidate: str) -> str:
    """What an action does, for a refusal's message."""
    said: dict[type, str] = {
        DeployCandidate: f"creating the candidate Deployment and Service {candidate}",
        SetWeight: "moving traffic",
        RestoreRouting: "restoring the routing",
        RemoveCandidate: f"removing the candidate {candidate}",
        ScaleBaselineToZero: "scaling the baseline to zero",
        ScaleCandidate: f"scaling the candidate {candidate}",
        RetargetAutoscaler: "pointing the HorizontalPodAutoscaler at the candidate",
        RestoreAutoscaler: "pointing the HorizontalPodAutoscaler back at the baseline",
        HandOverCandidate: f"handing over the candidate {candidate}",
        StartCompile: "creating the compile Job",
    }
    return said.get(type(action), type(action).__name__)
