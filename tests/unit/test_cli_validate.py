"""`acceltrial validate`: one line per problem, exit 1 on any, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from acceltrial.cli.main import main

REPO = Path(__file__).resolve().parents[2]
GOOD = REPO / "examples" / "llama3-8b-inf2-httproute.yaml"
INVALID = sorted((REPO / "tests" / "manifests" / "invalid").glob("*.yaml"))
DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata: {name: llama3-8b-gpu}
spec: {replicas: 1}
"""


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str]]:
    code = main(["validate", *args])
    return code, capsys.readouterr().out.splitlines()


def test_valid_examples_exit_zero(capsys: pytest.CaptureFixture[str]) -> None:
    code, lines = run(capsys, *map(str, sorted((REPO / "examples").glob("*.yaml"))))
    assert code == 0
    assert lines[-1] == "3 trial(s) checked, 0 problem(s)"
    assert all(line.endswith(": valid") for line in lines[:-1])


def test_multi_document_file_is_checked_document_by_document(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = (REPO / "tests/manifests/invalid/03-weight-150.yaml").read_text()
    manifest = tmp_path / "trials.yaml"
    manifest.write_text(GOOD.read_text() + "---\n" + DEPLOYMENT + "---\n" + bad)

    code, lines = run(capsys, str(manifest))

    assert code == 1
    assert lines == [
        f"{manifest}#1 serving/llama3-8b-inf2: valid",
        f"{manifest}#3 serving/llama3-8b-inf2: spec.steps[2].weight: must be at most 100 (got 150)",
        "2 trial(s) checked, 1 problem(s)",
    ]


def test_every_invalid_manifest_fails_with_a_line_per_problem(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, lines = run(capsys, *map(str, INVALID))
    assert code == 1
    problem_lines = [line for line in lines[:-1] if not line.endswith(": valid")]
    assert len(problem_lines) >= len(INVALID)
    assert {line.split("#")[0] for line in problem_lines} == {str(p) for p in INVALID}


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("spec: [unclosed", "not valid YAML: line 1, column 16"),
        (
            "- just\n- a list\n",
            "expected an AcceleratorTrial or TrainingTrial object (a mapping), got a list",
        ),
        ("kind: Deployment\napiVersion: apps/v1\n", "no AcceleratorTrial or TrainingTrial found"),
    ],
)
def test_unusable_input_is_one_clear_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, expected: str
) -> None:
    manifest = tmp_path / "input.yaml"
    manifest.write_text(content)
    code, lines = run(capsys, str(manifest))
    assert code == 1
    assert any(expected in line for line in lines), lines


def test_missing_file(capsys: pytest.CaptureFixture[str]) -> None:
    code, lines = run(capsys, "no/such/trial.yaml")
    assert code == 1
    assert lines[0] == "no/such/trial.yaml: cannot read the file: No such file or directory"


def test_installed_commands_behave_alike(tmp_path: Path) -> None:
    """Both console scripts run as processes: exit codes, no traceback on stderr."""
    bin_dir = Path(sys.executable).parent
    bad = str(INVALID[0])
    for command in ("acceltrial", "kubectl-acceltrial"):
        ok = subprocess.run(
            [str(bin_dir / command), "validate", str(GOOD)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert ok.returncode == 0, ok.stderr
        failed = subprocess.run(
            [str(bin_dir / command), "validate", bad, "-"],
            input="apiVersion: acceltrial.dev/v1alpha1\nkind: AcceleratorTrial\n",
            capture_output=True,
            text=True,
            check=False,
        )
        assert failed.returncode == 1
        assert "Traceback" not in failed.stdout + failed.stderr
        assert "-#1 (unnamed): spec: required field is missing" in failed.stdout


def test_the_trial_commands_load_neither_the_demo_nor_the_local_cluster() -> None:
    """`kubectl acceltrial status` must not load the simulated fleet or the sandbox."""
    probe = "import sys, acceltrial.cli.main as m; m.build_parser(); print(sorted(sys.modules))"
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    # The test bed's commands add their parsers (and name the control-plane choices) only.
    assert "acceltrial_testbed.commands.demo" in loaded, "the demo command is listed"
    for heavy in ("sandbox.cluster", "sandbox.server", "sandbox.fleet", "demo.runner"):
        assert f"acceltrial_testbed.{heavy}" not in loaded
