"""The Argo CD health check and resource actions of AcceleratorTrial, run by a real Lua 5.1.

Argo CD runs these scripts in gopher-lua (Lua 5.1) with a global ``obj`` decoded from the
object's JSON and only the base, table, package and a safe os library open: no string library,
no string methods. The runtime below does the same with lupa's Lua 5.1, reads the test data in
Argo CD's own layout (health_test.yaml, actions/action_test.yaml) and compares what the scripts
return. The objects in testdata/ were recorded from real demo runs of every phase
(scripts/record_trial_phases.py).
"""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from lupa import lua51

CUSTOMIZATION = (
    Path(__file__).resolve().parents[2]
    / "integrations/argocd/resource_customizations/acceltrial.dev/AcceleratorTrial"
)
ACTIONS = CUSTOMIZATION / "actions"
HEALTH_TESTS = yaml.safe_load((CUSTOMIZATION / "health_test.yaml").read_text())["tests"]
ACTION_TESTS = yaml.safe_load((ACTIONS / "action_test.yaml").read_text())
PHASES_RECORDED = {
    "Pending", "Preflight", "Progressing", "Paused", "Promoting", "BakingIn", "Promoted",
    "RollingBack", "RolledBack", "Failed", "Aborted",
}  # fmt: skip
ARGO_HEALTH = {"Healthy", "Progressing", "Degraded", "Suspended", "Missing", "Unknown"}


def run_script(script: Path, obj: dict[str, Any]) -> Any:
    """Run ``script`` as Argo CD does; its return value as JSON-like Python data."""
    lua = lua51.LuaRuntime(register_eval=False, register_builtins=False)
    # Argo CD opens base, table, package and a safe os (time, date); nothing else, and strings
    # have no methods without the string library.
    lua.execute(
        "debug.setmetatable('', nil); string = nil; math = nil; io = nil; debug = nil; "
        "coroutine = nil; os = {time = os.time, date = os.date}"
    )
    lua.globals().obj = to_lua(lua, obj)
    returned = lua.execute(script.read_text())
    return from_lua(returned)


def to_lua(lua: Any, value: Any) -> Any:
    if isinstance(value, dict):
        table = lua.table()
        for key, item in value.items():
            if item is not None:
                table[key] = to_lua(lua, item)
        return table
    if isinstance(value, list):
        table = lua.table()
        for index, item in enumerate(value, start=1):
            table[index] = to_lua(lua, item)
        return table
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)  # Lua 5.1 and Argo CD's decoder have only float64 numbers
    return value


