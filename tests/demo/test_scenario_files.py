"""Scenario files: the shipped ones load, and a mistake is named by its field, with exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from acceltrial_testbed.demo.runner import at_speed
from acceltrial_testbed.demo.scenario import TRIAL_FILES, ScenarioError, load_scenario
from acceltrial_testbed.demo.training import (
    is_training_scenario,
    load_training_scenario,
    training_topology,
    with_trainers,
)
from acceltrial_testbed.sandbox.trainer import TRAINER, Behaviour
from tests.conftest import REPO

SCENARIOS = REPO / "examples" / "scenarios"
SHIPPED = sorted(p for p in SCENARIOS.glob("*.yaml") if p.stem not in TRIAL_FILES)
TRAINING = [p for p in SHIPPED if is_training_scenario(p)]
REQUIRED = {
    "promote",
    "latency-regression",
    "error-burst",
    "regression-under-load",
    "no-traffic",
    "prometheus-outage",
    "low-utilization",
}


def test_every_required_scenario_ships() -> None:
    assert {p.stem for p in SHIPPED} >= REQUIRED
    assert {p.stem for p in TRAINING} == {
        "training-recommended", "training-loss-diverges", "training-compile-fails",
        "training-exported-throughput",
    }  # fmt: skip


@pytest.mark.parametrize("path", [p for p in SHIPPED if p not in TRAINING], ids=lambda p: p.stem)
def test_each_shipped_scenario_loads_with_a_valid_trial(path: Path) -> None:
    scenario, trial = load_scenario(path)
    assert scenario.expect.phase in ("Promoted", "RolledBack", "Aborted", "Failed")
    assert trial["kind"] == "AcceleratorTrial"


@pytest.mark.parametrize("path", TRAINING, ids=lambda p: p.stem)
def test_each_training_scenario_loads_and_its_pods_get_the_trainers(path: Path) -> None:
    """Told apart by its content (``trainers``); without a topology the cluster gets the
    nodes the trial asks for, the Neuron ones tainted; the trainers reach both templates."""
    scenario, trial = load_training_scenario(path)
    groups = {g.instance_type: g for g in training_topology(trial).node_groups}
    assert groups["p4d.24xlarge"].allocatable["nvidia.com/gpu"] == "8"
    assert groups["trn1.32xlarge"].allocatable["aws.amazon.com/neuron"] == "16"
    assert [t.key for t in groups["trn1.32xlarge"].taints] == ["aws.amazon.com/neuron"]
    baseline, candidate = trainers_of(with_trainers(trial, scenario.trainers))
    assert baseline.tokens_per_second == 40000
    assert candidate.tokens_per_second == 58750


def trainers_of(played: dict[str, Any]) -> tuple[Behaviour, Behaviour]:
    """The behaviours the played trial's baseline and candidate pods carry."""
    spec = played["spec"]
    templates = (spec["baseline"]["template"], spec["candidate"]["podTemplatePatch"])
    baseline, candidate = (
        Behaviour.model_validate_json(t["metadata"]["annotations"][TRAINER]) for t in templates
    )
    return baseline, candidate


USER_WRITTEN = sorted((REPO / "tests" / "fixtures" / "user-scenarios").glob("*.yaml"))


@pytest.mark.parametrize("path", USER_WRITTEN, ids=lambda p: p.stem)
def test_each_scenario_a_new_user_wrote_loads(path: Path) -> None:
    """Written from docs/demo.md alone (tests/fixtures/user-scenarios/README.md)."""
    scenario, trial = load_scenario(path)
    assert scenario.expect.phase in ("Promoted", "RolledBack", "Failed"), "an outcome decided"
    assert trial["spec"]["analysis"]["criteria"], "the shipped trial's criteria, or their own"


def write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "trial.yaml").write_text((SCENARIOS / "trial.yaml").read_text())
    path = tmp_path / "broken.yaml"
    path.write_text(text)
    return path


