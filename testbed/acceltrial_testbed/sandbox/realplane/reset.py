"""Putting a running real control plane back to how it started, so one plane can serve many
tests (starting one takes seconds, resetting it a fraction of that).

What a test may have made is removed: CustomResourceDefinitions and namespaces that were not
there at the start, and every object in ``default`` that was not (finalizers are cleared first,
pods go at once). It returns when all of it is gone, namespaces included.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from acceltrial_testbed.sandbox.realplane.client import AdminClient, ApiError
from acceltrial_testbed.sandbox.realplane.processes import StartError

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
NAMESPACES = "/api/v1/namespaces"
RESET_TIMEOUT_SECONDS = 90.0
NOT_WAITED_FOR = {"events"}  # controllers may record one more as their objects go


@dataclass(frozen=True)
class Snapshot:
    """What exists right after start: kept by :func:`reset`."""

    crds: frozenset[str]
    namespaces: frozenset[str]
    default_objects: frozenset[tuple[str, str]]  # (collection path, name)


def snapshot(client: AdminClient) -> Snapshot:
    return Snapshot(
        crds=frozenset(_names(client, CRDS)),
        namespaces=frozenset(_names(client, NAMESPACES)),
        default_objects=frozenset(_default_objects(client)),
    )


def reset(client: AdminClient, baseline: Snapshot, timeout: float = RESET_TIMEOUT_SECONDS) -> None:
    """Delete what is not in ``baseline`` and wait until it is gone."""
    deadline = time.monotonic() + timeout
    while True:
        leftovers = _delete_extras(client, baseline)
        if not leftovers:
            return
        if time.monotonic() > deadline:
            raise StartError(f"could not reset the control plane; still there: {leftovers[:10]}")
        time.sleep(0.1)


def _delete_extras(client: AdminClient, baseline: Snapshot) -> list[str]:
    """One pass of deletions; what still exists (or is still terminating)."""
    leftovers = []
    for name in set(_names(client, CRDS)) - baseline.crds:
        _delete(client, f"{CRDS}/{name}")
        leftovers.append(f"crd/{name}")
    for name in set(_names(client, NAMESPACES)) - baseline.namespaces:
        _delete(client, f"{NAMESPACES}/{name}")
        leftovers.append(f"namespace/{name}")
    for collection, name in set(_default_objects(client)) - baseline.default_objects:
        path = f"{collection}/{name}"
        _clear_finalizers(client, path)
        _delete(client, path)
        if collection.rsplit("/", 1)[-1] not in NOT_WAITED_FOR:
            leftovers.append(path)
    return leftovers


def _delete(client: AdminClient, path: str) -> None:
    body = {
        "kind": "DeleteOptions",
        "apiVersion": "v1",
        "gracePeriodSeconds": 0,
        "propagationPolicy": "Background",
    }
    try:
        client.request("DELETE", path, body)
    except ApiError as error:
        if error.status not in (404, 409):  # gone already, or already being deleted
            raise


def _clear_finalizers(client: AdminClient, path: str) -> None:
    try:
        obj = client.get(path)
        if obj.get("metadata", {}).get("finalizers"):
            client.merge_patch(path, {"metadata": {"finalizers": None}})
    except ApiError as error:
        if error.status not in (404, 409):
            raise


def _names(client: AdminClient, collection: str) -> list[str]:
    return [item["metadata"]["name"] for item in client.get(collection).get("items", [])]


def _default_objects(client: AdminClient) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for collection in _namespaced_collections(client, "default"):
        try:
            found.extend((collection, name) for name in _names(client, collection))
        except ApiError as error:
            if error.status != 404:  # a kind removed since discovery
                raise
    return found


def _namespaced_collections(client: AdminClient, namespace: str) -> list[str]:
    """The list paths of every namespaced kind that can be listed and deleted."""
    prefixes = ["/api/v1"]
    groups: dict[str, Any] = client.get("/apis")
    prefixes += [f"/apis/{g['preferredVersion']['groupVersion']}" for g in groups["groups"]]
    collections = []
    for prefix in prefixes:
        try:
            resources = client.get(prefix).get("resources", [])
        except ApiError:
            continue  # a group going away (a CRD being deleted)
        for resource in resources:
            verbs = set(resource.get("verbs", []))
            if (
                resource["namespaced"]
                and "/" not in resource["name"]
                and {"list", "delete"} <= verbs
            ):
                collections.append(f"{prefix}/namespaces/{namespace}/{resource['name']}")
    return collections
