"""CustomResourceDefinitions: serving their kinds and validating their objects.

Creating or updating a CRD registers each served version in discovery (with its schema and
printer columns) and marks the CRD ``Established``, as the real apiextensions server does;
deleting it removes the kind and its objects. Objects of a registered kind are pruned,
defaulted and validated against the version's ``openAPIV3Schema`` and CEL rules
(:mod:`acceltrial_testbed.sandbox.schema`) on every write.
"""

from __future__ import annotations

from typing import Any

from acceltrial_testbed.sandbox import errors, schema
from acceltrial_testbed.sandbox.resources import Registry, ResourceType
from acceltrial_testbed.sandbox.store import Change, Object, Store

CRD_GROUP = "apiextensions.k8s.io"


def install(store: Store) -> None:
    """Make ``store`` serve CRDs: register kinds on CRD changes, validate custom objects."""
    store.admissions.append(_establish)
    store.admissions.append(_validate_custom_object)
    store.listeners.append(lambda change: _on_change(store.registry, store, change))


def _is_crd(resource: ResourceType) -> bool:
    return (resource.group, resource.plural) == (CRD_GROUP, "customresourcedefinitions")


def _establish(
    resource: ResourceType, new: Object, old: Object | None, strict: bool
) -> tuple[Object, list[str]]:
    """Fill a CRD's status as the apiextensions controllers do once the names are accepted."""
    if not _is_crd(resource):
        return new, []
    spec = new.get("spec") or {}
    names = spec.get("names") or {}
    if not spec.get("group") or not names.get("plural") or not names.get("kind"):
        raise errors.invalid(
            "CustomResourceDefinition",
            CRD_GROUP,
            new["metadata"]["name"],
            [
                {
                    "reason": "FieldValueRequired",
                    "field": "spec",
                    "message": "Required value: "
                    "spec.group, spec.names.plural and spec.names.kind are required",
                }
            ],
        )
    conditions = [
        {
            "type": "NamesAccepted",
            "status": "True",
            "reason": "NoConflicts",
            "message": "no conflicts found",
        },
        {
            "type": "Established",
            "status": "True",
            "reason": "InitialNamesAccepted",
            "message": "the initial names have been accepted",
        },
    ]
    names = names | {"singular": names.get("singular") or names["kind"].lower()}
    stored = [v["name"] for v in spec.get("versions", []) if v.get("storage")]
    new["status"] = {"acceptedNames": names, "conditions": conditions, "storedVersions": stored}
    return new, []


def resource_types(crd: Object) -> list[ResourceType]:
    """The served versions of a CRD as kinds."""
    spec = crd["spec"]
    names = spec["names"]
    types = []
    for version in spec.get("versions", []):
        if not version.get("served", True):
            continue
        subresources = version.get("subresources") or {}
        types.append(
            ResourceType(
                group=spec["group"],
                version=version["name"],
                plural=names["plural"],
                kind=names["kind"],
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                short_names=tuple(names.get("shortNames") or ()),
                status="status" in subresources,
                scale="scale" in subresources,
                schema=(version.get("schema") or {}).get("openAPIV3Schema") or {},
                printer_columns=tuple(version.get("additionalPrinterColumns") or ()),
            )
        )
    return types


def _on_change(registry: Registry, store: Store, change: Change) -> None:
    if not _is_crd(change.resource):
        return
    spec = change.object["spec"]
    registry.remove_group_resource(spec["group"], spec["names"]["plural"])
    if change.type == "DELETED":
        store.remove_all(spec["group"], spec["names"]["plural"])
        return
    for resource in resource_types(change.object):
        registry.add(resource)


def _validate_custom_object(
    resource: ResourceType, new: Object, old: Object | None, strict: bool
) -> tuple[Object, list[str]]:
    if resource.schema is None:
        return new, []
    unknown = schema.unknown_fields(resource.schema, new)
    if unknown and strict:
        listed = ", ".join(f'unknown field "{path}"' for path in unknown)
        raise errors.bad_request(
            f'{resource.kind} in version "{resource.version}" cannot be handled as a '
            f"{resource.kind}: strict decoding error: {listed}"
        )
    schema.prune(new, unknown)
    new = schema.defaulted(resource.schema, new)
    causes = schema.validate(resource.schema, new)
    if causes:
        raise errors.invalid(
            resource.kind,
            resource.group,
            new["metadata"].get("name", ""),
            [_cause(c) for c in causes],
        )
    return new, [f'unknown field "{path}"' for path in unknown]


def _cause(cause: schema.Cause) -> dict[str, Any]:
    return {"reason": cause.reason, "message": cause.message, "field": cause.field}
