"""Scenario keys ``route`` and ``referenceGrant``: the route as found is installed where the
scenario puts it, and a mistake is named by its field with the fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from acceltrial_testbed.demo.cluster import baseline_objects
from acceltrial_testbed.demo.scenario import ScenarioError, load_scenario
from tests.conftest import REPO

SCENARIOS = REPO / "examples" / "scenarios"
SHARED = SCENARIOS / "shared-gateway.yaml"


def variant(tmp_path: Path, **changes: Any) -> Path:
    """shared-gateway.yaml with top-level keys replaced (None removes one)."""
    (tmp_path / "trial.yaml").write_text((SCENARIOS / "trial.yaml").read_text())
    body = yaml.safe_load(SHARED.read_text())
    for key, value in changes.items():
        if value is None:
            body.pop(key, None)
        else:
            body[key] = value
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(body))
    return path


def test_the_route_is_installed_as_described_with_its_grant() -> None:
    scenario, trial = load_scenario(SHARED)
    assert trial["spec"]["traffic"]["gatewayapi"]["httpRouteRef"] == {
        "name": "llama3",
        "namespace": "gateways",
    }
    objects = baseline_objects(trial, scenario.baseline, scenario.route, scenario.reference_grant)
    kinds = {(body["kind"], body["metadata"].get("namespace")) for _, body in objects}
    assert ("HTTPRoute", "gateways") in kinds
    assert ("HTTPRoute", "demo") not in kinds
    assert ("ReferenceGrant", "demo") in kinds
    route = next(body for _, body in objects if body["kind"] == "HTTPRoute")
    assert [r.get("name") for r in route["spec"]["rules"]] == ["chat", "completions"]
    chat = route["spec"]["rules"][0]["backendRefs"][0]
    assert chat["namespace"] == "demo"
    assert chat["filters"][0]["type"] == "RequestHeaderModifier"


def test_reference_grant_false_installs_none(tmp_path: Path) -> None:
    scenario, trial = load_scenario(variant(tmp_path, referenceGrant=False))
    objects = baseline_objects(trial, scenario.baseline, scenario.route, scenario.reference_grant)
    assert "ReferenceGrant" not in {body["kind"] for _, body in objects}


def test_other_backends_are_installed_in_front_of_the_baselines_pods(tmp_path: Path) -> None:
    refs = [{"name": name, "namespace": "demo", "port": 8000}
            for name in ("llama3-8b-gpu", "llama3-legacy")]  # fmt: skip
    rules = [{"backendRefs": refs}]
    scenario, trial = load_scenario(
        variant(tmp_path, route={"namespace": "gateways", "rules": rules})
    )
    objects = baseline_objects(trial, scenario.baseline, scenario.route, scenario.reference_grant)
    legacy = next(body for _, body in objects if body["metadata"]["name"] == "llama3-legacy")
    assert legacy["spec"]["selector"] == {"app": "llama3-8b-gpu"}


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"route": {"namespace": "gateways",
                    "rules": [{"backendRefs": [{"name": "llama3-8b-gpu", "port": 8000}]}]}},
         "route.rules: no backendRef to the baseline Service llama3-8b-gpu in demo; add "
         "{name: llama3-8b-gpu, port: 8000, namespace: demo}"),
        ({"route": {"rules": [{"backendRefs": [{"name": "llama3-8b-gpu"}]}]}},
         "referenceGrant: only a route in another namespace than the trial needs one"),
        ({"route": {"rules": []}}, "route.rules: List should have at least 1 item"),
        ({"route": {"rules": [{"backendRefs": [{"name": "x"}], "nmae": "typo"}]}},
         "route.rules.0.nmae: Extra inputs are not permitted"),
    ],
)  # fmt: skip
def test_a_mistake_names_the_field_and_the_fix(
    tmp_path: Path, changes: dict[str, Any], message: str
) -> None:
    with pytest.raises(ScenarioError) as raised:
        load_scenario(variant(tmp_path, **changes))
    assert message in str(raised.value)
