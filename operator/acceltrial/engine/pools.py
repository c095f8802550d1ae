"""InferencePools (Gateway API Inference Extension, ``inference.networking.k8s.io/v1``) as an
HTTPRoute names them, on plain values.

A pool holds the pods of one model server on one kind of accelerator, so the GPU baseline and
the Neuron candidate are two pools and a canary is two weighted backendRefs, one to each (the
extension's ``inferencepool-rollout`` guide). The baseline's pool is the one the route names
whose selector picks the baseline Deployment's pods; the candidate's is that pool's spec with
the candidate's pods as its selector and, where the baseline's pool has an endpoint picker, one
of its own (a picker serves exactly one pool), as llm-d's blue-green guide deploys them.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

Manifest = dict[str, Any]
POOL_GROUP = "inference.networking.k8s.io"
POOL_KIND = "InferencePool"
ALPHA_POOL_GROUP = "inference.networking.x-k8s.io"
"""The v1alpha2 pool's group, deprecated since the v1 API (2025-09)."""
PICKER_POOL_FLAGS = ("--pool-name", "-pool-name", "--poolName", "-poolName")
"""How an endpoint picker's command line names the pool it serves (newer, then older flags)."""


def is_pool_ref(ref: Mapping[str, Any]) -> bool:
    return ref.get("kind") == POOL_KIND and ref.get("group") in (POOL_GROUP, ALPHA_POOL_GROUP)


