"""The API reference (docs/api.md, docs/api-training.md), rendered from the same schema as
the CRDs.

``python -m acceltrial.api.reference [KIND]`` prints one kind's (AcceleratorTrial by default);
``make verify-api-docs`` fails when a committed copy differs, so the docs cannot drift from the
models.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from acceltrial.api.base import CEL_RULES_KEY
from acceltrial.api.crd import open_api_schema
from acceltrial.api.kinds import ACCELERATOR_TRIAL, KINDS_BY_NAME, CustomKind
from acceltrial.api.trial import API_VERSION

Schema = dict[str, Any]


def render_reference(kind: CustomKind = ACCELERATOR_TRIAL) -> str:
    """``kind``'s whole reference as Markdown."""
    root = open_api_schema(kind)["properties"]
    lines = [
        f"# {kind.kind} API reference ({API_VERSION})",
        "",
        "Generated from `operator/acceltrial/api` by `make api-docs`; do not edit by hand.",
        "Durations are strings such as `30s`, `10m`, `1h30m`. Rules are the CEL",
        "`x-kubernetes-validations` the API server and `acceltrial validate` both enforce.",
        "",
    ]
    for top in ("spec", "status"):
        lines += _object_section(top, root[top])
    return "\n".join(lines).rstrip() + "\n"


def _object_section(path: str, schema: Schema) -> list[str]:
    lines = [f"## `{path}`", "", schema.get("description", ""), ""]
    rules = list(schema.get(CEL_RULES_KEY, []))
    properties = schema.get("properties", {})
    if properties:
        lines += ["| field | type | default | description |", "|---|---|---|---|"]
        required = set(schema.get("required", []))
        for name, sub in properties.items():
            lines.append(_row(name, sub, name in required))
        lines.append("")
    for name, sub in properties.items():
        if not sub.get("properties"):  # an object child lists its own rules in its section
            rules += [{**r, "field": name} for r in sub.get(CEL_RULES_KEY, [])]
    if rules:
        lines += ["Rules:", ""]
        lines += [f"- {_rule_text(rule)}" for rule in rules]
        lines.append("")
    for name, sub in properties.items():
        child, child_path = _element(sub), f"{path}.{name}" + ("[]" if _is_list(sub) else "")
        if child.get("properties"):
            lines += _object_section(child_path, child)
    return lines


def _row(name: str, schema: Schema, required: bool) -> str:
    default = json.dumps(schema["default"]) if "default" in schema else ""
    description = schema.get("description", "").replace("|", "\\|")
    marker = " (required)" if required else ""
    return f"| `{name}`{marker} | {_type_text(schema)} | {default} | {description} |"


def _type_text(schema: Schema) -> str:
    if _is_list(schema):
        return f"list of {_type_text(schema['items'])}"
    kind = str(schema.get("type", "any"))
    if "enum" in schema:
        return " \\| ".join(f"`{v}`" for v in schema["enum"])
    bounds = [f"≥ {schema['minimum']}"] if "minimum" in schema else []
    bounds += [f"≤ {schema['maximum']}"] if "maximum" in schema else []
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        kind = "object (free-form)"
    return f"{kind} ({', '.join(bounds)})" if bounds else kind


def _rule_text(rule: dict[str, str]) -> str:
    where = f"`{rule['field']}`: " if "field" in rule else ""
    return f"{where}{rule['message']}"


def _is_list(schema: Schema) -> bool:
    return schema.get("type") == "array"


def _element(schema: Schema) -> Schema:
    items: Schema = schema.get("items", {})
    return items if _is_list(schema) else schema


if __name__ == "__main__":
    sys.stdout.write(
        render_reference(
            KINDS_BY_NAME[sys.argv[1] if len(sys.argv) > 1 else ACCELERATOR_TRIAL.kind]
        )
    )
