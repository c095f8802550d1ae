"""The preflight rules: what prevents a trial from starting, and what it waits for.

Pure: fed the objects the handler read (the baseline Deployment, whether its Service exists, the
trials of the namespace), it returns problems (the trial fails, nothing changed) and waits (the
trial holds until ``progressDeadline``). One trial per baseline is decided here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from acceltrial.api.spec import CandidateSpec
from acceltrial.api.status import TERMINAL_PHASES

Manifest = Mapping[str, Any]
NEURON_CORE = "aws.amazon.com/neuroncore"
NEURON_DEVICE = "aws.amazon.com/neuron"


def available(deployment: Manifest) -> bool:
    """Whether a Deployment reports the condition Available=True."""
    conditions = deployment.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Available" and c.get("status") == "True" for c in conditions)


def available_replicas(deployment: Manifest | None) -> int:
    if deployment is None:
        return 0
    return int((deployment.get("status") or {}).get("availableReplicas") or 0)


def baseline_missing(namespace: str, name: str) -> str:
    return f"baseline Deployment {namespace}/{name} not found"


def baseline_waits(baseline: Manifest, name: str) -> tuple[str, ...]:
    """A baseline still rolling out (as when GitOps applies it with the trial) is waited for."""
    return () if available(baseline) else (f"baseline Deployment {name} is not Available",)


def service_problems(namespace: str, name: str, found: bool) -> list[str]:
    return [] if found else [f"baseline Service {namespace}/{name} not found"]


def neuron_request(candidate: CandidateSpec) -> tuple[str, int]:
    """The Neuron resource and amount one candidate pod asks for."""
    if candidate.neuron_cores is not None:
        return NEURON_CORE, candidate.neuron_cores
    return NEURON_DEVICE, candidate.neuron_devices or 1


def competing_trials(trials: Iterable[Manifest], uid: str, baseline: str) -> list[str]:
    """One trial per baseline: any other started, unfinished trial on it is a problem."""
    others = []
    for trial in trials:
        meta, body = trial.get("metadata", {}), trial.get("spec", {})
        same_baseline = body.get("baseline", {}).get("deploymentRef", {}).get("name")
        phase = trial.get("status", {}).get("phase")
        if (
            meta.get("uid") != uid
            and same_baseline == baseline
            and phase not in (*TERMINAL_PHASES, None, "Pending")
        ):
            others.append(meta.get("name"))
    return [
        f"trial {name} already runs on baseline {baseline}; one trial per baseline"
        for name in others
    ]
