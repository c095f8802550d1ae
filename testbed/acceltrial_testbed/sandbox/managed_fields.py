"""Field managers of HTTPRoute writes, kept in ``metadata.managedFields`` as the API server
keeps them (one entry per manager, operation and subresource, stamped with the time of its last
change; the field sets themselves are not tracked, ``fieldsV1`` stays empty).

The operator reads them to name who else changed a route it is splitting. Other kinds keep no
managedFields in the emulator.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import datetime
from typing import Any

from aiohttp import web

from acceltrial_testbed.sandbox.resources import ResourceType

Object = dict[str, Any]
TRACKED = frozenset({("gateway.networking.k8s.io", "httproutes")})
_VOLATILE = ("resourceVersion", "managedFields", "generation")


def manager(request: web.Request) -> str:
    """The request's field manager: ``fieldManager``, else the user agent's product, as the API
    server derives it."""
    named = request.query.get("fieldManager")
    if named:
        return named
    agent = request.headers.get("User-Agent", "unknown")
    return agent.split("/", 1)[0] or "unknown"


def stamping(
    resource: ResourceType,
    change: Callable[[Object], Object],
    who: str,
    subresource: str | None,
    now: Callable[[], datetime],
) -> Callable[[Object], Object]:
    """``change`` that also records ``who`` wrote, when it changes anything (tracked kinds)."""
    if (resource.group, resource.plural) not in TRACKED:
        return change

    def stamped(current: Object) -> Object:
        requested = change(copy.deepcopy(current))
        if not isinstance(requested, dict):
            return requested
        kept = current.get("metadata", {}).get("managedFields") or []
        written = requested.get("metadata", {}).get("managedFields")
        if written is not None and written != kept:
            # A write that sets managedFields replaces them, as on the API server ([{}] clears
            # them all): how a manager's ownership is given up.
            kept = [e for e in written if e]
            requested["metadata"]["managedFields"] = kept
        if _bare(requested) == _bare(current):
            return requested
        entries = [
            e for e in kept if (e.get("manager"), e.get("subresource")) != (who, subresource)
        ]
        entry: Object = {
            "manager": who,
            "operation": "Update",
            "apiVersion": resource.api_version,
            "time": now().strftime("%Y-%m-%dT%H:%M:%SZ"),
            # The field set is not tracked; kubectl apply needs the keys to read the entry.
            "fieldsType": "FieldsV1",
            "fieldsV1": {},
        }
        if subresource:
            entry["subresource"] = subresource
        requested.setdefault("metadata", {})["managedFields"] = [*entries, entry]
        return requested

    return stamped


def _bare(obj: Object) -> Object:
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in _VOLATILE}
    return {**obj, "metadata": meta}
