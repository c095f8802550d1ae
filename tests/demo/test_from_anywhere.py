"""``acceltrial demo`` run from outside the checkout still finds the shipped scenarios and the
Prometheus that ``make demo`` unpacked; an unknown scenario lists the shipped ones."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from acceltrial_testbed.demo.scenario import resolve_path, shipped_scenarios
from acceltrial_testbed.sandbox.prometheus import find_prometheus
from tests.conftest import REPO, TOOLS_BIN


def test_the_checkouts_prometheus_and_scenarios_are_found_from_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not (TOOLS_BIN / "prometheus").exists():
        pytest.skip("no .tools/bin/prometheus (make tools puts it there)")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PROMETHEUS_BIN", raising=False)
    monkeypatch.setenv("PATH", "/usr/local/bin/none")
    assert Path(find_prometheus()) == TOOLS_BIN / "prometheus"
    assert resolve_path("promote") == REPO / "examples" / "scenarios" / "promote.yaml"
    assert "promote" in shipped_scenarios()


def test_an_unknown_scenario_lists_the_shipped_ones(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "acceltrial.cli.main", "demo", "--scenario", "nope"]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          check=False)  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.startswith("acceltrial demo: no scenario 'nope': give a shipped scenario")
    for name in ("promote", "latency-regression", "prometheus-outage"):
        assert name in done.stderr
    assert "Traceback" not in done.stderr
