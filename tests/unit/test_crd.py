"""The CRD is generated from the models, structural, and what crds/ and the chart hold."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import celpy
import pytest
import yaml
from pydantic import ValidationError

from acceltrial.api.cel import check_rules
from acceltrial.api.crd import CRD_FILENAME, crd_manifest, render_crd
from acceltrial.api.kinds import ACCELERATOR_TRIAL, KINDS, TRAINING_TRIAL, CustomKind
from acceltrial.api.status import GatewayApiOriginal, ReplicasOriginal, original_routing

REPO = Path(__file__).resolve().parents[2]
FORBIDDEN_IN_STRUCTURAL = {"$ref", "anyOf", "allOf", "oneOf", "title", "$defs", "nullable"}


def walk(node: dict[str, Any], path: str = "") -> list[tuple[str, dict[str, Any]]]:
    nodes = [(path, node)]
    for name, sub in node.get("properties", {}).items():
        nodes += walk(sub, f"{path}.{name}")
    if "items" in node:
        nodes += walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        nodes += walk(node["additionalProperties"], f"{path}{{}}")
    return nodes


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    """The AcceleratorTrial CRD's schema."""
    version = crd_manifest()["spec"]["versions"][0]
    result: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return result


@pytest.fixture(scope="module", params=KINDS, ids=[k.kind for k in KINDS])
def each_schema(request: pytest.FixtureRequest) -> dict[str, Any]:
    """Each kind's CRD schema in turn."""
    version = crd_manifest(request.param)["spec"]["versions"][0]
    result: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return result


@pytest.mark.parametrize("kind", KINDS, ids=[k.kind for k in KINDS])
def test_crds_directory_matches_the_models_byte_for_byte(kind: CustomKind) -> None:
    assert (REPO / "crds" / kind.filename).read_text(encoding="utf-8") == render_crd(kind)
    assert ACCELERATOR_TRIAL.filename == CRD_FILENAME


@pytest.mark.parametrize("kind", KINDS, ids=[k.kind for k in KINDS])
def test_chart_carries_the_same_crd(kind: CustomKind) -> None:
    chart_copy = REPO / "charts" / "acceltrial" / "files" / "crds" / kind.filename
    assert chart_copy.read_text(encoding="utf-8") == render_crd(kind)


def test_identity_and_subresources() -> None:
    crd = crd_manifest()
    assert crd["metadata"]["name"] == "acceleratortrials.acceltrial.dev"
    names = crd["spec"]["names"]
    assert (names["kind"], names["plural"]) == ("AcceleratorTrial", "acceleratortrials")
    assert names["shortNames"] == ["acceltrial", "at"]
    (version,) = crd["spec"]["versions"]
    assert version["name"] == "v1alpha1"
    assert version["subresources"] == {"status": {}}
    columns = [c["name"] for c in version["additionalPrinterColumns"]]
    assert columns[:5] == ["Phase", "Step", "Weight", "Verdict", "Age"]


def test_training_trials_show_phase_both_throughputs_and_the_verdict() -> None:
    crd = crd_manifest(TRAINING_TRIAL)
    assert crd["metadata"]["name"] == "trainingtrials.acceltrial.dev"
    assert crd["spec"]["names"]["kind"] == "TrainingTrial"
    (version,) = crd["spec"]["versions"]
    paths = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert paths["Phase"] == ".status.phase"
    assert paths["Baseline-Tok/s"] == ".status.runs.baseline.tokensPerSecond.mean"
    assert paths["Candidate-Tok/s"] == ".status.runs.candidate.tokensPerSecond.mean"
    assert paths["Verdict"] == ".status.decision.verdict"
    status = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    assert status["phase"]["enum"][-3:] == ["Recommended", "NotRecommended", "Failed"]
    rate = status["runs"]["properties"]["baseline"]["properties"]["tokensPerSecond"]
    assert "mean" in rate["properties"]
    economics = status["economics"]["properties"]["candidate"]["properties"]
    assert {"costPerHour", "hoursPerRun", "costPerRun"} <= set(economics)


def test_schema_is_structural(each_schema: dict[str, Any]) -> None:
    for path, node in walk(each_schema):
        assert FORBIDDEN_IN_STRUCTURAL.isdisjoint(node), f"{path} has {set(node)}"
        assert "type" in node, f"{path} has no type"
        if node["type"] == "object" and "properties" in node:
            assert "additionalProperties" not in node, f"{path} mixes properties and additional"
        if "default" in node:
            assert None not in _leaves(node["default"]), f"{path} default holds null"


def test_every_cel_rule_compiles_and_has_a_message(each_schema: dict[str, Any]) -> None:
    environment = celpy.Environment()
    rules = [
        (path, rule)
        for path, node in walk(each_schema)
        for rule in node.get("x-kubernetes-validations", [])
    ]
    assert len(rules) >= 10
    for path, rule in rules:
        environment.compile(rule["rule"])
        assert rule["message"], f"{path}: rule without message"


@pytest.mark.parametrize("kind", KINDS, ids=[k.kind for k in KINDS])
def test_generated_yaml_has_no_aliases(kind: CustomKind) -> None:
    text = render_crd(kind)
    assert "&id" not in text
    assert yaml.safe_load(text) == crd_manifest(kind)


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _leaves(v)]
    if isinstance(value, list):
        return [leaf for v in value for leaf in _leaves(v)]
    return [value]


def test_the_recorded_routing_is_one_object_with_a_member_per_router(
    schema: dict[str, Any],
) -> None:
    """status.original is a union in the models (one member per router); the CRD, which cannot
    say oneOf, lists every member's fields and requires each member's own with a rule."""
    original = schema["properties"]["status"]["properties"]["original"]
    assert original["properties"]["router"]["enum"] == ["gatewayapi", "replicas"]
    assert original["required"] == ["router"]
    assert {"httpRoute", "baselineReplicas", "hpa"} <= set(original["properties"])
    route = {"name": "llama3", "namespace": "ml", "ruleIndex": 0, "backendRefs": []}
    refused = check_rules(original, {"router": "gatewayapi", "baselineReplicas": 2})
    assert [v.message for v in refused] == [
        "routing recorded by the gatewayapi router has httpRoute"
    ]
    assert check_rules(original, {"router": "gatewayapi", "httpRoute": route}) == []
    assert check_rules(original, {"router": "replicas", "baselineReplicas": 2}) == []


def test_a_recorded_routing_is_read_as_its_routers_member() -> None:
    route = {"name": "llama3", "namespace": "ml", "ruleIndex": 0, "backendRefs": []}
    stored = {"router": "gatewayapi", "httpRoute": route, "baselineReplicas": 2}
    assert isinstance(original_routing(stored), GatewayApiOriginal)
    replicas = original_routing({"router": "replicas", "baselineReplicas": 3})
    assert replicas == ReplicasOriginal(router="replicas", baseline_replicas=3)
    with pytest.raises(ValidationError, match="httpRoute"):
        original_routing({"router": "gatewayapi"})
    with pytest.raises(ValidationError, match="router"):
        original_routing({"router": "istio", "baselineReplicas": 1})
