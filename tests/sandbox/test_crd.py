"""Contract: CRDs register their kind and validate custom objects like the real API server."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from acceltrial.api.validation import load_documents, validate_trial
from tests.sandbox.conftest import (
    CRDS,
    REPO,
    TRAINING_TRIALS,
    TRIALS,
    Api,
    eventually,
    example,
    served,
)


def test_creating_a_crd_registers_the_kind_in_discovery(with_crd: Api) -> None:
    """CRD docs ("Create a CustomResourceDefinition"): once created, the new RESTful path
    /apis/<group>/<version>/.../<plural> is served and listed in discovery; the CRD's status
    reports Established."""
    groups = with_crd.get("/apis").body["groups"]
    resources = with_crd.get("/apis/acceltrial.dev/v1alpha1").body["resources"]
    crd = with_crd.get(f"{CRDS}/acceleratortrials.acceltrial.dev").body

    assert "acceltrial.dev" in [group["name"] for group in groups]
    trial = next(r for r in resources if r["name"] == "acceleratortrials")
    assert (trial["kind"], trial["shortNames"]) == ("AcceleratorTrial", ["acceltrial", "at"])
    assert "acceleratortrials/status" in [r["name"] for r in resources]
    established = [c for c in crd["status"]["conditions"] if c["type"] == "Established"]
    assert established[0]["status"] == "True"
    assert with_crd.get(TRIALS).status == 200


def test_deleting_the_crd_removes_the_kind_and_its_objects(with_crd: Api) -> None:
    """Deleting a CRD deletes its custom objects and stops serving the path (the real server
    does it in the background, behind the CRD's customresourcecleanup finalizer)."""
    with_crd.post(TRIALS, example())

    with_crd.delete(f"{CRDS}/acceleratortrials.acceltrial.dev")

    eventually(lambda: with_crd.get(TRIALS).status == 404)
    assert with_crd.get("/apis/acceltrial.dev/v1alpha1").status == 404


def test_a_valid_trial_is_stored_with_schema_defaults(with_crd: Api) -> None:
    """CRD docs, "Defaulting": defaults in the structural schema are applied on create (and
    on update, and on read of old objects)."""
    reply = with_crd.post(TRIALS, example())

    assert reply.status == 201, reply.body
    spec = reply.body["spec"]
    assert spec["analysis"]["consecutiveErrorLimit"] == 4
    assert spec["analysis"]["criteria"][0]["fromWeight"] == 0


def test_a_null_where_a_default_exists_gets_the_default(with_crd: Api) -> None:
    """CRD docs, "Defaulting and Nullable": a null for a field that is not nullable is pruned
    before defaulting, so the default applies (found by the hostile-input fuzzing: the emulator
    answered "Required value" where the real server defaults)."""
    reply = with_crd.post(TRIALS, mutate(["spec", "analysis", "preset"], None))

    assert reply.status == 201, reply.body
    assert reply.body["spec"]["analysis"]["preset"] == "vllm"


def mutate(path: list[str | int], value: Any) -> dict[str, Any]:
    body = copy.deepcopy(example())
    node: Any = body
    for part in path[:-1]:
        node = node[part]
    if value is _DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return body


_DELETE = object()


@pytest.mark.parametrize(
    ("path", "value", "field", "message"),
    [
        (["spec", "steps", 0, "weight"], 150, "spec.steps[0].weight",
         "Invalid value: 150: spec.steps[0].weight in body should be less than or equal to 100"),
        (["spec", "candidate", "replicas"], "two", "spec.candidate.replicas",
         'Invalid value: "string": spec.candidate.replicas in body must be of type integer'),
        (["spec", "traffic", "router"], "istio", "spec.traffic.router",
         'Unsupported value: "istio": supported values: "gatewayapi", "replicas"'),
        (["spec", "baseline"], _DELETE, "spec.baseline", "Required value"),
        (["spec", "steps"], [], "spec.steps", "should have at least 1 items"),
        (["spec", "steps", 1, "weight"], 5, "spec.steps",
         "step weights must increase strictly from one step to the next"),
        (["spec", "quality"], {
            "prompts": {"configMapRef": {"name": "prompts", "key": "set.jsonl"}},
            "criteria": [{"name": "a", "metric": "token_agreement", "relative": {"min": 0.9}}],
         }, "spec.quality.criteria[0]", "relative limits apply to expected_match only"),
    ],
)  # fmt: skip
def test_invalid_trials_answer_422_with_the_field_path(
    with_crd: Api, path: list[str | int], value: Any, field: str, message: str
) -> None:
    """CRD docs, "Validation": objects are validated against the openAPIV3Schema (types, enum,
    minimum/maximum, minItems, required) and the x-kubernetes-validations CEL rules; a
    violation answers 422 Invalid with a Status whose causes name each field."""
    reply = with_crd.post(TRIALS, mutate(path, value))

    assert reply.status == 422
    assert reply.body["reason"] == "Invalid"
    causes = reply.body["details"]["causes"]
    assert causes[0]["field"] == field
    assert message in causes[0]["message"]
    assert reply.body["message"].startswith('AcceleratorTrial.acceltrial.dev "trial" is invalid')


def test_a_name_too_long_for_the_candidates_service_is_refused(with_crd: Api) -> None:
    """The CRD's root rule on metadata.name (CEL at the root may read metadata.name): a trial
    whose <name>-candidate Service could not exist is refused at admission, not at runtime."""
    reply = with_crd.post(TRIALS, mutate(["metadata", "name"], "a" * 54))
    assert reply.status == 422
    (cause,) = reply.body["details"]["causes"]
    assert cause["field"] == "metadata.name"
    assert "at most 53 characters" in cause["message"]
    assert with_crd.post(TRIALS, mutate(["metadata", "name"], "a" * 53)).status == 201


@pytest.mark.parametrize("name", ["3llama", "llama.v2"])
def test_a_name_no_service_could_be_derived_from_is_refused(with_crd: Api, name: str) -> None:
    """A leading digit or a dot the API server takes for a resource's name, but not for the
    candidate's Service, so the CRD's root rule refuses them at admission, as ``acceltrial
    validate`` does."""
    refused_for_its_name(with_crd, name)


@pytest.mark.known_difference(
    "the emulator stops at the name's own format and does not evaluate the CRD's rules"
)
def test_an_upper_case_name_is_refused_by_both_checks(with_crd: Api) -> None:
    """Upper case the API server refuses itself (an RFC 1123 subdomain is lower-case), and it
    evaluates the CRD's root rule as well, which says what to do."""
    refused_for_its_name(with_crd, "Llama3-Inf2")


def refused_for_its_name(api: Api, name: str) -> None:
    reply = api.post(TRIALS, mutate(["metadata", "name"], name))
    assert reply.status == 422, reply.body
    causes = reply.body["details"]["causes"]
    assert {cause["field"] for cause in causes} == {"metadata.name"}
    assert any("a DNS label starting with a letter" in c["message"] for c in causes), causes


def test_updates_are_validated_too(with_crd: Api) -> None:
    """Validation runs on every write, so a patch making a valid object invalid answers 422
    and changes nothing."""
    with_crd.post(TRIALS, example())

    reply = with_crd.merge(f"{TRIALS}/trial", {"spec": {"candidate": {"replicas": -1}}})

    assert reply.status == 422
    assert with_crd.get(f"{TRIALS}/trial").body["spec"]["candidate"]["replicas"] == 2


def test_unknown_fields_are_refused_when_strict_and_pruned_otherwise(with_crd: Api) -> None:
    """Field validation (API concepts, "Field validation"): with fieldValidation=Strict
    (kubectl's default) unknown fields answer 400 BadRequest "strict decoding error"; with the
    server default they are pruned and reported in a Warning header."""
    body = mutate(["spec", "typo"], 1)

    strict = with_crd.post(TRIALS, body, fieldValidation="Strict")
    lenient = with_crd.post(TRIALS, body)

    assert strict.status == 400
    assert 'unknown field "spec.typo"' in strict.body["message"]
    assert lenient.status == 201
    assert "typo" not in lenient.body["spec"]
    assert lenient.headers["Warning"] == '299 - "unknown field \\"spec.typo\\""'


def test_status_is_validated_through_the_status_subresource(with_crd: Api) -> None:
    """The status subresource is validated against the status schema as well."""
    with_crd.post(TRIALS, example())

    bad = with_crd.merge(f"{TRIALS}/trial/status", {"status": {"phase": "Nonsense"}})
    good = with_crd.merge(f"{TRIALS}/trial/status", {"status": {"phase": "Progressing"}})

    assert bad.status == 422
    assert good.status == 200
    assert good.body["status"]["phase"] == "Progressing"


WIDGETS = "/apis/test.acceltrial.dev/v1/namespaces/default/widgets"
WIDGET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.test.acceltrial.dev"},
    "spec": {
        "group": "test.acceltrial.dev",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "required": ["size"],
                                "properties": {
                                    "size": {"type": "integer", "minimum": 1, "maximum": 10},
                                    "ratio": {"type": "number", "minimum": 0,
                                              "exclusiveMinimum": True},
                                    "name": {"type": "string", "pattern": "^[a-z]+$",
                                             "maxLength": 5},
                                    "tags": {"type": "array", "maxItems": 2,
                                             "items": {"type": "string"}},
                                    "port": {"x-kubernetes-int-or-string": True},
                                    "labels": {"type": "object",
                                               "additionalProperties": {"type": "string"}},
                                    "note": {"type": "string", "nullable": True},
                                    "free": {"type": "object",
                                             "x-kubernetes-preserve-unknown-fields": True},
                                    "mode": {"type": "string", "default": "fast"},
                                },
                            }
                        },
                    }
                },
            }
        ],
    },
}  # fmt: skip


