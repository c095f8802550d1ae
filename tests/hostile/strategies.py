"""Hostile trial manifests for property-based tests: valid ones drawn from the CRD's own
OpenAPI schema, and mutations that break them the ways people and tools do.

The schema is read from crds/ (what the API server enforces) and walked by :func:`from_schema`,
which covers the structural OpenAPI subset a CRD uses (types, enum, pattern, lengths, bounds with
OpenAPI's boolean ``exclusiveMinimum``, required and optional properties, date-time). The
``x-kubernetes-*`` CEL rules are left to the code under test to judge. Generated objects carry
no unknown keys (the API server prunes them, and acceltrial validate names them); free-form
objects (``x-kubernetes-preserve-unknown-fields``) get a few small keys. hypothesis-jsonschema
would do this from JSON Schema, but its 0.23.1 release does not run with the hypothesis the
project pins (it reaches into hypothesis internals that changed).

The ``ci`` settings profile is derandomized (a fixed seed) with a bounded number of examples;
``ACCELTRIAL_FUZZ_EXAMPLES`` raises it for a longer run. ``TRIED`` counts the manifests each
property tried, for the summary line pytest prints at the end.
"""

from __future__ import annotations

import copy
import math
import os
from collections import Counter
from datetime import UTC
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from acceltrial.api.validation import load_documents
from tests.conftest import EXAMPLES, REPO

CRD = REPO / "crds" / "acceltrial.dev_acceleratortrials.yaml"
TRAINING_CRD = REPO / "crds" / "acceltrial.dev_trainingtrials.yaml"
EXAMPLES_PER_PROPERTY = int(os.environ.get("ACCELTRIAL_FUZZ_EXAMPLES", "40"))
TRIED: Counter[str] = Counter()
"""Manifests tried per property (``validate``, ``cli``, ``admission``, ``handlers``)."""

settings.register_profile(
    "ci",
    derandomize=True,
    database=None,
    max_examples=EXAMPLES_PER_PROPERTY,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
        HealthCheck.filter_too_much,
    ],
)
FUZZ = settings.get_profile("ci")


