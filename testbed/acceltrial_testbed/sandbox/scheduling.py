"""Where a pod may run: the kube-scheduler's filters the operator's pods depend on.

A node fits when it is Ready, its labels satisfy the pod's ``nodeSelector`` and required node
affinity, the pod tolerates every ``NoSchedule``/``NoExecute`` taint, and its allocatable
resources minus what the pods already bound to it request cover the pod's requests (a container
without requests requests its limits, as the API server defaults them; each pod takes one of the
node's ``pods``). Among fitting nodes the least loaded wins (CPU and pod slots). The reasons a
pod fits nowhere are summed up the way the scheduler's Unschedulable message does.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from acceltrial_testbed.sandbox.quantities import parse_quantity

Object = dict[str, Any]


def pod_requests(pod: Object) -> dict[str, Decimal]:
    """What the pod takes from a node; every pod takes one of the node's ``pods`` slots."""
    totals: dict[str, Decimal] = defaultdict(Decimal)
    totals["pods"] = Decimal(1)
    for container in pod.get("spec", {}).get("containers") or []:
        resources = container.get("resources") or {}
        wanted = (resources.get("limits") or {}) | (resources.get("requests") or {})
        for name, quantity in wanted.items():
            totals[name] += parse_quantity(quantity)
    return dict(totals)


def _tolerates(tolerations: list[Object], taint: Object) -> bool:
    for toleration in tolerations:
        effect_ok = not toleration.get("effect") or toleration["effect"] == taint.get("effect")
        if toleration.get("operator") == "Exists":
            key_ok = not toleration.get("key") or toleration["key"] == taint.get("key")
        else:
            key_ok = toleration.get("key") == taint.get("key") and (
                toleration.get("value", "") == taint.get("value", "")
            )
        if effect_ok and key_ok:
            return True
    return False


def _affinity_matches(pod: Object, labels: Mapping[str, str]) -> bool:
    affinity = (pod.get("spec", {}).get("affinity") or {}).get("nodeAffinity") or {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    terms = required.get("nodeSelectorTerms") or []
    return not terms or any(_term_matches(term, labels) for term in terms)


def labels_match(requirements: list[Object], labels: Mapping[str, str]) -> bool:
    """Whether node labels satisfy every NodeSelectorRequirement (In, NotIn, Exists,
    DoesNotExist)."""
    return _term_matches({"matchExpressions": requirements}, labels)


def _term_matches(term: Object, labels: Mapping[str, str]) -> bool:
    for expression in term.get("matchExpressions") or []:
        key, operator = expression.get("key"), expression.get("operator")
        values = expression.get("values") or []
        checks = {
            "In": labels.get(key) in values,
            "NotIn": labels.get(key) not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }
        if not checks.get(operator, False):
            return False
    return True


def misfit(pod: Object, node: Object, used: Mapping[str, Decimal]) -> str | None:
    """Why ``pod`` cannot run on ``node`` (in the scheduler's words), or None when it fits."""
    labels = node["metadata"].get("labels") or {}
    conditions = node.get("status", {}).get("conditions") or []
    if not any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
        return "node(s) were not ready"
    selector = pod.get("spec", {}).get("nodeSelector") or {}
    if any(labels.get(k) != v for k, v in selector.items()) or not _affinity_matches(pod, labels):
        return "node(s) didn't match Pod's node affinity/selector"
    tolerations = pod.get("spec", {}).get("tolerations") or []
    for taint in node.get("spec", {}).get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerates(
            tolerations, taint
        ):
            return f"node(s) had untolerated taint {{{taint['key']}: {taint.get('value', '')}}}"
    allocatable = node.get("status", {}).get("allocatable") or {}
    for name, amount in sorted(pod_requests(pod).items()):
        if name == "pods" and name not in allocatable:
            continue  # a node that does not say how many pods it takes has no limit
        free = parse_quantity(allocatable.get(name, "0")) - used.get(name, Decimal(0))
        if amount > free:
            return f"Insufficient {name}"
    return None


def choose_node(
    pod: Object, nodes: list[Object], used: Mapping[str, Mapping[str, Decimal]]
) -> tuple[str | None, str]:
    """The node to bind to (least loaded first), or None and the reason."""
    reasons: Counter[str] = Counter()
    fitting = []
    for node in nodes:
        name = node["metadata"]["name"]
        reason = misfit(pod, node, used.get(name, {}))
        if reason is None:
            fitting.append((_load(node, used.get(name, {})), name))
        else:
            reasons[reason] += 1
    if fitting:
        return min(fitting)[1], ""
    summary = ", ".join(f"{count} {reason}" for reason, count in sorted(reasons.items()))
    return None, f"0/{len(nodes)} nodes are available: {summary}." if nodes else (
        "no nodes available to schedule pods"
    )


def _load(node: Object, used: Mapping[str, Decimal]) -> Decimal:
    """The share of the node's CPU and pod slots in use, as the scheduler's LeastAllocated
    score weighs them, so pods without requests spread too."""
    allocatable = node.get("status", {}).get("allocatable", {})
    load = Decimal(0)
    for name in ("cpu", "pods"):
        total = parse_quantity(allocatable.get(name, "0"))
        if total:
            load += used.get(name, Decimal(0)) / total
    return load
