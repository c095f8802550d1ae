"""The quality check's detection benchmark (bench/quality.py) on a tiny configuration: a small
pool, a few runs of 25 prompts. A broken compile is caught by every comparison method and a
healthy bfloat16 one refused by none; the full table is ``python -m bench.quality``."""

from __future__ import annotations

from bench.quality import CASES, METHODS, TOGETHER, Profile, measure, share

TINY = Profile(pool=40, runs=4)
CASE = {case.name: case for case in CASES}


def test_a_20_percent_token_error_rate_is_caught_by_every_method() -> None:
    result = measure(CASE["tokenErrorRate 0.2"], TINY, sizes=(25,), parity_prompts=0)

    for method in METHODS:
        assert share(result.cells[25][method], "Fail") == 1.0, method


def test_healthy_bfloat16_is_refused_by_no_method_and_scores_alike_both_ways() -> None:
    result = measure(CASE["bfloat16"], TINY, sizes=(25,), parity_prompts=20)

    for method in METHODS:
        assert share(result.cells[25][method], "Fail") == 0.0, method
    assert share(result.cells[25][TOGETHER], "Pass") == 1.0
    parity = result.parity
    assert parity is not None
    assert parity.same_scores == parity.prompts == 20
    assert parity.positions == (20 * 64, 20 * 64)
    assert parity.same_verdicts == METHODS
