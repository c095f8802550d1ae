"""Server-side printing: the ``Table`` a real API server returns when kubectl asks for one.

``kubectl get`` asks for ``as=Table`` and prints the server's columns. Custom kinds get their
CRD's ``additionalPrinterColumns``; the built-in kinds the operator deals with get the real
server's main columns; every other kind gets ``Name`` and ``Age``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from acceltrial_testbed.sandbox.resources import ResourceType

Object = dict[str, Any]
Column = tuple[str, str, Callable[[Object], Any]]


def wants_table(accept: str) -> bool:
    return "as=Table" in accept


def table(resource: ResourceType, items: list[Object], version: int, now: datetime) -> Object:
    columns = _columns(resource, now)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": str(version)},
        "columnDefinitions": [
            {
                "name": name,
                "type": kind,
                "format": "name" if name == "Name" else "",
                "description": "",
                "priority": 0,
            }
            for name, kind, _ in columns
        ],
        "rows": [{"cells": [cell(obj) for _, _, cell in columns], "object": obj} for obj in items],
    }


def _columns(resource: ResourceType, now: datetime) -> list[Column]:
    name: Column = ("Name", "string", lambda o: o["metadata"]["name"])
    age: Column = ("Age", "string", lambda o: _age(o, now))
    if resource.schema is not None:
        return [name, *(_printer_column(c, now) for c in resource.printer_columns)]
    return [name, *_BUILTIN_COLUMNS.get(resource.kind, []), age]


def _printer_column(column: dict[str, Any], now: datetime) -> Column:
    path = column["jsonPath"].lstrip(".").split(".")
    if column.get("type") == "date":
        return (column["name"], "string", lambda o: _age_of(_lookup(o, path), now))
    return (column["name"], column.get("type", "string"), lambda o: _lookup(o, path))


def _lookup(obj: Any, path: list[str]) -> Any:
    for part in path:
        obj = obj.get(part) if isinstance(obj, dict) else None
    return obj


def _age(obj: Object, now: datetime) -> str:
    return _age_of(obj["metadata"].get("creationTimestamp"), now)


def _age_of(stamp: Any, now: datetime) -> str:
    if not isinstance(stamp, str):
        return "<unknown>"
    seconds = int((now - datetime.fromisoformat(stamp.replace("Z", "+00:00"))).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size * 2:
            return f"{seconds // size}{unit}"
    return f"{max(seconds, 0)}s"


def _ready_pods(o: Object) -> str:
    statuses = o.get("status", {}).get("containerStatuses") or []
    ready = sum(1 for s in statuses if s.get("ready"))
    return f"{ready}/{len(o.get('spec', {}).get('containers') or [])}"


def _node_status(o: Object) -> str:
    conditions = o.get("status", {}).get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    return "Ready" if ready else "NotReady"


_BUILTIN_COLUMNS: dict[str, list[Column]] = {
    "Deployment": [
        (
            "Ready",
            "string",
            lambda o: (
                f"{o.get('status', {}).get('readyReplicas', 0)}/"
                f"{o.get('spec', {}).get('replicas', 1)}"
            ),
        ),
        ("Up-to-date", "integer", lambda o: o.get("status", {}).get("updatedReplicas", 0)),
        ("Available", "integer", lambda o: o.get("status", {}).get("availableReplicas", 0)),
    ],
    "ReplicaSet": [
        ("Desired", "integer", lambda o: o.get("spec", {}).get("replicas", 1)),
        ("Current", "integer", lambda o: o.get("status", {}).get("replicas", 0)),
        ("Ready", "integer", lambda o: o.get("status", {}).get("readyReplicas", 0)),
    ],
    "Pod": [
        ("Ready", "string", _ready_pods),
        ("Status", "string", lambda o: o.get("status", {}).get("phase", "Pending")),
        ("Node", "string", lambda o: o.get("spec", {}).get("nodeName", "<none>")),
    ],
    "Node": [
        ("Status", "string", _node_status),
        (
            "Instance-Type",
            "string",
            lambda o: o["metadata"].get("labels", {}).get("node.kubernetes.io/instance-type"),
        ),
    ],
    "Namespace": [("Status", "string", lambda o: o.get("status", {}).get("phase", "Active"))],
}
