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
    version = crd_manifest()["spec"]["versions"][0]
    result: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return result


def test_crds_directory_matches_the_models_byte_for_byte() -> None:
    assert (REPO / "crds" / CRD_FILENAME).read_text(encoding="utf-8") == render_crd()


def test_chart_carries_the_same_crd() -> None:
    chart_copy = REPO / "charts" / "acceltrial" / "files" / "crds" / CRD_FILENAME
    assert chart_copy.read_text(encoding="utf-8") == render_crd()


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


def test_schema_is_structural(schema: dict[str, Any]) -> None:
    for path, node in walk(schema):
        assert FORBIDDEN_IN_STRUCTURAL.isdisjoint(node), f"{path} has {set(node)}"
        assert "type" in node, f"{path} has no type"
        if node["type"] == "object" and "properties" in node:
            assert "additionalProperties" not in node, f"{path} mixes properties and additional"
        if "default" in node:
            assert None not in _leaves(node["default"]), f"{path} default holds null"


def test_every_cel_rule_compiles_and_has_a_message(schema: dict[str, Any]) -> None:
    environment = celpy.Environment()
    rules = [
        (path, rule)
        for path, node in walk(schema)
        for rule in node.get("x-kubernetes-validations", [])
    ]
    assert len(rules) >= 10
    for path, rule in rules:
        environment.compile(rule["rule"])
        assert rule["message"], f"{path}: rule without message"


def test_generated_yaml_has_no_aliases() -> None:
    text = render_crd()
    assert "&id" not in text
    assert yaml.safe_load(text) == crd_manifest()


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
