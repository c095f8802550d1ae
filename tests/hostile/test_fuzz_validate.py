"""Fuzzing `acceltrial validate`: manifests from the CRD's schema and broken ones never make it
raise, and every problem it reports names a field and says what to do.

Runs with the derandomized ``ci`` profile (tests/hostile/strategies.py): the same manifests on
every run, a bounded number of them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from acceltrial.api.validation import is_trial_candidate, validate_trial
from tests.hostile.strategies import (
    FUZZ,
    TRIED,
    hostile_manifests,
    hostile_training_manifests,
    schema_manifests,
    training_schema_manifests,
)

pytestmark = pytest.mark.slow


@FUZZ
@given(st.one_of(hostile_manifests(), hostile_training_manifests()))
def test_validate_never_raises_and_names_the_field(manifest: Any) -> None:
    TRIED["validate"] += 1
    problems = validate_trial(manifest)
    for problem in problems:
        assert problem.message.strip(), problem
        assert "Traceback" not in problem.message
        if isinstance(manifest, dict):  # a document that is no mapping has no fields
            assert problem.path, f"a problem without its field: {problem}"


@FUZZ
@given(st.one_of(schema_manifests(), training_schema_manifests()))
def test_a_schema_valid_spec_has_no_schema_problem(manifest: dict[str, Any]) -> None:
    """What the CRD's schema accepts, the pydantic models accept too: the two agree, so only
    CEL rules (or the name) can refuse a manifest generated from the schema."""
    TRIED["validate"] += 1
    for problem in validate_trial(manifest):
        assert not problem.message.startswith(("unknown field", "expected")), problem


def test_the_cli_reports_every_hostile_document_without_a_traceback(tmp_path: Path) -> None:
    documents: list[dict[str, Any]] = []

    @FUZZ
    @given(hostile_manifests())
    def collect(manifest: dict[str, Any]) -> None:
        documents.append(manifest)

    collect()
    stream = tmp_path / "hostile.yaml"
    stream.write_text(yaml.safe_dump_all(documents, allow_unicode=True), encoding="utf-8")
    TRIED["cli"] += len(documents)

    result = subprocess.run(
        [sys.executable, "-m", "acceltrial.cli.main", "validate", str(stream)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip

    assert result.returncode in (0, 1), result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert result.stderr == ""
    # Empty documents and other kinds in a stream are skipped, as kubectl apply would.
    trials = sum(1 for d in documents if d is not None and is_trial_candidate(d))
    assert f"{trials} trial(s) checked" in result.stdout.splitlines()[-1]
