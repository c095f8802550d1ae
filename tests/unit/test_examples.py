"""The shipped examples are valid trials, and parse into the models with their defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from acceltrial.api import AcceleratorTrial
from acceltrial.api.training import TrainingTrial
from acceltrial.api.validation import is_trial_candidate, load_documents, validate_trial

EXAMPLES = Path(__file__).resolve().parent.parent.parent / "examples"
FILES = sorted(EXAMPLES.glob("*.yaml"))


def trials_in(path: Path) -> list[object]:
    text = path.read_text(encoding="utf-8")
    return [d.body for d in load_documents(text) if is_trial_candidate(d.body)]


def test_the_promised_examples_exist() -> None:
    bodies = [body for path in FILES for body in trials_in(path)]
    routers = {
        AcceleratorTrial.model_validate(body).spec.traffic.router
        for body in bodies
        if isinstance(body, dict) and body.get("kind") == "AcceleratorTrial"
    }
    assert {"gatewayapi", "replicas"} <= routers
    training = [TrainingTrial.model_validate(b) for b in bodies
                if isinstance(b, dict) and b.get("kind") == "TrainingTrial"]  # fmt: skip
    assert [t.spec.candidate.instance_type for t in training] == ["trn1.32xlarge"]
    # kubectl reads 2.0e9 as a number, and so does the validator.
    assert training[0].spec.full_run.tokens == 2.0e9


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_example_is_valid(path: Path) -> None:
    trials = trials_in(path)
    assert trials, f"{path.name} holds no AcceleratorTrial"
    for body in trials:
        assert validate_trial(body) == []


def test_defaults_are_filled_in() -> None:
    (body,) = trials_in(EXAMPLES / "bert-inf2-replicas.yaml")
    trial = AcceleratorTrial.model_validate(body)
    assert trial.spec.analysis.failure_limit == 0
    assert trial.spec.analysis.consecutive_error_limit == 4
    assert trial.spec.progress_deadline == "10m"
    assert trial.spec.analysis.criteria[0].from_weight == 0
