"""Deriving the Neuron candidate's Deployment and Service from the baseline's, as plain manifests.

The baseline objects are read, never modified. The candidate's pod template is the baseline's
with: the model container's image replaced; ``nvidia.com/gpu`` removed and
``aws.amazon.com/neuroncore`` (or ``aws.amazon.com/neuron``) requested; GPU node pinning replaced
by a node selector on the candidate's instance type; the GPU taint toleration replaced by the
``aws.amazon.com/neuron`` one (``operator: Exists``); ``NEURON_RT_NUM_CORES`` and
``NEURON_COMPILED_ARTIFACTS`` set; the trial's labels added; and finally the user's
``podTemplatePatch`` merged (RFC 7386).

Labels decide who routes to the candidate. With the ``gatewayapi`` router its pods drop the
baseline Service's selector labels, so the baseline Service never sends them traffic; with the
``replicas`` router they keep them and join the baseline Service's endpoints.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from acceltrial.api.spec import TrialSpec

Manifest = dict[str, Any]

TRIAL_LABEL = "acceltrial.dev/trial"
VARIANT_LABEL = "acceltrial.dev/variant"
DERIVED_FROM = "acceltrial.dev/derived-from"
PROMOTED_BY_LABEL = "acceltrial.dev/promoted-by"
"""Set at promotion on the candidate Deployment and Service, which the trial no longer owns."""
GPU_RESOURCE = "nvidia.com/gpu"
NEURONCORE_RESOURCE = "aws.amazon.com/neuroncore"
NEURON_DEVICE_RESOURCE = "aws.amazon.com/neuron"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
NEURON_TOLERATION = {"key": "aws.amazon.com/neuron", "operator": "Exists"}
"""Whatever value and effect the Neuron node group's taint has (``=true:NoSchedule`` is common,
not universal), as the Neuron device plugin tolerates it."""
# Node labels that pin a pod to the GPU pool; the candidate is pinned by instance type instead.
_PINNING_LABELS = (
    "node.kubernetes.io/instance-type",
    "beta.kubernetes.io/instance-type",
    "eks.amazonaws.com/nodegroup",
    "karpenter.sh/nodepool",
    "karpenter.k8s.aws/instance-family",
)
_PINNING_PREFIXES = (
    "nvidia.com/",
    "karpenter.k8s.aws/instance-gpu",
    "karpenter.k8s.aws/instance-accelerator",
)


class DerivationError(ValueError):
    """The baseline cannot be turned into a candidate; the message says what to fix."""


@dataclass(frozen=True)
class TrialRef:
    """The trial that owns the candidate."""

    name: str
    namespace: str
    uid: str


def candidate_name(trial: TrialRef) -> str:
    """Name of the candidate Deployment and Service."""
    return f"{trial.name}-candidate"[:63].rstrip("-")


def candidate_labels(trial: TrialRef) -> dict[str, str]:
    """The labels that select the candidate's pods, and only them."""
    return {TRIAL_LABEL: trial.name, VARIANT_LABEL: "candidate"}


def derive_deployment(
    baseline: Manifest,
    baseline_service: Manifest | None,
    spec: TrialSpec,
    trial: TrialRef,
    unselected: frozenset[str] = frozenset(),
) -> Manifest:
    """The candidate Deployment, derived from the baseline Deployment; its pods carry none of
    the labels ``unselected`` names (the router's, which would put them in the baseline's
    backend)."""
    template = copy.deepcopy(baseline.get("spec", {}).get("template") or {})
    if not template.get("spec", {}).get("containers"):
        raise DerivationError(
            f"baseline Deployment {baseline['metadata']['name']} has no containers"
        )
    pod = template["spec"]
    _swap_model_container(pod, spec)
    _pin_to_neuron_nodes(pod, spec.candidate.instance_type)
    template["metadata"] = _pod_metadata(
        template.get("metadata") or {}, baseline_service, spec, trial, unselected
    )
    if spec.candidate.pod_template_patch:
        template = merge_patch(template, spec.candidate.pod_template_patch)
    name = candidate_name(trial)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": trial.namespace,
            "labels": candidate_labels(trial),
            "annotations": {DERIVED_FROM: baseline["metadata"]["name"]},
            "ownerReferences": [owner_reference(trial)],
        },
        "spec": {
            "replicas": spec.candidate.replicas,
            "selector": {"matchLabels": candidate_labels(trial)},
            "template": template,
        },
    }


def derive_service(baseline_service: Manifest, trial: TrialRef) -> Manifest:
    """The candidate Service: the baseline Service's ports, selecting the candidate's pods."""
    return owned_service(baseline_service, trial, candidate_name(trial), candidate_labels(trial))


