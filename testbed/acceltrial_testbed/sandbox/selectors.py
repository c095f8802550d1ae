"""Label and field selectors, parsed from query strings and matched against stored objects.

The grammar is the API server's: a comma-separated list of requirements, each ``key=value``,
``key==value``, ``key!=value``, ``key in (a,b)``, ``key notin (a,b)``, ``key`` (exists) or
``!key`` (does not exist); all must hold. Field selectors take only ``=``, ``==`` and ``!=``
on the fields the kind supports (``metadata.name`` and ``metadata.namespace`` everywhere).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


class SelectorError(ValueError):
    """A selector the API server would refuse with 400 Bad Request."""


@dataclass(frozen=True)
class Requirement:
    """One clause of a selector."""

    key: str
    operator: str  # "=", "!=", "in", "notin", "exists", "!exists"
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        checks: dict[str, Callable[[], bool]] = {
            "=": lambda: value in self.values,
            "in": lambda: value in self.values,
            "!=": lambda: value not in self.values,
            "notin": lambda: value not in self.values,
            "exists": lambda: present,
            "!exists": lambda: not present,
        }
        return checks[self.operator]()


_SET = re.compile(r"^([^\s!=,()]+)\s+(in|notin)\s+\(([^)]*)\)$")
_EQUALITY = re.compile(r"^([^\s!=,()]+)\s*(==|=|!=)\s*([^\s!=,()]*)$")
_EXISTS = re.compile(r"^(!?)\s*([^\s!=,()]+)$")


def parse_label_selector(text: str) -> list[Requirement]:
    """Parse ``labelSelector``; raises :class:`SelectorError` on bad syntax."""
    return [_parse_clause(clause) for clause in _split(text)]


def _split(text: str) -> list[str]:
    """Split on commas outside parentheses (``a in (x,y),b`` is two clauses)."""
    clauses, depth, current = [], 0, ""
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            clauses.append(current.strip())
            current = ""
        else:
            current += char
    clauses.append(current.strip())
    return [clause for clause in clauses if clause]


def _parse_clause(clause: str) -> Requirement:
    if match := _SET.match(clause):
        values = frozenset(v.strip() for v in match[3].split(",") if v.strip())
        return Requirement(match[1], match[2], values)
    if match := _EQUALITY.match(clause):
        operator = "!=" if match[2] == "!=" else "="
        return Requirement(match[1], operator, frozenset([match[3]]))
    if match := _EXISTS.match(clause):
        return Requirement(match[2], "!exists" if match[1] else "exists")
    raise SelectorError(f"unable to parse requirement: {clause!r}")


def matches_labels(requirements: list[Requirement], obj: Mapping[str, Any]) -> bool:
    labels = obj.get("metadata", {}).get("labels") or {}
    return all(requirement.matches(labels) for requirement in requirements)


# Fields every kind supports, plus the few per-kind ones the real API server offers and the
# operator's code is likely to use.
COMMON_FIELDS = ("metadata.name", "metadata.namespace")
_EVENT_OBJECT = tuple(
    f"involvedObject.{name}"
    for name in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")
)
KIND_FIELDS: dict[str, tuple[str, ...]] = {
    "Pod": (
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    ),
    "Node": ("spec.unschedulable",),
    "Namespace": ("status.phase",),
    "Secret": ("type",),
    # kubectl describe finds an object's events with these.
    "Event": (*_EVENT_OBJECT, "reason", "reportingComponent", "source", "type"),
}


def _unsupported_field(field: str, kind: str) -> str:
    """The server's words: kinds with only the common fields use the generic conversion."""
    if kind in KIND_FIELDS:
        return f"field label not supported: {field}"
    return f'"{field}" is not a known field selector: only "metadata.name", "metadata.namespace"'


def parse_field_selector(text: str, kind: str) -> list[Requirement]:
    """Parse ``fieldSelector`` for ``kind``; unsupported fields are refused as the server does."""
    requirements = []
    for clause in _split(text):
        match = _EQUALITY.match(clause)
        if match is None:
            raise SelectorError(f"invalid field selector: {clause!r}")
        if match[1] not in COMMON_FIELDS + KIND_FIELDS.get(kind, ()):
            raise SelectorError(_unsupported_field(match[1], kind))
        operator = "!=" if match[2] == "!=" else "="
        requirements.append(Requirement(match[1], operator, frozenset([match[3]])))
    return requirements


def matches_fields(requirements: list[Requirement], obj: Mapping[str, Any]) -> bool:
    fields = {r.key: _field(obj, r.key) for r in requirements}
    return all(requirement.matches(fields) for requirement in requirements)


def _field(obj: Mapping[str, Any], path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return "" if value is None else str(value)


@dataclass(frozen=True)
class Selector:
    """A label and a field selector together, as one list or watch request gives them."""

    labels: tuple[Requirement, ...] = ()
    fields: tuple[Requirement, ...] = ()

    @classmethod
    def parse(cls, label_selector: str, field_selector: str, kind: str) -> Selector:
        return cls(
            tuple(parse_label_selector(label_selector)),
            tuple(parse_field_selector(field_selector, kind)),
        )

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return matches_labels(list(self.labels), obj) and matches_fields(list(self.fields), obj)
