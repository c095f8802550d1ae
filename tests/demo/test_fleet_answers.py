"""The fleet answers in vLLM's OpenAI-compatible JSON, and the operator's client reads it: the
quality check's two sides against each other (sandbox/fleet/answers.py and
providers/quality/openai.py)."""

from __future__ import annotations

import pytest

from acceltrial.engine.quality.compare import figure_of, score_prompt
from acceltrial.providers.quality.openai import (
    ScoringUnsupported,
    chat_answer,
    completion_answer,
    scored_continuation,
)
from acceltrial_testbed.sandbox.fleet.answers import chat_completion, completion
from acceltrial_testbed.sandbox.fleet.language_model import Outputs, TinyModel
from tests.demo.test_language_model import PROMPTS

GPU = TinyModel("float32")


def test_a_completion_with_logprobs_reads_back_as_its_greedy_answer() -> None:
    body = completion(GPU, "llama3", {"prompt": PROMPTS[0], "max_tokens": 8, "logprobs": 1})

    answer = completion_answer(body)

    steps = GPU.generate(PROMPTS[0], 8)
    assert answer.tokens == tuple((s.token, s.logprob) for s in steps)
    assert answer.text == "".join(s.token for s in steps)
    assert body["usage"]["completion_tokens"] == 8
    assert body["object"] == "text_completion"


def test_a_chat_completion_reads_back_with_its_token_logprobs() -> None:
    request = {"messages": [{"role": "user", "content": PROMPTS[1]}], "max_tokens": 6,
               "logprobs": True, "top_logprobs": 1}  # fmt: skip

    answer = chat_answer(chat_completion(GPU, "llama3", request))

    assert len(answer.tokens) == 6
    assert answer.text == "".join(token for token, _ in answer.tokens).strip()


def test_an_echo_scores_the_baselines_answer_under_the_candidate() -> None:
    """The candidate (bfloat16, 10% of positions made wrong) teacher-forced on the float32
    baseline's answers: about 90% of 100 x 32 positions agree."""
    candidate = TinyModel("bfloat16", Outputs(token_error_rate=0.1))
    scores = []
    for prompt in PROMPTS:
        reference = completion_answer(
            completion(GPU, "gpu", {"prompt": prompt, "max_tokens": 32, "logprobs": 1})
        )
        continuation = reference.text
        echoed = completion(candidate, "neuron", {"prompt": prompt + continuation,
                                                   "max_tokens": 1, "logprobs": 1,
                                                   "echo": True})  # fmt: skip
        scored = scored_continuation(echoed, len(reference.tokens))
        scores.append(score_prompt(reference.tokens, scored))

    figure = figure_of("token_agreement", scores, 32, 0.01)

    assert figure is not None
    assert figure.value == pytest.approx(0.9, abs=0.03)
    assert figure.low < figure.value < figure.high


def test_a_variant_without_prompt_logprobs_cannot_score() -> None:
    blind = TinyModel("bfloat16", Outputs(prompt_logprobs=False))
    body = completion(blind, "neuron", {"prompt": PROMPTS[2] + " kaba lobe", "max_tokens": 1,
                                        "logprobs": 1, "echo": True})  # fmt: skip

    with pytest.raises(ScoringUnsupported):
        scored_continuation(body, 2)