@pytest.mark.parametrize(
    ("spec", "field", "message"),
    [
        ({"size": 0}, "spec.size", "should be greater than or equal to 1"),
        ({"size": 1, "ratio": 0}, "spec.ratio", "should be greater than 0"),
        ({"size": 1, "name": "ABC"}, "spec.name", "should match '^[a-z]+$'"),
        ({"size": 1, "name": "abcdef"}, "spec.name", "Too long: may not be more than 5 bytes"),
        ({"size": 1, "tags": ["a", "b", "c"]}, "spec.tags", "must have at most 2 items"),
        ({"size": 1, "tags": [1]}, "spec.tags[0]", "must be of type string"),
        (
            {"size": 1, "port": 1.5},
            "spec.port",
            'Invalid value: "number": spec.port in body must be of type integer,string: "number"',
        ),
        ({"size": 1, "labels": {"a": 1}}, "spec.labels.a", "must be of type string"),
        ({"size": True}, "spec.size", "must be of type integer"),
        ({}, "spec.size", "Required value"),
    ],
)
def test_structural_schema_constraints(
    api: Api, spec: dict[str, Any], field: str, message: str
) -> None:
    """CRD docs, "Validation": the OpenAPI v3 constraints of a structural schema (bounds,
    exclusive bounds, pattern, maxLength, maxItems, item and map value types,
    int-or-string, required) each answer 422 naming the field."""
    api.post(CRDS, WIDGET_CRD)
    served(api, WIDGET_CRD["metadata"]["name"], WIDGETS)

    reply = api.post(WIDGETS, {"apiVersion": "test.acceltrial.dev/v1", "kind": "Widget",
                               "metadata": {"name": "w"}, "spec": spec})  # fmt: skip

    assert reply.status == 422, reply.body
    [cause] = reply.body["details"]["causes"]
    assert cause["field"] == field
    assert message in cause["message"]