def crd_schema(path: Path = CRD) -> dict[str, Any]:
    crd = yaml.safe_load(path.read_text(encoding="utf-8"))
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def from_schema(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values a structural OpenAPI v3 schema (as in a CRD) accepts."""
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    build = {
        "object": _objects,
        "array": _arrays,
        "string": _strings,
        "integer": _integers,
        "number": _floats,
        "boolean": lambda _: st.booleans(),
    }.get(schema.get("type", ""))
    return build(schema) if build else st.none() | st.integers() | st.text(max_size=10)


def _arrays(schema: dict[str, Any]) -> st.SearchStrategy[list[Any]]:
    most = min(schema.get("maxItems", 4), 4)
    return st.lists(from_schema(schema.get("items", {})), min_size=schema.get("minItems", 0),
                    max_size=most)  # fmt: skip


def _objects(schema: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    properties = schema.get("properties") or {}
    if not properties and schema.get("x-kubernetes-preserve-unknown-fields"):
        keys = st.from_regex(r"\A[a-z]{1,8}\Z")
        return st.dictionaries(keys, st.integers() | st.text(max_size=8), max_size=3)
    required = set(schema.get("required") or [])
    return st.fixed_dictionaries(
        {name: from_schema(sub) for name, sub in properties.items() if name in required},
        optional={name: from_schema(sub) for name, sub in properties.items()
                  if name not in required},
    )  # fmt: skip


def _strings(schema: dict[str, Any]) -> st.SearchStrategy[str]:
    low, high = schema.get("minLength", 0), schema.get("maxLength", 40)
    if schema.get("format") == "date-time":
        return st.datetimes(timezones=st.just(UTC)).map(lambda t: t.strftime("%Y-%m-%dT%H:%M:%SZ"))
    if "pattern" in schema:
        pattern = schema["pattern"]
        return st.from_regex(pattern, fullmatch=True).filter(lambda s: low <= len(s) <= high)
    return st.text(min_size=low, max_size=min(high, 40))


def _integers(schema: dict[str, Any]) -> st.SearchStrategy[int]:
    low, high = schema.get("minimum", -(10**6)), schema.get("maximum", 10**6)
    low = math.floor(low) + (1 if schema.get("exclusiveMinimum") else 0)
    high = math.ceil(high) - (1 if schema.get("exclusiveMaximum") else 0)
    return st.integers(min_value=low, max_value=high)


def _floats(schema: dict[str, Any]) -> st.SearchStrategy[float]:
    return st.floats(
        min_value=schema.get("minimum"), max_value=schema.get("maximum", 1e9),
        exclude_min=bool(schema.get("exclusiveMinimum")),
        exclude_max=bool(schema.get("exclusiveMaximum")),
        allow_nan=False, allow_infinity=False,
    )  # fmt: skip


@cache
def spec_schema() -> dict[str, Any]:
    spec: dict[str, Any] = crd_schema()["properties"]["spec"]
    return spec


NAMES = st.one_of(
    st.from_regex(r"\A[a-z]([-a-z0-9]{0,30}[a-z0-9])?\Z"),
    st.integers(min_value=50, max_value=70).map(lambda n: "t" * n),  # about the 53 limit
    st.text(min_size=1, max_size=20),  # anything: capitals, spaces, unicode
)


@st.composite
def schema_manifests(draw: st.DrawFn) -> dict[str, Any]:
    """A whole AcceleratorTrial whose spec the CRD's schema accepts (CEL rules aside)."""
    spec = draw(from_schema(spec_schema()))
    return {
        "apiVersion": "acceltrial.dev/v1alpha1",
        "kind": "AcceleratorTrial",
        "metadata": {"name": draw(NAMES)},
        "spec": spec,
    }


def example_manifest() -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load(
        (EXAMPLES / "llama3-8b-inf2-httproute.yaml").read_text(encoding="utf-8")
    )
    del body["metadata"]["namespace"]  # sent to whichever namespace a test uses
    return body


QUALITY = {
    "prompts": {"configMapRef": {"name": "llama3-quality-prompts", "key": "prompts.jsonl"}},
    "maxTokens": 64,
    "everyStep": True,
    "concurrency": 8,
    "maxUnanswered": 0.05,
    "model": "llama3",
    "criteria": [
        {"name": "token-agreement", "metric": "token_agreement", "absolute": {"min": 0.98}},
        {"name": "logprob-divergence", "metric": "logprob_divergence", "absolute": {"max": 0.1}},
        {"name": "task-checks", "metric": "expected_match", "relative": {"min": 0.95}},
    ],
}
"""docs/quality.md's spec.quality, every field set, for the mutations to break."""


def quality_manifest() -> dict[str, Any]:
    """The shipped example with spec.quality (docs/quality.md)."""
    body = example_manifest()
    body["spec"]["quality"] = copy.deepcopy(QUALITY)
    return body


def paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into a JSON-shaped value (keys and list indexes), the root included."""
    found = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            found += paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += paths(value, (*prefix, index))
    return found


JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),
    st.sampled_from(["", "5%", "1e3", "-1", "10 m", "{{pods}", "{{secret}}", "null", "∞"]),
    st.just("x" * 5000),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=8), st.integers(), max_size=3),
    st.just([[[[[[[[[[[]]]]]]]]]]]),
)


@st.composite
def mutated_manifests(draw: st.DrawFn, base: st.SearchStrategy[dict[str, Any]]) -> dict[str, Any]:
    """``base`` broken in one to three places: a key removed, a value of the wrong type or
    shape, an unknown field added, a list emptied or a string made huge."""
    body = copy.deepcopy(draw(base))
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        where = draw(st.sampled_from(paths(body)))
        kind = draw(st.sampled_from(["remove", "replace", "unknown", "empty"]))
        body = _mutate(body, where, kind, draw(JUNK))
    return body


def _mutate(body: Any, where: tuple[Any, ...], kind: str, junk: Any) -> Any:
    # A copy: st.just gives the same object each time, and a later mutation inside an earlier
    # one's junk would otherwise put the object inside itself (a document YAML cannot hold).
    junk = copy.deepcopy(junk)
    if not where:
        return junk if kind == "replace" else body
    parent = body
    for step in where[:-1]:
        parent = parent[step]
    last = where[-1]
    if kind == "remove":
        del parent[last]
    elif kind == "replace":
        parent[last] = junk
    elif kind == "unknown" and isinstance(parent[last], dict):
        parent[last]["unexpectedField"] = junk
    elif kind == "empty" and isinstance(parent[last], (dict, list, str)):
        parent[last] = type(parent[last])()
    return body


@cache
def training_spec_schema() -> dict[str, Any]:
    spec: dict[str, Any] = crd_schema(TRAINING_CRD)["properties"]["spec"]
    return spec


@st.composite
def training_schema_manifests(draw: st.DrawFn) -> dict[str, Any]:
    """A whole TrainingTrial whose spec the CRD's schema accepts (CEL rules aside)."""
    return {
        "apiVersion": "acceltrial.dev/v1alpha1",
        "kind": "TrainingTrial",
        "metadata": {"name": draw(NAMES)},
        "spec": draw(from_schema(training_spec_schema())),
    }


def training_example_manifest() -> dict[str, Any]:
    """The shipped TrainingTrial example (examples/llama-trn1-training.yaml)."""
    (document,) = load_documents(
        (EXAMPLES / "llama-trn1-training.yaml").read_text(encoding="utf-8")
    )
    body: dict[str, Any] = document.body
    del body["metadata"]["namespace"]
    return body


def hostile_training_manifests() -> st.SearchStrategy[dict[str, Any]]:
    """Schema-valid TrainingTrials, the shipped example, and both of them broken."""
    return st.one_of(
        training_schema_manifests(),
        mutated_manifests(st.builds(training_example_manifest)),
        mutated_manifests(training_schema_manifests()),
    )


def hostile_manifests() -> st.SearchStrategy[dict[str, Any]]:
    """Schema-valid manifests, the shipped example, and both of them broken."""
    example = st.one_of(st.builds(example_manifest), st.builds(quality_manifest))
    return st.one_of(
        schema_manifests(),
        mutated_manifests(example),
        mutated_manifests(schema_manifests()),
    )
