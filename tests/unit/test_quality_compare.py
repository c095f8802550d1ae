"""The quality comparison (engine/quality/compare.py) against figures computed by hand.

- A ratio of sums over prompts: token_agreement = sum(agreed) / sum(positions); first_divergence
  = sum(first position differing, maxTokens where none) / (prompts x maxTokens).
- The percentile bootstrap over two prompts A (10 of 10 agree) and B (0 of 10) has three
  outcomes: AA 1.0 (probability 1/4), AB or BA 0.5 (1/2), BB 0.0 (1/4), so its 0.5% and 99.5%
  quantiles are 0 and 1 whatever the seed.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from acceltrial.api.spec.quality import QualityCriterion
from acceltrial.engine.quality.compare import (
    PromptScore,
    figure_of,
    judge_quality,
    score_prompt,
)

ALPHA = 0.01


def criterion(metric: str = "token_agreement", **limits: Any) -> QualityCriterion:
    return QualityCriterion.model_validate(
        {"name": "c", "metric": metric, **(limits or {"absolute": {"min": 0.98}})}
    )


def agreeing(positions: int, agreed: int, first: int | None = None) -> PromptScore:
    return PromptScore(positions, agreed, 0.0, first if agreed < positions else None)


def test_a_prompt_is_scored_position_by_position() -> None:
    baseline = [("The", -0.1), (" cat", -0.2), (" sat", -0.3)]
    candidate = [("The", -0.15), (" dog", -0.5), (" sat", -0.3)]

    score = score_prompt(baseline, candidate, met=(True, False))

    assert (score.positions, score.agreed, score.first_divergence) == (3, 2, 1)
    assert score.logprob_gap == pytest.approx(0.05 + 0.3 + 0.0)
    assert (score.baseline_met, score.candidate_met) == (True, False)


def test_agreement_is_a_ratio_of_sums_with_the_bootstrap_over_whole_prompts() -> None:
    figure = figure_of("token_agreement", [agreeing(10, 10), agreeing(10, 0, 0)], 64, ALPHA)

    assert figure is not None
    assert figure.value == 0.5
    assert (figure.low, figure.high) == (0.0, 1.0), "AA, AB, BA, BB: 0 and 1 at 0.5% and 99.5%"
    assert "99% interval 0 to 1 over 2 prompts" in figure.said()


def test_first_divergence_counts_max_tokens_where_none_differs() -> None:
    scores = [agreeing(64, 50, first=16), agreeing(40, 40)]  # the second answer ended early

    figure = figure_of("first_divergence", scores, 64, ALPHA)

    assert figure is not None
    assert figure.value == pytest.approx((16 + 64) / 128)


def test_logprob_divergence_is_the_mean_gap_per_position() -> None:
    scores = [PromptScore(4, 4, 0.2, None), PromptScore(6, 6, 0.1, None)]

    figure = figure_of("logprob_divergence", scores, 64, ALPHA)

    assert figure is not None
    assert figure.value == pytest.approx(0.3 / 10)


def test_expected_match_absolute_and_relative_to_the_baseline() -> None:
    scores = [
        PromptScore(8, 8, 0.0, None, baseline_met=True, candidate_met=i < 8) for i in range(10)
    ]
    scores.append(PromptScore(8, 8, 0.0, None))  # no expected: not counted

    absolute = figure_of("expected_match", scores, 64, ALPHA)
    relative = figure_of("expected_match", scores, 64, ALPHA, relative=True)

    assert absolute is not None
    assert absolute.value == pytest.approx(0.8)
    assert absolute.prompts == 10
    assert relative is not None
    assert relative.value == pytest.approx(0.8)
    assert "(candidate / baseline)" in relative.said()


def test_a_criterion_passes_or_fails_only_when_its_interval_clears_the_limit() -> None:
    identical = [agreeing(64, 64) for _ in range(50)]
    degraded = [agreeing(64, 57, 3) for _ in range(50)]  # 89% agree in every prompt
    mixed = [agreeing(10, 10), agreeing(10, 0, 0)]

    assert judge_quality([criterion()], identical, 64, ALPHA)[0].verdict == "Pass"
    failed = judge_quality([criterion()], degraded, 64, ALPHA)[0]
    assert failed.verdict == "Fail"
    assert "token_agreement 0.8906" in failed.reason
    assert "beyond min 0.98" in failed.reason
    unsure = judge_quality([criterion(absolute={"min": 0.4})], mixed, 64, ALPHA)[0]
    assert unsure.verdict == "Inconclusive"
    assert "more prompts are needed to tell" in unsure.reason


def test_too_many_unanswered_prompts_leave_every_criterion_inconclusive() -> None:
    scores = [agreeing(64, 64) for _ in range(90)]

    judged = judge_quality(
        [criterion(), criterion("first_divergence")], scores, 64, ALPHA, unanswered=10
    )

    assert {j.verdict for j in judged} == {"Inconclusive"}
    assert "10 of 100 prompts got no answer" in judged[0].reason
    assert judge_quality([criterion()], scores, 64, ALPHA, unanswered=4)[0].verdict == "Pass"


def test_nothing_to_measure_is_inconclusive_never_a_pass() -> None:
    judged = judge_quality([criterion("expected_match")], [agreeing(64, 64)], 64, ALPHA)[0]

    assert judged.verdict == "Inconclusive"
    assert "no prompt with expected" in judged.reason


def test_at_100_prompts_a_5_percent_token_error_rate_is_caught_and_a_healthy_compile_passes() -> (
    None
):
    """100 prompts x 64 tokens, each position disagreeing independently: at 5% (a broken
    compile) the 99% interval lies below 0.98 in every run; at 0.1% (bfloat16 drift) above it.
    The detection benchmark (bench/quality.py) is the full table."""
    rng = np.random.default_rng(31)

    def verdicts(error_rate: float) -> list[str]:
        runs = []
        for _ in range(100):
            wrong = rng.random((100, 64)) < error_rate
            scores = [
                agreeing(64, int(64 - row.sum()), int(np.argmax(row)) if row.any() else None)
                for row in wrong
            ]
            runs.append(judge_quality([criterion()], scores, 64, ALPHA)[0].verdict)
        return runs

    assert verdicts(0.05).count("Fail") == 100
    assert verdicts(0.001).count("Pass") == 100


def test_a_fault_only_chat_prompts_meet_fails_on_their_own_figure() -> None:
    """A wrong chat template: 100 completion prompts agree fully, 20 chat prompts agree on 56
    of 64 positions. Pooled, 0.979 straddles min 0.98; the chat prompts alone clearly fail."""
    completions = [agreeing(64, 64) for _ in range(100)]
    chats = [replace(agreeing(64, 56, first=3), chat=True) for _ in range(20)]
    limit = criterion(absolute={"min": 0.98})
    pooled = figure_of("token_agreement", completions + chats, 64, ALPHA)
    assert pooled is not None
    assert pooled.low < 0.98 < pooled.high, "pooled, the fault would only pause the trial"
    [judged] = judge_quality([limit], completions + chats, 64, ALPHA)
    assert judged.verdict == "Fail"
    assert judged.reason.startswith("over the 20 chat prompts, token_agreement 0.875")
    healthy = [replace(agreeing(64, 64), chat=True) for _ in range(20)]
    [fine] = judge_quality([limit], completions + healthy, 64, ALPHA)
    assert fine.verdict == "Pass"
    assert not fine.reason.startswith("over the"), "the pooled verdict stands"