GOOD_VARIANTS = """
variants:
  baseline: {latency: {p50: 1.2, p99: 2.8}, capacityRps: 8}
  candidate: {latency: {p50: 1.2, p99: 2.8}, capacityRps: 8}
"""


@pytest.mark.parametrize(
    ("text", "named"),
    [
        (
            "description: x\ntrial: {file: trial.yaml}\nfleet: {rps: 0}\n"
            + GOOD_VARIANTS
            + "expect: {phase: Promoted}\n",
            "fleet.rps: Input should be greater than 0",
        ),
        (
            "description: x\ntrial: {file: trial.yaml}\nfleet: {rps: 5}\n"
            "variants:\n  baseline: {latency: {p50: 1.2, p99: 2.8}, capacityRps: 8}\n"
            "  candidate: {latency: {p50: 3, p99: 2}, capacityRps: 8}\n"
            "expect: {phase: Promoted}\n",
            "variants.candidate.latency: Value error, p99 must be above p50",
        ),
        (
            "description: x\ntrial: {file: trial.yaml}\nfleet: {rps: 5}\n"
            + GOOD_VARIANTS
            + "expect: {phase: Promotd}\n",
            "expect.phase: Input should be",
        ),
        (
            "description: x\ntrial: {file: trial.yaml}\nfleet: {rps: 5}\n"
            + GOOD_VARIANTS
            + "regressions: [{variant: candidate, when: {weight: 50, after: 3s}}]\n"
            "expect: {phase: Promoted}\n",
            "regressions.0.when: Value error, set exactly one of when.weight and when.after",
        ),
        (
            "description: x\ntrial: {file: trial.yaml}\nfleet: {rps: 5, rsp: 3}\n"
            + GOOD_VARIANTS
            + "expect: {phase: Promoted}\n",
            "fleet.rsp: Extra inputs are not permitted",
        ),
        (
            "description: x\ntrial: {file: missing.yaml}\nfleet: {rps: 5}\n"
            + GOOD_VARIANTS
            + "expect: {phase: Promoted}\n",
            "trial.file: cannot read",
        ),
        (
            "description: x\ntrial: {file: trial.yaml, patch: {spec: {steps: []}}}\n"
            "fleet: {rps: 5}\n" + GOOD_VARIANTS + "expect: {phase: Promoted}\n",
            "trial: spec.steps",
        ),
        (
            "description: x\ntrial: {file: trial.yaml}\nfleet: {rps: 5}\n" + GOOD_VARIANTS
            + "actions: [{when: {phase: Promoted}, do: scale-baseline}]\n"
            "expect: {phase: Promoted}\n",
            "actions.0: Value error, scale-baseline needs replicas",
        ),
        (
            "description: x\ntrial: {file: trial.yaml}\nfleet: {rps: 5}\n" + GOOD_VARIANTS
            + "actions: [{when: {after: 5s}, do: delete-trail}]\n"
            "expect: {phase: Promoted}\n",
            "actions.0.do: Input should be 'pause', 'resume'",
        ),
        (
            "description: x\ntrial: {file: trial.yaml}\nfleet: {rps: 5}\n" + GOOD_VARIANTS
            + "actions: [{when: {}, do: abort}]\n"
            "expect: {phase: Promoted}\n",
            "actions.0.when: Value error, set exactly one of when.phase and when.after",
        ),
        (
            "description: x\ntrial: {file: trial.yaml}\nfleet: {rps: 5}\n" + GOOD_VARIANTS
            + "expect: {phase: Promoted, servedBy: gpu}\n",
            "expect.servedBy: Input should be 'candidate' or 'baseline'",
        ),
        (
            "description: x\ntrial: {file: trial.yaml}\nfleet: {rps: 5, seed: -3}\n"
            + GOOD_VARIANTS + "expect: {phase: Promoted}\n",
            "fleet.seed: Input should be greater than or equal to 0",
        ),
        (
            "description: x\ntrial: {file: trial.yaml}\nfleet: {rps: 5, seed: 1.5}\n"
            + GOOD_VARIANTS + "expect: {phase: Promoted}\n",
            "fleet.seed: Input should be a valid integer",
        ),
        (
            "description: x\ntrial: {file: trial.yaml}\nfleet: {rps: 5, seed: \"42\"}\n"
            + GOOD_VARIANTS + "expect: {phase: Promoted}\n",
            "fleet.seed: Input should be a valid integer",
        ),
        (
            "description: x\ntrial: {file: trial.yaml}\nfleet: {rps: 5, seed: true}\n"
            + GOOD_VARIANTS + "expect: {phase: Promoted}\n",
            "fleet.seed: Input should be a valid integer",
        ),
    ],
    ids=["rps", "p99-below-p50", "phase-typo", "two-conditions", "unknown-field", "no-trial",
         "bad-trial", "action-argument", "action-typo", "action-when", "served-by",
         "seed-negative", "seed-fraction", "seed-string", "seed-bool"],
)  # fmt: skip
def test_a_mistake_names_the_field(tmp_path: Path, text: str, named: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ScenarioError) as error:
        load_scenario(path)
    assert named in str(error.value)


