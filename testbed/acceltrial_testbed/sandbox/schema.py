"""Validation of custom objects against their CRD's structural schema, as the API server does it.

The order is the API server's: unknown fields are pruned (or, under ``fieldValidation=Strict``,
refused), the schema's defaults are applied, then the OpenAPI v3 constraints (types, enums,
bounds, lengths, patterns, required fields, item counts) and finally the CEL rules
(``x-kubernetes-validations``) are checked. Defaults and CEL come from
:mod:`acceltrial.api.cel`, shared with the offline validator, so both judge a trial alike.
Messages follow the real server's wording (``spec.x: Invalid value: 150: spec.x in body should
be less than or equal to 100``) so a user sees the same error here and on EKS.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from acceltrial.api.cel import Schema, apply_defaults, check_rules

# Top-level fields every object has, which a CRD's schema need not declare.
_ENVELOPE = ("apiVersion", "kind", "metadata")


@dataclass(frozen=True)
class Cause:
    """One invalid field, as an entry of a 422 Status's ``details.causes``."""

    reason: str
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


def unknown_fields(schema: Schema, value: Any, path: str = "") -> list[str]:
    """Paths of the fields the schema does not declare (what pruning would remove)."""
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    found: list[str] = []
    if isinstance(value, dict) and "properties" in schema:
        for key, item in value.items():
            if path == "" and key in _ENVELOPE:
                continue  # never pruned: the API server owns the envelope
            sub = schema["properties"].get(key)
            if sub is None:
                found.append(_join(path, key))
            elif sub is not None:
                found += unknown_fields(sub, item, _join(path, key))
    elif isinstance(value, dict) and isinstance(schema.get("additionalProperties"), dict):
        for key, item in value.items():
            found += unknown_fields(schema["additionalProperties"], item, _join(path, key))
    elif isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            found += unknown_fields(schema["items"], item, f"{path}[{index}]")
    return found


def prune(value: dict[str, Any], paths: list[str]) -> None:
    """Remove the fields at ``paths`` (from :func:`unknown_fields`) in place."""
    for path in paths:
        *parents, last = _split_path(path)
        node: Any = value
        for part in parents:
            node = node[part]
        del node[last]


def _split_path(path: str) -> list[str | int]:
    parts: list[str | int] = []
    for name, index in re.findall(r"([^.\[\]]+)|\[(\d+)\]", path):
        parts.append(int(index) if index else name)
    return parts


def defaulted(schema: Schema, value: dict[str, Any]) -> dict[str, Any]:
    """The object with the schema's defaults applied (metadata untouched). As the API server
    does (CRD docs, "Defaulting and Nullable"), a null where the schema is not ``nullable`` is
    pruned first, so a field with a default gets it and a required one is missing."""
    body_schema = _without_envelope(schema)
    body = {k: v for k, v in value.items() if k != "metadata"}
    pruned = _nulls_pruned(body_schema, body) | (
        {"metadata": value["metadata"]} if "metadata" in value else {}
    )
    result: dict[str, Any] = apply_defaults(body_schema, pruned)
    return result


def _nulls_pruned(schema: Schema, value: Any) -> Any:
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        return {
            name: _nulls_pruned(properties.get(name, {}), item)
            for name, item in value.items()
            if item is not None or properties.get(name, {}).get("nullable")
        }
    if isinstance(value, list) and "items" in schema:
        return [_nulls_pruned(schema["items"], item) for item in value]
    return value


def validate(schema: Schema, value: dict[str, Any]) -> list[Cause]:
    """Every constraint and CEL rule the (pruned, defaulted) object breaks."""
    body_schema = _without_envelope(schema)
    causes = _check(body_schema, value, "")
    if causes:
        # As on the real server, CEL rules are only run on a value that fits its schema.
        return causes
    return [
        Cause("FieldValueInvalid", v.path, f"Invalid value: {_kind(value, v.path)}: {v.message}")
        for v in check_rules(body_schema, value, "")
    ]


def _without_envelope(schema: Schema) -> Schema:
    """The schema without ``metadata``: the API server validates metadata itself."""
    properties = {k: v for k, v in schema.get("properties", {}).items() if k != "metadata"}
    return schema | {"properties": properties}


def _check(schema: Schema, value: Any, path: str) -> list[Cause]:
    if value is None:
        if schema.get("nullable"):
            return []
        return [Cause("FieldValueRequired", path, "Required value")] if path else []
    type_cause = _type_cause(schema, value, path)
    if type_cause is not None:
        return [type_cause]
    causes = _scalar_causes(schema, value, path)
    if isinstance(value, dict):
        causes += _object_causes(schema, value, path)
    elif isinstance(value, list):
        causes += _array_causes(schema, value, path)
    return causes


_PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}


def _type_cause(schema: Schema, value: Any, path: str) -> Cause | None:
    expected = schema.get("type")
    if schema.get("x-kubernetes-int-or-string"):
        ok = isinstance(value, int | str) and not isinstance(value, bool)
        expected = "integer,string"
    elif expected is None:
        return None
    else:
        ok = isinstance(value, _PYTHON_TYPES[expected]) and (
            expected == "boolean" or not isinstance(value, bool)
        )
    if ok:
        return None
    shown = f'"{_json_type(value)}"'  # the server names the type it got, not the value
    return Cause(
        "FieldValueTypeInvalid",
        path,
        f"Invalid value: {shown}: {path} in body must be of type {expected}: {shown}",
    )


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _scalar_causes(schema: Schema, value: Any, path: str) -> list[Cause]:
    causes = []
    if "enum" in schema and value not in schema["enum"]:
        allowed = ", ".join(_show(v) for v in schema["enum"])
        causes.append(
            Cause(
                "FieldValueNotSupported",
                path,
                f"Unsupported value: {_show(value)}: supported values: {allowed}",
            )
        )
    if isinstance(value, int | float) and not isinstance(value, bool):
        causes += _bound_causes(schema, value, path)
    if isinstance(value, str):
        causes += _string_causes(schema, value, path)
    return causes


def _bound_causes(schema: Schema, value: float, path: str) -> list[Cause]:
    causes = []
    if "minimum" in schema:
        exclusive = bool(schema.get("exclusiveMinimum"))
        if value < schema["minimum"] or (exclusive and value == schema["minimum"]):
            word = "greater than" if exclusive else "greater than or equal to"
            causes.append(_invalid(path, value, f"should be {word} {schema['minimum']}"))
    if "maximum" in schema:
        exclusive = bool(schema.get("exclusiveMaximum"))
        if value > schema["maximum"] or (exclusive and value == schema["maximum"]):
            word = "less than" if exclusive else "less than or equal to"
            causes.append(_invalid(path, value, f"should be {word} {schema['maximum']}"))
    return causes


def _string_causes(schema: Schema, value: str, path: str) -> list[Cause]:
    causes = []
    if "minLength" in schema and len(value) < schema["minLength"]:
        causes.append(_invalid(path, value, f"should be at least {schema['minLength']} chars long"))
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        causes.append(
            Cause(
                "FieldValueTooLong",
                path,
                f"Too long: may not be more than {schema['maxLength']} bytes",
            )
        )
    if "pattern" in schema and _pattern(schema["pattern"]).search(value) is None:
        causes.append(_invalid(path, value, f"should match '{schema['pattern']}'"))
    return causes


@lru_cache(maxsize=256)
def _pattern(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _object_causes(schema: Schema, value: dict[str, Any], path: str) -> list[Cause]:
    causes = [
        Cause("FieldValueRequired", _join(path, name), "Required value")
        for name in schema.get("required", [])
        if name not in value
    ]
    for key, item in value.items():
        sub = schema.get("properties", {}).get(key)
        if sub is None and isinstance(schema.get("additionalProperties"), dict):
            sub = schema["additionalProperties"]
        if sub is not None:
            causes += _check(sub, item, _join(path, key))
    return causes


def _array_causes(schema: Schema, value: list[Any], path: str) -> list[Cause]:
    causes = []
    if "minItems" in schema and len(value) < schema["minItems"]:
        causes.append(
            _invalid(path, len(value), f"should have at least {schema['minItems']} items")
        )
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        causes.append(
            Cause(
                "FieldValueTooMany",
                path,
                f"Too many: {len(value)}: must have at most {schema['maxItems']} items",
            )
        )
    for index, item in enumerate(value):
        causes += _check(schema.get("items", {}), item, f"{path}[{index}]")
    return causes


def _invalid(path: str, value: Any, should: str) -> Cause:
    return Cause(
        "FieldValueInvalid", path, f"Invalid value: {_show(value)}: {path} in body {should}"
    )


def _show(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, dict | list) else f'"{_type_name(value)}"'


def _type_name(value: Any) -> str:
    return "object" if isinstance(value, dict) else "array"


def _kind(value: Any, path: str) -> str:
    """How the real server shows the value a CEL rule rejected: its JSON type for containers."""
    node: Any = value
    for part in _split_path(path):
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return '"object"'
    return _show(node)


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name