def from_lua(value: Any) -> Any:
    """Lua tables as gopher-json encodes them: 1..n keys make a list, any other keys a dict."""
    if lua51.lua_type(value) == "table":
        items = dict(value.items())
        if items and set(items) == set(range(1, len(items) + 1)):
            return [from_lua(items[i]) for i in range(1, len(items) + 1)]
        return {str(k): from_lua(v) for k, v in items.items()}
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def load(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(path.read_text())
    return loaded


def test_every_phase_and_pause_reason_is_recorded() -> None:
    objects = [load(CUSTOMIZATION / t["inputPath"]) for t in HEALTH_TESTS]
    phases = {(o.get("status") or {}).get("phase") for o in objects}
    assert phases - {None} == PHASES_RECORDED
    reasons = {o["status"].get("pauseReason") for o in objects if o.get("status")}
    assert reasons - {None} == {"User", "Inconclusive", "AwaitingApproval"}
    for test in HEALTH_TESTS:
        header = (CUSTOMIZATION / test["inputPath"]).read_text().splitlines()[0]
        assert header.startswith("# Recorded by scripts/record_trial_phases.py"), test


@pytest.mark.parametrize("test", HEALTH_TESTS, ids=lambda t: Path(t["inputPath"]).stem)
def test_health(test: dict[str, Any]) -> None:
    obj = load(CUSTOMIZATION / test["inputPath"])
    health = run_script(CUSTOMIZATION / "health.lua", obj)
    assert health == test["healthStatus"]
    assert health["status"] in ARGO_HEALTH
    assert Path(test["inputPath"]).stem.startswith(health["status"].lower() + "_")


def test_health_reads_the_generation_of_a_running_trial_only() -> None:
    promoted = load(CUSTOMIZATION / "testdata/healthy_promoted.yaml")
    promoted["metadata"]["generation"] += 1  # edited after the end: nothing will observe it
    assert run_script(CUSTOMIZATION / "health.lua", promoted)["status"] == "Healthy"
    running = load(CUSTOMIZATION / "testdata/progressing_step.yaml")
    running["metadata"]["generation"] += 1
    assert run_script(CUSTOMIZATION / "health.lua", running) == {
        "status": "Progressing",
        "message": (
            f"Waiting for the acceltrial operator to observe generation "
            f"{running['metadata']['generation']} (it last acted on "
            f"{running['status']['observedGeneration']})"
        ),
    }


@pytest.mark.parametrize(
    "test", ACTION_TESTS["discoveryTests"], ids=lambda t: Path(t["inputPath"]).stem
)
def test_action_discovery(test: dict[str, Any]) -> None:
    obj = load(ACTIONS / test["inputPath"])
    offered = run_script(ACTIONS / "discovery.lua", obj)
    found = sorted(({"name": name, **action} for name, action in offered.items()), key=_name)
    expected = sorted(test["result"], key=_name)
    assert found == expected


@pytest.mark.parametrize(
    "test",
    ACTION_TESTS["actionTests"],
    ids=lambda t: f"{t['action']}-{Path(t['inputPath']).stem}",
)
def test_action(test: dict[str, Any]) -> None:
    before = load(ACTIONS / test["inputPath"])
    after = run_script(ACTIONS / test["action"] / "action.lua", copy.deepcopy(before))
    expected = load(ACTIONS / test["expectedOutputPath"])
    assert after == expected
    annotations = after["metadata"].pop("annotations")
    assert annotations.pop("acceltrial.dev/action") == test["action"]
    assert annotations == before["metadata"].get("annotations", {})
    before["metadata"].pop("annotations", None)
    assert after == before, "an action changes nothing but its annotation"


def test_every_action_is_tested_and_offered_somewhere() -> None:
    tested = {t["action"] for t in ACTION_TESTS["actionTests"]}
    scripts = {p.parent.name for p in ACTIONS.glob("*/action.lua")}
    assert tested == scripts == {"pause", "resume", "abort", "approve"}
    enabled = {
        a["name"] for t in ACTION_TESTS["discoveryTests"] for a in t["result"] if not a["disabled"]
    }
    assert enabled == scripts


def test_a_script_using_the_string_library_fails_as_in_argo_cd(tmp_path: Path) -> None:
    script = tmp_path / "health.lua"
    script.write_text('return {status = string.upper("healthy")}')
    with pytest.raises(lua51.LuaError, match="string"):
        run_script(script, {"metadata": {"name": "x"}})


def _name(action: dict[str, Any]) -> str:
    return str(action["name"])


@pytest.mark.parametrize("values", [False, True], ids=["argocd-cm", "helm-values"])
def test_argocd_cm_keys_carry_the_scripts_unchanged(values: bool) -> None:
    script = Path(__file__).resolve().parents[2] / "scripts/argocd_cm.py"
    printed = subprocess.run(
        [sys.executable, str(script), *(["--values"] if values else [])],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    document = yaml.safe_load(printed)
    data = document["configs"]["cm"] if values else document["data"]
    key = "acceltrial.dev_AcceleratorTrial"
    assert (
        data[f"resource.customizations.health.{key}"] == (CUSTOMIZATION / "health.lua").read_text()
    )
    actions = yaml.safe_load(data[f"resource.customizations.actions.{key}"])
    assert actions["discovery.lua"] == (ACTIONS / "discovery.lua").read_text()
    assert {d["name"]: d["action.lua"] for d in actions["definitions"]} == {
        p.parent.name: p.read_text() for p in ACTIONS.glob("*/action.lua")
    }