def test_fleet_seed_is_an_optional_integer(tmp_path: Path) -> None:
    text = "description: x\ntrial: {file: trial.yaml}\nfleet: {rps: 5, seed: 42}\n"
    scenario, _ = load_scenario(
        write(tmp_path, text + GOOD_VARIANTS + "expect: {phase: Promoted}\n")
    )
    assert scenario.fleet.seed == 42
    unset = "description: x\ntrial: {file: trial.yaml}\nfleet: {rps: 5}\n"
    scenario, _ = load_scenario(
        write(tmp_path, unset + GOOD_VARIANTS + "expect: {phase: Promoted}\n")
    )
    assert scenario.fleet.seed is None, "the demo draws one and prints it"


def test_the_cli_reports_a_broken_scenario_without_a_traceback(tmp_path: Path) -> None:
    path = write(tmp_path, "description: x\ntrial: {file: trial.yaml}\nfleet: {rps: -1}\n")
    done = subprocess.run(
        [sys.executable, "-m", "acceltrial.cli.main", "demo", "--scenario", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "fleet.rps: Input should be greater than 0" in done.stderr
    assert "variants: Field required" in done.stderr
    assert "Traceback" not in done.stderr


def test_speed_divides_the_durations_and_refuses_an_unmeasurable_interval() -> None:
    _, trial = load_scenario(SCENARIOS / "promote.yaml")
    faster = at_speed(trial, 0.5)["spec"]
    assert [s["duration"] for s in faster["steps"]] == ["18s", "18s", "18s"]
    assert faster["analysis"]["interval"] == "6s"
    with pytest.raises(ValueError, match=r"spec.analysis.interval 1s, shorter than the 2s"):
        at_speed(trial, 3)


def test_actions_take_the_short_forms_too(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "description: x\ntrial: {file: trial.yaml}\nfleet: {rps: 5}\n" + GOOD_VARIANTS
        + "actions:\n"
        "  - {when: {phase: Promoted}, do: scale-baseline(2)}\n"
        "  - {when: {after: 10s}, do: 'set-route-weights(llama3-8b-gpu=100, other=0)'}\n"
        "  - {when: {phase: BakingIn}, do: delete-trial}\n"
        "expect: {phase: Promoted, servedBy: candidate}\n",
    )  # fmt: skip
    scenario, _ = load_scenario(path)
    scale, weights, delete = scenario.actions
    assert (scale.do, scale.replicas) == ("scale-baseline", 2)
    assert (weights.do, weights.weights) == (
        "set-route-weights",
        {"llama3-8b-gpu": 100, "other": 0},
    )
    assert weights.when.after == "10s"
    assert (delete.do, delete.when.phase) == ("delete-trial", "BakingIn")
    assert scenario.expect.served_by == "candidate"
