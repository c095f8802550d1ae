"""docs/api.md is the reference rendered from the models, covering every spec field."""

from __future__ import annotations

from pathlib import Path

from acceltrial.api.crd import open_api_schema
from acceltrial.api.kinds import TRAINING_TRIAL
from acceltrial.api.reference import render_reference

REPO = Path(__file__).resolve().parents[2]


def test_committed_reference_is_current() -> None:
    assert (REPO / "docs" / "api.md").read_text(encoding="utf-8") == render_reference()


def test_every_field_of_the_spec_is_documented() -> None:
    text = render_reference()
    spec = open_api_schema()["properties"]["spec"]
    for name, field in spec["properties"].items():
        assert f"| `{name}`" in text
        assert field.get("description"), f"spec.{name} has no description"
    assert "## `spec.analysis.criteria[]`" in text
    assert "step weights must increase strictly" in text


def test_the_training_reference_is_the_committed_one() -> None:
    text = render_reference(TRAINING_TRIAL)
    assert (REPO / "docs" / "api-training.md").read_text(encoding="utf-8") == text
    assert "## `spec.fullRun`" in text
