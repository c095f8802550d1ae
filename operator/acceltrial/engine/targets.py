"""Which pods and instances a variant's queries select: from the pods and nodes as read.

Pure. A pod's node names its EC2 instance in ``spec.providerID`` (``aws:///<zone>/<instance-id>``),
the id neuron-monitor labels its series with when it carries no pod labels.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from acceltrial.engine.candidate import TRIAL_LABEL
from acceltrial.engine.metrics import Accelerator, Variant, VariantTarget
from acceltrial.engine.routing import serving

Manifest = Mapping[str, Any]
_INSTANCE = re.compile(r"^aws:///[^/]*/(i-[0-9a-f]{8,17})$")


def instance_id(node: Manifest) -> str | None:
    """The EC2 instance id of a Node, or None if it is not an EC2 instance."""
    provider = str((node.get("spec") or {}).get("providerID") or "")
    found = _INSTANCE.match(provider)
    return found.group(1) if found else None


def variant_target(
    variant: Variant,
    namespace: str,
    deployment: str,
    pods: Iterable[Manifest],
    *,
    nodes: Iterable[Manifest],
    accelerator: Accelerator,
) -> VariantTarget:
    """The target of one variant: its pods' names and their nodes' instance ids."""
    pods = list(pods)
    by_name = {n.get("metadata", {}).get("name"): n for n in nodes}
    instances = {
        instance_id(by_name[node])
        for node in (p.get("spec", {}).get("nodeName") for p in pods)
        if node in by_name
    }
    return VariantTarget(
        variant,
        namespace,
        deployment,
        tuple(sorted(p["metadata"]["name"] for p in pods)),
        accelerator,
        tuple(sorted(i for i in instances if i is not None)),
        serving=sum(1 for p in pods if serving(p)),
    )


def baseline_pods(pods: Iterable[Manifest], trial_name: str) -> list[Manifest]:
    """Pods of the baseline's selector, without the trial's own candidate (the replicas router
    gives it the baseline's labels)."""
    return [
        p
        for p in pods
        if (p.get("metadata", {}).get("labels") or {}).get(TRIAL_LABEL) != trial_name
    ]
