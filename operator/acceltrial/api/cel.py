"""Evaluation of a structural schema's defaults and CEL rules (``x-kubernetes-validations``).

This mirrors what the API server does with a CRD: apply the schema's defaults, then evaluate every
rule with ``self`` bound to the value at the rule's node, typed as the schema says (an ``integer``
is a CEL int, a ``number`` a CEL double even when written ``1``). It works on any structural
schema, so the offline validator and a local API server can share it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import celpy
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.evaluation import CELEvalError

from acceltrial.api.base import CEL_RULES_KEY

Schema = dict[str, Any]


@dataclass(frozen=True)
class RuleViolation:
    """A CEL rule that does not hold (or could not be evaluated) at a field path."""

    path: str
    message: str
    evaluation_error: bool = False


def apply_defaults(schema: Schema, value: Any) -> Any:
    """Return a copy of ``value`` with the schema's defaults filled in, as the API server does."""
    value = copy.deepcopy(value)
    _fill_defaults(schema, value)
    return value


def _fill_defaults(schema: Schema, value: Any) -> None:
    if isinstance(value, dict):
        for name, sub in schema.get("properties", {}).items():
            if name not in value and "default" in sub:
                value[name] = copy.deepcopy(sub["default"])
            if name in value:
                _fill_defaults(sub, value[name])
    elif isinstance(value, list) and "items" in schema:
        for item in value:
            _fill_defaults(schema["items"], item)


def check_rules(
    schema: Schema, value: Any, path: str = "", skip: Callable[[str], bool] = lambda _: False
) -> list[RuleViolation]:
    """Evaluate every CEL rule of ``schema`` against ``value`` (already defaulted), except the
    rules of the objects ``skip`` names by path (those that do not fit their schema: as on the
    API server, and because celpy's errors on ill-typed values can grow without bound)."""
    violations: list[RuleViolation] = []
    if isinstance(value, dict):
        for name, sub in schema.get("properties", {}).items():
            if name in value:
                violations += check_rules(sub, value[name], _join(path, name), skip)
    elif isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            violations += check_rules(schema["items"], item, f"{path}[{index}]", skip)
    if skip(path):
        return violations
    for rule in schema.get(CEL_RULES_KEY, []):
        violation = _evaluate(rule, schema, value, path)
        if violation is not None:
            violations.append(violation)
    return violations


def _evaluate(rule: dict[str, str], schema: Schema, value: Any, path: str) -> RuleViolation | None:
    where = (path + rule.get("fieldPath", "")).lstrip(".")
    try:
        result = _program(rule["rule"]).evaluate({"self": to_cel(schema, value)})
    except CELEvalError as error:
        return RuleViolation(where, f"rule {rule['rule']!r} could not be evaluated: {error}", True)
    if isinstance(result, CELEvalError):
        return RuleViolation(where, f"rule {rule['rule']!r} could not be evaluated: {result}", True)
    if result != celtypes.BoolType(True):
        return RuleViolation(where, rule["message"])
    return None


@lru_cache(maxsize=512)
def _program(rule: str) -> celpy.Runner:
    environment = celpy.Environment()
    return environment.program(environment.compile(rule))


def to_cel(schema: Schema, value: Any) -> celtypes.Value:
    """Convert a JSON value to CEL, typed by its schema node."""
    kind = schema.get("type")
    if isinstance(value, bool) or value is None:
        return json_to_cel(value)
    if kind == "number" and isinstance(value, int | float):
        return celtypes.DoubleType(float(value))
    if kind == "integer" and isinstance(value, int):
        return celtypes.IntType(value)
    if isinstance(value, dict) and "properties" in schema:
        properties = schema["properties"]
        return celtypes.MapType(
            {
                celtypes.StringType(key): to_cel(properties.get(key, {}), item)
                for key, item in value.items()
            }
        )
    if isinstance(value, list) and "items" in schema:
        return celtypes.ListType([to_cel(schema["items"], item) for item in value])
    return json_to_cel(value)


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name
