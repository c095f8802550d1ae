"""The OpenAPI documents kubectl reads: ``/openapi/v3`` (index and one per group version) and
a minimal ``/openapi/v2``.

kubectl v1.33 validates manifests on the server when the group version's OpenAPI v3 document
shows a PATCH operation for the kind that takes the ``fieldValidation`` query parameter; it
then sends ``fieldValidation=Strict`` and lets the server refuse unknown fields. So each
document lists, per kind, the item path with that PATCH operation (tagged with
``x-kubernetes-group-version-kind``) and, for custom kinds, the CRD's schema. Without them
``kubectl apply`` would need ``--validate=false``. Built-in kinds carry no schemas: kubectl
then falls back to its compiled-in types for strategic merge patches, as it does on old servers.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from acceltrial_testbed.sandbox.resources import Registry, ResourceType


def v2(registry: Registry) -> dict[str, Any]:
    return {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0"},
        "paths": {},
        "definitions": {},
    }


def _prefix(group: str, version: str) -> str:
    return f"api/{version}" if not group else f"apis/{group}/{version}"


def v3_index(registry: Registry) -> dict[str, Any]:
    paths = {}
    for group, versions in registry.group_versions().items():
        for version in versions:
            prefix = _prefix(group, version)
            document = v3_group_version(registry, prefix)
            digest = hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()
            paths[prefix] = {"serverRelativeURL": f"/openapi/v3/{prefix}?hash={digest[:32]}"}
    return {"paths": paths}


def v3_group_version(registry: Registry, prefix: str) -> dict[str, Any] | None:
    """The document of one group version (``api/v1``, ``apis/apps/v1``), or None."""
    parts = prefix.split("/")
    if parts[0] == "api" and len(parts) == 2:
        group, version = "", parts[1]
    elif parts[0] == "apis" and len(parts) == 3:
        group, version = parts[1], parts[2]
    else:
        return None
    resources = registry.in_version(group, version)
    if not resources:
        return None
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0"},
        "paths": {_item_path(r): _path_item(r) for r in resources},
        "components": {"schemas": {_schema_name(r): _schema(r) for r in resources}},
    }


def _item_path(resource: ResourceType) -> str:
    scope = "namespaces/{namespace}/" if resource.namespaced else ""
    return f"/{_prefix(resource.group, resource.version)}/{scope}{resource.plural}/{{name}}"


def _gvk(resource: ResourceType) -> dict[str, str]:
    return {"group": resource.group, "version": resource.version, "kind": resource.kind}


def _path_item(resource: ResourceType) -> dict[str, Any]:
    return {
        "patch": {
            "operationId": f"patch{resource.kind}",
            "x-kubernetes-action": "patch",
            "x-kubernetes-group-version-kind": _gvk(resource),
            "parameters": [
                {"name": name, "in": "query", "schema": {"type": "string"}, "uniqueItems": True}
                for name in ("dryRun", "fieldManager", "fieldValidation", "force")
            ],
            "responses": {"200": {"description": "OK"}},
        }
    }


def _schema_name(resource: ResourceType) -> str:
    group = ".".join(reversed(resource.group.split("."))) if resource.group else "core"
    return f"{group}.{resource.version}.{resource.kind}"


def _schema(resource: ResourceType) -> dict[str, Any]:
    schema: dict[str, Any] = dict(resource.schema or {"type": "object"})
    schema["x-kubernetes-group-version-kind"] = [_gvk(resource)]
    if resource.schema is None:
        # Built-in kinds: an open schema, so kubectl never reads a wrong one.
        schema["x-kubernetes-preserve-unknown-fields"] = True
    return schema
