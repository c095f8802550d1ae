"""The fleet's tiny language model: deterministic, a bfloat16 run that drifts from the float32
one only by rounding, and the knobs of a broken compile (sandbox/fleet/language_model.py)."""

from __future__ import annotations

import numpy as np
import pytest

from acceltrial_testbed.sandbox.fleet.language_model import (
    VOCABULARY,
    Outputs,
    TinyModel,
    tokenize,
)

REFERENCE = TinyModel("float32")
PROMPTS = [
    " ".join(np.random.default_rng(n).choice([w.strip() for w in VOCABULARY], 8))
    for n in range(100)
]


def agreement(candidate: TinyModel, prompts: list[str] = PROMPTS, tokens: int = 64) -> float:
    """The share of the reference's greedy positions where ``candidate``, teacher-forced on the
    reference's answer, has the same top-1."""
    agreed = 0
    for prompt in prompts:
        answer = REFERENCE.generate(prompt, tokens)
        scored = candidate.score(prompt + "".join(step.token for step in answer))[-tokens:]
        agreed += sum(
            s is not None and s.top_token == a.token for s, a in zip(scored, answer, strict=True)
        )
    return agreed / (len(prompts) * tokens)


def test_the_same_prompt_gets_the_same_answer() -> None:
    first = TinyModel("float32").generate(PROMPTS[0], 16)

    assert first == REFERENCE.generate(PROMPTS[0], 16)
    assert first != REFERENCE.generate(PROMPTS[1], 16)
    assert all(step.logprob <= 0 for step in first)


def test_a_healthy_bfloat16_compile_agrees_on_well_over_99_percent_but_not_all() -> None:
    share = agreement(TinyModel("bfloat16"))

    print(f"bfloat16 agrees on {share:.2%} of 6,400 greedy positions")
    assert 0.99 < share < 1.0, "real rounding flips a few near-ties, not none"


def test_a_token_error_rate_makes_that_share_of_positions_differ() -> None:
    share = agreement(TinyModel("bfloat16", Outputs(token_error_rate=0.1)))

    assert share == pytest.approx(0.9, abs=0.03)


def test_a_model_scoring_its_own_answer_gives_back_its_tokens() -> None:
    broken = TinyModel("bfloat16", Outputs(token_error_rate=0.2))
    answer = broken.generate(PROMPTS[2], 32)

    scored = broken.score(PROMPTS[2] + "".join(step.token for step in answer))[-32:]

    assert [s.top_token for s in scored if s is not None] == [a.token for a in answer]
    assert scored[0] is not None
    assert scored[0].token == answer[0].token


def test_logprob_noise_moves_the_log_probabilities_not_the_tokens() -> None:
    noisy = TinyModel("float32", Outputs(logprob_noise=0.05)).generate(PROMPTS[3], 32)
    clean = REFERENCE.generate(PROMPTS[3], 32)

    assert [s.token for s in noisy] == [s.token for s in clean]
    gaps = [abs(n.logprob - c.logprob) for n, c in zip(noisy, clean, strict=True)]
    assert 0.01 < float(np.mean(gaps)) < 0.1


def test_unknown_words_map_to_tokens_stably() -> None:
    assert tokenize("hello world") == tokenize("hello  world")
    assert len(tokenize("a b c")) == 3