def pool_refs(rules: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Every InferencePool backendRef of the route's rules, v1 and v1alpha2 alike."""
    return [ref for rule in rules for ref in rule.get("backendRefs") or [] if is_pool_ref(ref)]


def selects(pool: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Whether the pool's selector picks pods with ``labels`` (an empty selector picks none)."""
    wanted = ((pool.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    return matches(wanted, labels)


def matches(wanted: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    """Whether ``labels`` hold every label of a non-empty ``matchLabels``."""
    return bool(wanted) and all(labels.get(key) == value for key, value in wanted.items())


def pod_labels(deployment: Mapping[str, Any]) -> dict[str, str]:
    template = (deployment.get("spec") or {}).get("template") or {}
    return dict((template.get("metadata") or {}).get("labels") or {})


def baseline_pool_name(
    rules: Sequence[Mapping[str, Any]],
    pools: Mapping[str, Mapping[str, Any]],
    baseline: Mapping[str, Any],
) -> str | None:
    """The pool the route names (in its own namespace) whose selector picks the baseline's pods;
    ``pools`` by name, as read."""
    labels = pod_labels(baseline)
    for ref in pool_refs(rules):
        pool = pools.get(str(ref.get("name")))
        if ref.get("group") == POOL_GROUP and pool is not None and selects(pool, labels):
            return str(ref["name"])
    return None


def pool_problems(
    rules: Sequence[Mapping[str, Any]],
    pools: Mapping[str, Mapping[str, Any] | None],
    baseline: Mapping[str, Any],
    deployments: Sequence[Mapping[str, Any]],
    mirrors: bool,
) -> list[str]:
    """What the trial cannot do with the route's pools, each with why (for preflight)."""
    problems = []
    for ref in pool_refs(rules):
        name = ref.get("name")
        if ref.get("group") == ALPHA_POOL_GROUP:
            problems.append(
                f"backendRef to InferencePool {name} is of {ALPHA_POOL_GROUP} (v1alpha2, "
                f"deprecated): acceltrial splits {POOL_GROUP}/v1 pools; move the pool and the "
                "route's reference to v1"
            )
        elif pools.get(str(name)) is None:
            problems.append(f"InferencePool {name}, which the route names, not found")
    found = {name: pool for name, pool in pools.items() if pool is not None}
    chosen = baseline_pool_name(rules, found, baseline)
    if chosen is None:
        return problems
    others = _other_model_servers(found[chosen], baseline, deployments)
    if others:
        problems.append(
            f"InferencePool {chosen} also selects the pods of Deployment(s) {', '.join(others)}: "
            "a pool shared with other model servers cannot be split by weight; give the baseline "
            "a pool of its own"
        )
    if mirrors:
        problems.append(
            f"a mirror step copies requests to a pool, which the Gateway API leaves to each "
            f"implementation (it may bypass the endpoint picker): with InferencePool {chosen}, "
            "use weighted steps only"
        )
    return problems


def _other_model_servers(
    pool: Mapping[str, Any], baseline: Mapping[str, Any], deployments: Sequence[Mapping[str, Any]]
) -> list[str]:
    name = baseline["metadata"]["name"]
    return sorted(
        str(d["metadata"]["name"])
        for d in deployments
        if d["metadata"]["name"] != name and selects(pool, pod_labels(d))
    )


def candidate_pool(
    baseline: Mapping[str, Any],
    name: str,
    *,
    selector: Mapping[str, str],
    labels: Mapping[str, str],
    owner: Manifest,
    picker: str | None,
) -> Manifest:
    """The candidate's pool: the baseline pool's spec (ports, protocol, failure mode) with the
    candidate's pods as its selector and ``picker`` (a Service) as its endpoint picker."""
    spec = copy.deepcopy(dict(baseline.get("spec") or {}))
    spec["selector"] = {"matchLabels": dict(selector)}
    if picker is None:
        spec.pop("endpointPickerRef", None)
    else:
        spec["endpointPickerRef"] = {**spec.get("endpointPickerRef", {}), "name": picker}
    return {
        "apiVersion": f"{POOL_GROUP}/v1",
        "kind": POOL_KIND,
        "metadata": owned(name, baseline["metadata"]["namespace"], labels, owner),
        "spec": spec,
    }


def owned(name: str, namespace: str, labels: Mapping[str, str], owner: Manifest) -> Manifest:
    """The metadata of an object the trial owns (deleted with it until it is handed over)."""
    return {
        "name": name,
        "namespace": namespace,
        "labels": dict(labels),
        "ownerReferences": [owner],
    }


def picker_service_name(pool: Mapping[str, Any]) -> str | None:
    """The Service of the pool's endpoint picker; None when it has none (or names another kind)."""
    ref = (pool.get("spec") or {}).get("endpointPickerRef")
    if (
        not ref
        or ref.get("kind", "Service") != "Service"
        or ref.get("group", "") not in ("", "core")
    ):
        return None
    return str(ref["name"])


def picker_for_pool(
    deployment: Mapping[str, Any], pool: str, name: str, labels: Mapping[str, str], owner: Manifest
) -> Manifest:
    """A copy of the baseline pool's endpoint picker Deployment serving ``pool``: its pods
    labelled ``labels`` (and only those selected), the pool flag of its command line changed.
    Raises ValueError when no container names a pool (the picker is not one acceltrial knows)."""
    template = copy.deepcopy(dict((deployment.get("spec") or {}).get("template") or {}))
    changed = False
    for container in (template.get("spec") or {}).get("containers") or []:
        args, found = _with_pool(list(container.get("args") or []), pool)
        container["args"] = args
        changed = changed or found
    if not changed:
        raise ValueError(
            f"Deployment {deployment['metadata']['name']} (the pool's endpoint picker) names no "
            f"pool with {' or '.join(PICKER_POOL_FLAGS)} in its containers' args"
        )
    template["metadata"] = {**(template.get("metadata") or {}), "labels": dict(labels)}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": owned(name, deployment["metadata"]["namespace"], labels, owner),
        "spec": {
            "replicas": (deployment.get("spec") or {}).get("replicas", 1),
            "selector": {"matchLabels": dict(labels)},
            "template": template,
        },
    }


def _with_pool(args: list[Any], pool: str) -> tuple[list[Any], bool]:
    found = False
    for index, arg in enumerate(args):
        text = str(arg)
        for flag in PICKER_POOL_FLAGS:
            if text == flag and index + 1 < len(args):
                args[index + 1], found = pool, True
            elif text.startswith(flag + "="):
                args[index], found = f"{flag}={pool}", True
    return args, found


def picker_service(
    service: Mapping[str, Any], name: str, labels: Mapping[str, str], owner: Manifest
) -> Manifest:
    """The baseline picker's Service (its ports) in front of the candidate's picker."""
    ports = [
        {
            k: v
            for k, v in port.items()
            if k in ("name", "port", "targetPort", "protocol", "appProtocol")
        }
        for port in (service.get("spec") or {}).get("ports") or []
    ]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": owned(name, service["metadata"]["namespace"], labels, owner),
        "spec": {"type": "ClusterIP", "selector": dict(labels), "ports": ports},
    }
