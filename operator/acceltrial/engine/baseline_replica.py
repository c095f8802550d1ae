"""The baseline's temporary replica for the capacity sweep (``spec.capacityTest.baseline:
replica``): one more pod of the baseline's own template, outside every route, on a GPU node
that already serves the baseline, so both sides of the cost ratio are measured alike. Pure:
plain manifests in and out; what reads the cluster and waits is handlers/capacity_test.py.

- **Outside production's traffic.** Its pods drop every label the baseline Service, the
  baseline Deployment or the router selects by (so no user's request, no HorizontalPodAutoscaler
  average and no InferencePool counts them) and carry the trial's labels instead (so the
  baseline's queries, which leave out the trial's own pods, never read them). A Service of its
  own, owned by the trial like the candidate's, is what the sweep loads.
- **Only where there is room.** A required node affinity on ``kubernetes.io/hostname`` keeps it
  to the nodes that exist now of the instance types the baseline's pods run on: the scheduler
  places it where a GPU is free, or says Unschedulable, and no autoscaler adds a node for it
  (Karpenter leaves pods with hostname affinity alone, the label being restricted; a new node's
  name cannot match).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from acceltrial.engine.candidate import (
    INSTANCE_TYPE_LABEL,
    TRIAL_LABEL,
    VARIANT_LABEL,
    Manifest,
    TrialRef,
    owned_service,
    owner_reference,
)

HOSTNAME_LABEL = "kubernetes.io/hostname"
REPLICA_VARIANT = "baseline-sweep"
"""The variant label of the replica's pods: neither the baseline's users' nor the candidate."""


def replica_name(trial: TrialRef) -> str:
    """Name of the replica's Deployment and Service."""
    return f"{trial.name}-baseline-sweep"[:63].rstrip("-")


def replica_labels(trial: TrialRef) -> dict[str, str]:
    """The labels that select the replica's pods, and only them."""
    return {TRIAL_LABEL: trial.name, VARIANT_LABEL: REPLICA_VARIANT}


def hostnames(pods: Iterable[Mapping[str, Any]], nodes: Iterable[Mapping[str, Any]]) -> list[str]:
    """The ``kubernetes.io/hostname`` of every node of an instance type the baseline's ``pods``
    run on (a node without the label by its name, as the kubelet labels it): the GPU capacity
    that exists, wherever the baseline's pods happen to be."""
    nodes = list(nodes)
    used = {p.get("spec", {}).get("nodeName") for p in pods} - {None}
    kinds = {_labels(n).get(INSTANCE_TYPE_LABEL) for n in nodes if _name(n) in used} - {None}
    return sorted(
        str(_labels(n).get(HOSTNAME_LABEL) or _name(n))
        for n in nodes
        if _labels(n).get(INSTANCE_TYPE_LABEL) in kinds
    )


def _labels(node: Mapping[str, Any]) -> Mapping[str, str]:
    return (node.get("metadata") or {}).get("labels") or {}


def _name(node: Mapping[str, Any]) -> str:
    return str((node.get("metadata") or {}).get("name"))


def derive_replica(
    baseline: Manifest,
    baseline_service: Manifest | None,
    trial: TrialRef,
    hosts: list[str],
    unselected: frozenset[str] = frozenset(),
) -> Manifest:
    """The replica's Deployment: one pod of the baseline's template, none of the labels that
    route production's traffic (the Services', the Deployment's and ``unselected``, the
    router's), kept to ``hosts``."""
    template = copy.deepcopy(baseline.get("spec", {}).get("template") or {})
    metadata = template.get("metadata") or {}
    dropped = set(unselected)
    dropped |= set(((baseline_service or {}).get("spec") or {}).get("selector") or {})
    dropped |= set(baseline.get("spec", {}).get("selector", {}).get("matchLabels") or {})
    labels = {k: v for k, v in (metadata.get("labels") or {}).items() if k not in dropped}
    template["metadata"] = {
        **({"annotations": metadata["annotations"]} if metadata.get("annotations") else {}),
        "labels": {**labels, **replica_labels(trial)},
    }
    _keep_to_hosts(template.setdefault("spec", {}), hosts)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": replica_name(trial),
            "namespace": trial.namespace,
            "labels": replica_labels(trial),
            "ownerReferences": [owner_reference(trial)],
        },
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": replica_labels(trial)},
            "template": template,
        },
    }


def derive_replica_service(baseline_service: Manifest, trial: TrialRef) -> Manifest:
    """The replica's Service: the baseline Service's ports, selecting the replica's pod."""
    return owned_service(baseline_service, trial, replica_name(trial), replica_labels(trial))


def _keep_to_hosts(pod: Manifest, hosts: list[str]) -> None:
    """Add ``hostname In hosts`` to every required node selector term (terms are ORed, their
    expressions ANDed), or one term of it alone."""
    wanted = {"key": HOSTNAME_LABEL, "operator": "In", "values": list(hosts)}
    affinity = pod.setdefault("affinity", {}).setdefault("nodeAffinity", {})
    required = affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.get("nodeSelectorTerms") or [{}]
    for term in terms:
        term["matchExpressions"] = [*(term.get("matchExpressions") or []), dict(wanted)]
    required["nodeSelectorTerms"] = terms


def unschedulable(pods: Iterable[Mapping[str, Any]]) -> str | None:
    """The scheduler's message when it found no node for the replica's pod, else None."""
    for pod in pods:
        for condition in (pod.get("status") or {}).get("conditions") or []:
            if (
                condition.get("type") == "PodScheduled"
                and condition.get("status") == "False"
                and condition.get("reason") == "Unschedulable"
            ):
                return str(condition.get("message") or "Unschedulable")
    return None
