"""Shared building blocks of the API models: the base model, CEL rule helpers, constrained strings.

Every model forbids unknown fields (the API server does the same with strict field validation, which
kubectl uses by default), uses camelCase names on the wire and takes its field docs from attribute
docstrings, so the CRD and the API reference say exactly what the code says.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError, core_schema

CEL_RULES_KEY = "x-kubernetes-validations"


class ApiModel(BaseModel):
    """Base of every AcceleratorTrial model."""

    model_config = ConfigDict(
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        use_attribute_docstrings=True,
        frozen=True,
    )


def cel(rule: str, message: str, field_path: str | None = None) -> dict[str, str]:
    """One ``x-kubernetes-validations`` entry: a CEL rule over ``self`` and its message."""
    entry = {"rule": rule, "message": message}
    if field_path is not None:
        entry["fieldPath"] = field_path
    return entry


def cel_rules(*rules: dict[str, str]) -> dict[str, Any]:
    """The ``json_schema_extra`` that attaches CEL rules to a model or a field."""
    return {CEL_RULES_KEY: list(rules)}


@dataclass(frozen=True)
class Pattern:
    """Metadata for ``Annotated[str, Pattern(...)]``: a regex with a hint people can read.

    A mismatch says "expected <hint>" instead of showing the regex; the JSON schema (and so the
    CRD) carries the regex itself.
    """

    regex: str
    hint: str
    max_length: int

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(self._check, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> dict[str, Any]:
        return {"type": "string", "pattern": self.regex, "maxLength": self.max_length}

    def _check(self, text: str) -> str:
        if len(text) > self.max_length:
            raise PydanticCustomError(
                "string_too_long", f"must be at most {self.max_length} characters"
            )
        if not re.match(self.regex, text):
            raise PydanticCustomError("string_pattern_mismatch", f"expected {self.hint}")
        return text


DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"

ObjectName = Annotated[
    str,
    Pattern(
        DNS_SUBDOMAIN_PATTERN,
        "a Kubernetes object name: lower-case letters, digits, '-' and '.', "
        "starting and ending with a letter or digit",
        253,
    ),
]
DnsLabel = Annotated[
    str,
    Pattern(
        DNS_LABEL_PATTERN,
        "a DNS label: lower-case letters, digits and '-', starting and ending with a letter or "
        "digit",
        63,
    ),
]