def test_valid_values_nullable_and_preserved_fields(api: Api) -> None:
    """Values within the schema are stored; ``nullable`` admits null; fields under
    x-kubernetes-preserve-unknown-fields are kept while unknown ones elsewhere are pruned;
    defaults fill missing fields."""
    api.post(CRDS, WIDGET_CRD)
    served(api, WIDGET_CRD["metadata"]["name"], WIDGETS)
    spec = {"size": 3, "ratio": 0.5, "name": "ab", "port": "http", "labels": {"a": "b"},
            "note": None, "free": {"any": {"thing": 1}}, "extra": 1}  # fmt: skip

    reply = api.post(WIDGETS, {"apiVersion": "test.acceltrial.dev/v1", "kind": "Widget",
                               "metadata": {"name": "w"}, "spec": spec})  # fmt: skip

    assert reply.status == 201, reply.body
    stored = reply.body["spec"]
    assert stored["free"] == {"any": {"thing": 1}}
    assert "extra" not in stored
    assert stored["mode"] == "fast"
    assert stored["note"] is None


TRAINING_INVALID = sorted(
    (REPO / "tests" / "manifests" / "invalid").glob("*-training-*.yaml"), key=lambda p: p.name
)


def test_a_training_trial_is_stored_with_its_defaults(with_training_crd: Api) -> None:
    """The TrainingTrial CRD serves its kind; the shipped example is admitted with the
    schema's defaults filled in, and its pod template kept whole (unknown fields preserved)."""
    body = training_example()
    reply = with_training_crd.post(TRAINING_TRIALS, body)
    assert reply.status == 201, reply.body
    spec = reply.body["spec"]
    assert spec["economics"]["pricing"] == "catalog"
    assert spec["run"]["logLines"] == 20
    assert spec["baseline"]["template"] == body["spec"]["baseline"]["template"]


def test_the_api_server_refuses_what_validate_refuses(with_training_crd: Api) -> None:
    """Each TrainingTrial mistake `acceltrial validate` reports (tests/manifests/invalid) is
    refused by the API server too, naming the same field: one set of rules, in the CRD. (One
    test for all of them: each test of a cluster costs a reset of the control plane.)"""
    assert len(TRAINING_INVALID) >= 9
    for path in TRAINING_INVALID:
        (document,) = load_documents(path.read_text(encoding="utf-8"))
        body = document.body
        body["metadata"].pop("namespace", None)  # sent to the tests' namespace
        expected = {p.path for p in validate_trial(body)}

        reply = with_training_crd.post(TRAINING_TRIALS, body)

        assert reply.status == 422, (path.name, reply.body)
        fields = {cause["field"] for cause in reply.body["details"]["causes"]}
        assert fields & expected, (path.name, fields, expected)
    assert with_training_crd.get(TRAINING_TRIALS).body["items"] == []


def training_example() -> dict[str, Any]:
    (document,) = load_documents((REPO / "examples" / "llama-trn1-training.yaml").read_text())
    body: dict[str, Any] = document.body
    body["metadata"] = {"name": "training"}
    return body