def owned_service(
    baseline_service: Manifest, trial: TrialRef, name: str, labels: dict[str, str]
) -> Manifest:
    """A Service of the trial named ``name`` on the baseline Service's ports, selecting the pods
    with ``labels``."""
    ports = [
        {
            k: v
            for k, v in port.items()
            if k in ("name", "port", "targetPort", "protocol", "appProtocol")
        }
        for port in baseline_service.get("spec", {}).get("ports", [])
    ]
    if not ports:
        raise DerivationError(
            f"baseline Service {baseline_service['metadata']['name']} has no ports"
        )
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": name,
            "namespace": trial.namespace,
            "labels": labels,
            "ownerReferences": [owner_reference(trial)],
        },
        "spec": {"type": "ClusterIP", "selector": labels, "ports": ports},
    }


def _swap_model_container(pod: Manifest, spec: TrialSpec) -> None:
    containers = pod["containers"]
    wanted = spec.baseline.container
    container = (
        next((c for c in containers if c.get("name") == wanted), None) if wanted else containers[0]
    )
    if container is None:
        names = ", ".join(str(c.get("name")) for c in containers)
        raise DerivationError(
            f"spec.baseline.container: no container named {wanted!r} (the pod has: {names})"
        )
    container["image"] = spec.candidate.image
    resource, count = _neuron_request(spec)
    resources = container.setdefault("resources", {})
    for kind in ("requests", "limits"):
        amounts = {k: v for k, v in (resources.get(kind) or {}).items() if k != GPU_RESOURCE}
        resources[kind] = {**amounts, resource: str(count)}
    env = [e for e in container.get("env") or [] if e.get("name") not in _NEURON_ENV]
    if spec.candidate.neuron_cores is not None:
        env.append({"name": "NEURON_RT_NUM_CORES", "value": str(spec.candidate.neuron_cores)})
    if spec.candidate.compiled_artifacts is not None:
        env.append(
            {"name": "NEURON_COMPILED_ARTIFACTS", "value": spec.candidate.compiled_artifacts}
        )
    container["env"] = env


_NEURON_ENV = frozenset(
    {"NEURON_RT_NUM_CORES", "NEURON_RT_VISIBLE_CORES", "NEURON_COMPILED_ARTIFACTS"}
)


def _neuron_request(spec: TrialSpec) -> tuple[str, int]:
    if spec.candidate.neuron_cores is not None:
        return NEURONCORE_RESOURCE, spec.candidate.neuron_cores
    assert spec.candidate.neuron_devices is not None  # the API requires one of the two
    return NEURON_DEVICE_RESOURCE, spec.candidate.neuron_devices


def _pin_to_neuron_nodes(pod: Manifest, instance_type: str) -> None:
    selector = {
        k: v
        for k, v in (pod.get("nodeSelector") or {}).items()
        if k not in _PINNING_LABELS and not k.startswith(_PINNING_PREFIXES)
    }
    pod["nodeSelector"] = {**selector, INSTANCE_TYPE_LABEL: instance_type}
    affinity = pod.get("affinity") or {}
    # A node affinity written for the GPU pool cannot hold on Neuron nodes; pod (anti-)affinity
    # is about spreading and is kept.
    affinity.pop("nodeAffinity", None)
    if affinity:
        pod["affinity"] = affinity
    else:
        pod.pop("affinity", None)
    tolerations = [
        t
        for t in pod.get("tolerations") or []
        if not str(t.get("key", "")).startswith("nvidia.com/")
        and t.get("key") != NEURON_TOLERATION["key"]
    ]
    tolerations.append(dict(NEURON_TOLERATION))
    pod["tolerations"] = tolerations


def _pod_metadata(
    metadata: Manifest,
    baseline_service: Manifest | None,
    spec: TrialSpec,
    trial: TrialRef,
    unselected: frozenset[str],
) -> Manifest:
    labels = dict(metadata.get("labels") or {})
    if spec.traffic.router == "gatewayapi" and baseline_service is not None:
        # Keep the baseline Service from selecting the candidate's pods.
        for key in (baseline_service.get("spec") or {}).get("selector") or {}:
            labels.pop(key, None)
    for key in unselected:
        labels.pop(key, None)
    return {
        **{k: v for k, v in metadata.items() if k in ("annotations",)},
        "labels": {**labels, **candidate_labels(trial)},
    }


def owner_reference(trial: TrialRef, kind: str = "AcceleratorTrial") -> Manifest:
    """The trial (of ``kind``) as the controlling owner: what it creates goes when it is
    deleted."""
    return {
        "apiVersion": "acceltrial.dev/v1alpha1",
        "kind": kind,
        "name": trial.name,
        "uid": trial.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: objects merge, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result
