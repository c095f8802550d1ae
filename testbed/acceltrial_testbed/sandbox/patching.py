"""The patch formats of the API server: JSON merge, JSON patch, strategic merge.

JSON merge patch follows RFC 7386 (``null`` deletes, lists replace). JSON patch follows RFC 6902
(through the ``jsonpatch`` library); a failed ``test`` operation is a :class:`PatchError`, which
the server answers with 422 as the real one does. Strategic merge is the subset the operator
uses: lists of the well-known pod-spec kinds are merged by their merge key (containers and env
by ``name``, conditions by ``type``, ...), ``$patch: delete`` removes one element, lists of
scalars with a merge strategy (finalizers) are unioned; other lists are replaced, as for the
real server's atomic lists.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch

from acceltrial.engine.candidate import merge_patch

__all__ = ["json_patch", "merge_patch", "strategic_merge_patch"]


class PatchError(ValueError):
    """A patch that cannot be applied (answered with 422 Unprocessable Entity)."""


class PatchFormatError(ValueError):
    """A patch body that is not a valid patch (answered with 400 Bad Request)."""


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902 JSON patch."""
    if not isinstance(operations, list):
        raise PatchFormatError("a JSON patch must be a list of operations")
    try:
        patch = jsonpatch.JsonPatch(operations)
        return patch.apply(target)
    except jsonpatch.JsonPatchTestFailed as error:
        raise PatchError(f"the test operation failed: {error}") from error
    except (jsonpatch.JsonPatchConflict, jsonpatch.JsonPointerException) as error:
        raise PatchError(str(error)) from error
    except jsonpatch.InvalidJsonPatch as error:
        raise PatchFormatError(str(error)) from error


# Merge keys of the lists the real API server merges by key (from the Kubernetes API types'
# patchMergeKey tags), by the field's name.
MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "ports": "containerPort",
    "imagePullSecrets": "name",
    "conditions": "type",
    "ownerReferences": "uid",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
}
# Lists of scalars with patchStrategy "merge": the patch's items are added.
SCALAR_SETS = frozenset({"finalizers"})


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """The strategic merge patch subset described in the module docstring."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$"):
            continue  # directives such as $setElementOrder only order lists
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list) and key in MERGE_KEYS:
            result[key] = _merge_by_key(result.get(key) or [], value, _merge_key(key, value))
        elif isinstance(value, list) and key in SCALAR_SETS:
            current = list(result.get(key) or [])
            result[key] = current + [item for item in value if item not in current]
        else:
            result[key] = strategic_merge_patch(result.get(key), value)
    return result


def _merge_key(field: str, items: list[Any]) -> str:
    """A Service's ``ports`` merge by ``port``, a container's by ``containerPort``."""
    if field == "ports" and items and all(isinstance(i, dict) and "port" in i for i in items):
        return "port"
    return MERGE_KEYS[field]


def _merge_by_key(current: list[Any], patch: list[Any], merge_key: str) -> list[Any]:
    merged = [copy.deepcopy(item) for item in current]
    for item in patch:
        if not isinstance(item, dict) or merge_key not in item:
            raise PatchFormatError(f"each list element needs its merge key {merge_key!r}")
        index = next(
            (i for i, old in enumerate(merged) if old.get(merge_key) == item[merge_key]), None
        )
        if item.get("$patch") == "delete":
            if index is not None:
                del merged[index]
        elif index is None:
            merged.append(strategic_merge_patch({}, item))
        else:
            merged[index] = strategic_merge_patch(merged[index], item)
    return merged
