"""Size limits the real API server enforces on the built-in kinds the operator writes.

A ConfigMap's ``data`` and ``binaryData`` (decoded) together, and a Secret's decoded ``data``
and ``stringData``, may hold at most 1 MiB (Kubernetes' core validation, ``MaxSecretSize``);
the answer is the real server's 422, cause ``FieldValueTooLong`` on field ``[]`` (recorded from
kube-apiserver v1.33: ``ConfigMap "big" is invalid: []: Too long: may not be more than 1048576
bytes``).
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from acceltrial_testbed.sandbox import errors
from acceltrial_testbed.sandbox.resources import ResourceType

Object = dict[str, Any]
MAX_DATA_BYTES = 1024 * 1024


def refuse_oversized_data(
    resource: ResourceType, new: Object, old: Object | None, strict: bool
) -> tuple[Object, list[str]]:
    """The admission hook: refuse a ConfigMap or Secret whose data pass :data:`MAX_DATA_BYTES`."""
    if resource.group or resource.kind not in ("ConfigMap", "Secret"):
        return new, []
    if _data_bytes(resource.kind, new) <= MAX_DATA_BYTES:
        return new, []
    message = f"Too long: may not be more than {MAX_DATA_BYTES} bytes"
    name = str((new.get("metadata") or {}).get("name") or "")
    cause = {"reason": "FieldValueTooLong", "message": message, "field": "[]"}
    raise errors.invalid(resource.kind, "", name, [cause])


def _data_bytes(kind: str, obj: Object) -> int:
    if kind == "ConfigMap":
        plain, encoded = obj.get("data") or {}, obj.get("binaryData") or {}
    else:
        plain, encoded = obj.get("stringData") or {}, obj.get("data") or {}
    return sum(len(str(v).encode()) for v in plain.values()) + sum(
        len(_decoded(v)) for v in encoded.values()
    )


def _decoded(value: Any) -> bytes:
    try:
        return base64.b64decode(str(value), validate=False)
    except (binascii.Error, ValueError):
        return str(value).encode()
