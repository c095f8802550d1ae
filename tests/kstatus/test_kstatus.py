"""kstatus, as sigs.k8s.io/cli-utils computes it, reads every recorded trial as documented.

Flux health checks and cli-utils-based tools (kpt, kapply) compute a resource's status with
cli-utils' kstatus: Reconciling=True is InProgress, Stalled=True is Failed, otherwise Ready
decides. The Go program beside this file calls ``status.Compute`` of the real library on the
trials recorded from demo runs (the Argo CD test data); it is built once per session (the
first build downloads the modules and compiles k8s.io/api: 36-106 s from empty caches here).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import environ_with

HERE = Path(__file__).resolve().parent
TESTDATA = (
    HERE.parents[1]
    / "integrations/argocd/resource_customizations/acceltrial.dev/AcceleratorTrial/testdata"
)
EXPECTED = {
    "progressing_noStatus": "Current",  # kstatus cannot tell before any status: see docs/gitops.md
    "progressing_pending": "InProgress",
    "progressing_preflight": "InProgress",
    "progressing_awaitingCandidate": "InProgress",
    "progressing_step": "InProgress",
    "progressing_newGeneration": "InProgress",
    "suspended_userPause": "InProgress",
    "suspended_awaitingApproval": "InProgress",
    "suspended_inconclusive": "Failed",
    "degraded_specChangeRejected": "Failed",
    "progressing_promoting": "InProgress",
    "progressing_bakingIn": "InProgress",
    "healthy_promoted": "Current",
    "progressing_rollingBack": "InProgress",
    "degraded_rolledBack": "Failed",
    "degraded_failed": "Failed",
    "degraded_aborted": "Failed",
}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def kstatus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    go = shutil.which("go")
    if go is None:
        pytest.skip("the Go toolchain is not installed: kstatus is checked with cli-utils in Go")
    binary = tmp_path_factory.mktemp("kstatus") / "kstatus"
    # go.sum pins every module; the local toolchain builds it (no toolchain download).
    env = environ_with(**{"GOTOOLCHAIN": "local", "CGO_ENABLED": "0"})
    if "HOME" not in env and "GOCACHE" not in env:  # Go keeps its caches under HOME by default
        caches = tmp_path_factory.mktemp("go")
        env |= {"GOPATH": str(caches), "GOCACHE": str(caches / "build")}
    built = subprocess.run(
        [go, "build", "-mod=readonly", "-o", str(binary), "."],
        cwd=HERE,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert built.returncode == 0, f"go build failed:\n{built.stderr}"
    return binary


def computed(binary: Path, objects: list[dict[str, Any]]) -> list[dict[str, str]]:
    ran = subprocess.run(
        [str(binary)], input=json.dumps(objects), capture_output=True, text=True, check=False
    )
    assert ran.returncode == 0, ran.stderr
    results: list[dict[str, str]] = json.loads(ran.stdout)
    return results


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any] | None:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == type_), None)


def test_the_recorded_trials_are_all_here() -> None:
    assert {p.stem for p in TESTDATA.glob("*.yaml")} == set(EXPECTED)


def test_kstatus_reads_each_phase_as_documented(kstatus: Path) -> None:
    names = sorted(EXPECTED)
    objects = [yaml.safe_load((TESTDATA / f"{name}.yaml").read_text()) for name in names]
    results = dict(zip(names, computed(kstatus, objects), strict=True))
    assert {name: r["status"] for name, r in results.items()} == EXPECTED
    for name, obj in zip(names, objects, strict=True):
        stalled, reconciling = condition(obj, "Stalled"), condition(obj, "Reconciling")
        if EXPECTED[name] == "Failed":
            assert stalled is not None
            assert results[name]["message"] == stalled["message"], name
        if stalled is None and reconciling is not None and name != "progressing_newGeneration":
            assert results[name]["message"] == reconciling["message"], name
