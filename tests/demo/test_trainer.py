"""The simulated trainer: what a training pod prints, in the formats training scripts use, read
back by the operator's own log parser; how it fails."""

from __future__ import annotations

import pytest

from acceltrial.engine.training.logs import parse_log
from acceltrial_testbed.sandbox.trainer import Behaviour, Loss, script


@pytest.mark.parametrize("log_format", ["json", "nxd", "katib"])
def test_each_format_reads_back_as_the_behaviour_says(log_format: str) -> None:
    behaviour = Behaviour(tokens_per_second=40_000, startup_seconds=4, format=log_format,
                          loss=Loss(initial=4.0, final=2.0), sequence_length=4096)  # fmt: skip
    played = script(behaviour, "baseline", 60)

    parsed = parse_log(line for _, line in played.lines)
    assert [r.step for r in parsed.records] == list(range(1, 61))
    assert {r.format for r in parsed.records} == {log_format}
    last = parsed.records[-1]
    assert last.loss == pytest.approx(2.0, rel=0.01)
    rate = last.tokens_per_second or (last.samples_per_second or 0) * 4096
    assert rate == pytest.approx(40_000, rel=0.05)
    assert played.lines[2][0] == pytest.approx(4.25)  # the first step after the start-up
    assert played.exit_code == 0


def test_a_run_that_fails_dies_a_third_of_the_way_with_a_traceback() -> None:
    played = script(Behaviour(tokens_per_second=1000, fails="run"), "candidate", 60)
    assert played.exit_code == 1
    assert played.lines[-1][1].startswith("RuntimeError: NRT error")
    assert len(parse_log(line for _, line in played.lines).records) == 20


def test_a_precompile_that_fails_prints_the_compilers_error() -> None:
    played = script(Behaviour(tokens_per_second=1000, fails="compile"), "precompile", 60)
    assert played.exit_code == 1
    assert "exceeds 16 GB" in played.lines[-2][1]
    passed = script(Behaviour(tokens_per_second=1000), "precompile", 60)
    assert passed.exit_code == 0
    assert "compilation_summary" in passed.lines[-1][1]
