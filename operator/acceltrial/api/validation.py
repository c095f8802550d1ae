"""Validation of AcceleratorTrial and TrainingTrial manifests, with one readable problem per
mistake (a document's ``kind`` says which; any other kind of the group is judged as an
AcceleratorTrial, so a misspelt kind is named).

Two layers, as on the API server: the schema (types, enums, ranges, unknown fields: the pydantic
models, in strict mode so ``"5"`` is not an integer) and the CEL rules of the generated CRD,
evaluated on the defaulted object. Each problem names the field path the way Kubernetes does
(``spec.steps[1].weight``) and says what is expected.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import yaml
from pydantic import ValidationError
from pydantic_core import ErrorDetails

from acceltrial.api.base import CEL_RULES_KEY
from acceltrial.api.cel import Schema, apply_defaults, check_rules
from acceltrial.api.crd import shared_open_api_schema
from acceltrial.api.kinds import ACCELERATOR_TRIAL, KINDS, KINDS_BY_NAME, CustomKind
from acceltrial.api.placeholders import ALLOWED_PLACEHOLDERS
from acceltrial.api.spec import PLACEHOLDER_MESSAGE
from acceltrial.api.trial import API_VERSION, GROUP


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a manifest: where, and what is expected instead."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


@dataclass(frozen=True)
class Document:
    """One YAML document of a file, with its position for messages."""

    index: int
    body: Any


class ManifestLoader(yaml.SafeLoader):
    """YAML as Kubernetes reads it: timestamps stay strings."""


ManifestLoader.yaml_implicit_resolvers = {
    first: [(tag, regex) for tag, regex in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
# Numbers such as 2e9 and 1.5e12 are floats to kubectl (its YAML library takes an exponent
# without a sign or a dot); PyYAML's YAML 1.1 resolver would read them as strings.
ManifestLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."),
)


def load_documents(text: str) -> Iterator[Document]:
    """Yield the non-empty documents of a YAML stream; raises yaml.YAMLError on bad YAML."""
    for index, body in enumerate(yaml.load_all(text, Loader=ManifestLoader), start=1):
        if body is not None:
            yield Document(index, body)


def is_trial_candidate(body: Any) -> bool:
    """Whether a document is meant as an AcceleratorTrial (other kinds in a file are skipped)."""
    if not isinstance(body, dict):
        return True
    api_version = body.get("apiVersion")
    return not isinstance(api_version, str) or api_version.split("/")[0] == GROUP


def kind_of(body: Any) -> CustomKind:
    """The kind a document of the group is judged as: its own, or AcceleratorTrial."""
    named = body.get("kind") if isinstance(body, dict) else None
    return (
        KINDS_BY_NAME.get(named, ACCELERATOR_TRIAL) if isinstance(named, str) else ACCELERATOR_TRIAL
    )


def validate_trial(body: Any) -> list[Problem]:
    """All problems of one AcceleratorTrial or TrainingTrial document; empty when it is
    valid."""
    if not isinstance(body, dict):
        kinds = " or ".join(k.kind for k in KINDS)
        return [Problem("", f"expected an {kinds} object (a mapping), got {_kind_of(body)}")]
    kind = kind_of(body)
    body = _without_nulls(body)
    problems = _schema_problems(kind, body) + _metadata_problems(kind, body)
    too_big = _integer_problems(body)
    spec = body.get("spec")
    if isinstance(spec, dict) and not too_big:
        problems += _rule_problems(kind, spec, [p.path for p in problems])
    return _unique(too_big + problems)


_INT64 = range(-(2**63), 2**63)


def _without_nulls(value: Any) -> Any:
    """The document as the API server stores it: a field set to null is dropped (no field of
    the CRD is nullable), so a required one set to null is missing, as the server says."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def _integer_problems(value: Any, path: str = "") -> list[Problem]:
    """Integers the API server cannot store as one (its integers are 64-bit), anywhere: the
    CEL rules cannot judge them either."""
    if isinstance(value, int) and not isinstance(value, bool) and value not in _INT64:
        return [Problem(path, f"{value} does not fit in a 64-bit integer; use a smaller number")]
    if isinstance(value, dict):
        return [
            p for k, v in value.items() for p in _integer_problems(v, f"{path}.{k}".lstrip("."))
        ]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _integer_problems(v, f"{path}[{i}]")]
    return []


def _schema_problems(kind: CustomKind, body: dict[str, Any]) -> list[Problem]:
    try:
        kind.model.model_validate_json(json.dumps(body, default=str), strict=True)
    except ValidationError as error:
        return [_problem_from(kind, detail) for detail in error.errors(include_url=False)]
    return []


def _metadata_problems(kind: CustomKind, body: dict[str, Any]) -> list[Problem]:
    metadata = body.get("metadata")
    if not isinstance(metadata, dict) or not (metadata.get("name") or metadata.get("generateName")):
        return [Problem("metadata.name", "required: give the trial a name")]
    # The CRD's root rules (the name's length), as the API server evaluates them.
    root = {CEL_RULES_KEY: shared_open_api_schema(kind)[CEL_RULES_KEY]}
    name = metadata.get("name")
    meta = {"name": name} if isinstance(name, str) else {}
    return [Problem(v.path, v.message) for v in check_rules(root, {"metadata": meta})]


