"""Helpers on stored objects that several controllers share: owner references, readiness,
stable hashes."""

from __future__ import annotations

import hashlib
import json
from typing import Any

Object = dict[str, Any]

_HASH_CHARS = "bcdfghjkmnpqrstvwxz2456789"  # the alphabet of Kubernetes' safe-encoded hashes


def stable_hash(value: Any) -> str:
    """A stable hash such as pod-template-hash (10 characters of the safe alphabet)."""
    digest = hashlib.sha256(json.dumps(value, sort_keys=True).encode()).digest()
    return "".join(_HASH_CHARS[byte % len(_HASH_CHARS)] for byte in digest[:10])


def owner_reference(owner: Object) -> Object:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def pod_ready(pod: Object) -> bool:
    conditions = pod.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
