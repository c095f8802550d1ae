"""``acceltrial demo --control-plane``: which local control plane the demo runs on, and a clear
refusal when the real one is asked for but not built. (Runs on each control plane are in
``test_demo_scenarios.py``.)"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from acceltrial.cli.main import build_parser
from acceltrial_testbed.demo.runner import DemoOptions, run_demo
from acceltrial_testbed.sandbox.choices import uses_real_control_plane
from acceltrial_testbed.sandbox.realplane import binaries


@pytest.fixture
def unbuilt(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No control plane program anywhere: not in .tools/bin, the variable or PATH."""
    monkeypatch.setattr(binaries, "REPOSITORY_BIN", tmp_path / "bin")
    monkeypatch.delenv(binaries.ENVIRONMENT_VARIABLE, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))


def test_the_demo_defaults_to_auto_and_names_every_choice() -> None:
    parser = build_parser()
    assert parser.parse_args(["demo"]).control_plane == "auto"
    chosen = parser.parse_args(["demo", "--control-plane", "real"]).control_plane
    assert chosen == "real"
    with pytest.raises(SystemExit):
        parser.parse_args(["demo", "--control-plane", "kind"])


@pytest.mark.usefixtures("unbuilt")
def test_auto_falls_back_to_the_emulator_when_the_real_plane_is_not_built() -> None:
    assert not uses_real_control_plane("auto")
    assert not uses_real_control_plane("emulator")
    assert uses_real_control_plane("real")


@pytest.mark.usefixtures("unbuilt")
def test_real_when_not_built_exits_2_with_the_command_to_run_and_starts_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = io.StringIO()
    code = run_demo(DemoOptions("promote", control_plane="real"), out)
    assert code == 2
    error = capsys.readouterr().err
    assert "the real control plane is not built" in error
    assert "make control-plane" in error
    assert "--control-plane emulator" in error
    assert out.getvalue() == "", "refused before anything started"