def _rule_problems(
    kind: CustomKind, spec: dict[str, Any], schema_problem_paths: list[str]
) -> list[Problem]:
    spec_schema = _spec_schema(kind)
    defaulted = apply_defaults(spec_schema, spec)
    violations = check_rules(
        spec_schema, defaulted, "spec",
        skip=lambda at: any(_within(path, at) for path in schema_problem_paths),
    )  # fmt: skip
    # A rule over an object that already has a schema problem inside it judges bad data; the
    # schema problem is the cause to report.
    return [
        Problem(v.path, _named(v.message, spec, v.path))
        for v in violations
        if not (v.evaluation_error and schema_problem_paths)
        and not any(_within(path, v.path) for path in schema_problem_paths)
    ]


def _named(message: str, spec: dict[str, Any], path: str) -> str:
    """The placeholder rule's message, naming the placeholders the template got wrong."""
    if not message.startswith(PLACEHOLDER_MESSAGE):
        return message
    template = _value_at(spec, path.removeprefix("spec."))
    if not isinstance(template, str):
        return message
    unknown = [n for n in _USED.findall(template) if n not in ALLOWED_PLACEHOLDERS]
    if not unknown:
        return message
    named = ", ".join("{{" + n + "}}" for n in dict.fromkeys(unknown))
    return f"unknown placeholder {named}; {message}"


_USED = re.compile(r"\{\{\s*([^{}\s]*)\s*\}\}")
_STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def _value_at(root: Any, path: str) -> Any:
    node = root
    for name, index in _STEP.findall(path):
        try:
            node = node[int(index)] if index else node[name]
        except (KeyError, IndexError, TypeError):
            return None
    return node


def _within(path: str, ancestor: str) -> bool:
    return path == ancestor or path.startswith((ancestor + ".", ancestor + "["))


@lru_cache(maxsize=len(KINDS))
def _spec_schema(kind: CustomKind) -> Schema:
    spec: Schema = shared_open_api_schema(kind)["properties"]["spec"]
    return spec


def _problem_from(kind: CustomKind, detail: ErrorDetails) -> Problem:
    path = format_path(detail["loc"])
    return Problem(path, _message(kind, detail, path))


def _message(kind: CustomKind, detail: ErrorDetails, path: str) -> str:
    error = detail["type"]
    ctx = detail.get("ctx", {})
    got = f" (got {_short(detail.get('input'))})"
    if error in _BOUND_WORDS:
        word, key = _BOUND_WORDS[error]
        return f"must be {word} {ctx.get(key)}{got}"
    if error in _TYPE_WORDS:
        return f"expected {_TYPE_WORDS[error]}{got}"
    if error in ("too_short", "too_long"):
        return _length_message(error, ctx, detail.get("input"))
    if error == "literal_error":
        expected = _FIXED_VALUES.get(path, f"one of {ctx.get('expected', '')}")
        return f"must be {expected}{got}"
    if error in _FIXED_MESSAGES:
        return _FIXED_MESSAGES[error].replace("<kind>", kind.kind)
    return f"{detail['msg'].removeprefix('Value error, ')}{got}"


_FIXED_VALUES = {"apiVersion": API_VERSION, "kind": " or ".join(k.kind for k in KINDS)}
_FIXED_MESSAGES = {
    "missing": "required field is missing",
    "extra_forbidden": "unknown field: not part of the <kind> API; check spelling",
}
_BOUND_WORDS = {
    "greater_than_equal": ("at least", "ge"),
    "greater_than": ("greater than", "gt"),
    "less_than_equal": ("at most", "le"),
    "less_than": ("less than", "lt"),
}
_TYPE_WORDS = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "string_type": "a string",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "model_type": "an object (a mapping of fields)",
    "model_attributes_type": "an object (a mapping of fields)",
    "dict_type": "an object (a mapping of fields)",
    "list_type": "a list",
}


def _length_message(kind: str, ctx: dict[str, Any], given: Any) -> str:
    if isinstance(given, list):
        if kind == "too_short":
            return f"needs at least {ctx.get('min_length')} item(s), got {len(given)}"
        return f"takes at most {ctx.get('max_length')} items, got {len(given)}"
    if kind == "too_short":
        return f"must not be empty (at least {ctx.get('min_length')} character(s))"
    return f"must be at most {ctx.get('max_length')} characters"


def format_path(loc: tuple[int | str, ...]) -> str:
    """A pydantic location as a Kubernetes field path: ``spec.steps[1].weight``."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif not part or not _PLAIN_KEY.match(str(part)):
            path += f"[{json.dumps(str(part))}]"  # a key no field is named so: ``[""]``
        else:
            path = f"{path}.{part}" if path else str(part)
    return path


_PLAIN_KEY = re.compile(r"^[^.\[\]\s\"]+$")


def _short(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _kind_of(value: Any) -> str:
    return {list: "a list", str: "a string", int: "a number", float: "a number"}.get(
        type(value), type(value).__name__
    )


def _unique(problems: list[Problem]) -> list[Problem]:
    return list(dict.fromkeys(problems))
