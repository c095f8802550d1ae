"""Running a prompt set against two endpoints (providers/quality/check.py), through the client's
transport seam: the fleet's tiny model answers in-process (float32 baseline, bfloat16
candidate), and transports that fail show the retries, the refusals and the unanswered count."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from acceltrial.engine.quality.prompts import Prompt
from acceltrial.providers.quality.check import ATTEMPTS, QualityRun
from acceltrial.providers.quality.openai import (
    AnswerError,
    OpenAiClient,
    RequestRefused,
    Transport,
)
from acceltrial_testbed.sandbox.fleet.language_model import Outputs, TinyModel
from acceltrial_testbed.sandbox.fleet.model_server import in_process

PROMPTS = [Prompt(i + 1, text=f"Tell me about topic number {i} in a few words") for i in range(12)]
CHAT = [Prompt(20, messages=(("system", "Be brief."), ("user", "Name three rivers.")))]


def client(transport: Transport) -> OpenAiClient:
    return OpenAiClient("http://unused", transport=transport)


def variant(precision: str = "bfloat16", **outputs: Any) -> OpenAiClient:
    return client(in_process(TinyModel(precision, Outputs(**outputs))))  # type: ignore[arg-type]


def run(candidate: OpenAiClient, prompts: list[Prompt] = PROMPTS, **options: Any) -> Any:
    return QualityRun(variant("float32"), candidate, max_tokens=32, **options).run(prompts)


class Flaky:
    """A transport that fails ``failures`` times for each request whose prompt names ``when``,
    then answers as ``inner`` does."""

    def __init__(self, inner: Transport, failures: int, when: str = "", error: type = AnswerError):
        self.inner, self.failures, self.when, self.error = inner, failures, when, error
        self.seen: dict[str, int] = {}
        self.calls = 0

    def __call__(self, path: str, payload: dict[str, Any]) -> Mapping[str, Any]:
        self.calls += 1
        key = repr(sorted(payload.items()))
        if self.when in str(payload.get("prompt") or payload.get("messages")):
            self.seen[key] = self.seen.get(key, 0) + 1
            if self.seen[key] <= self.failures:
                raise self.error(f"{path} failed (503): busy")
        return self.inner(path, payload)


def test_a_healthy_bfloat16_compile_agrees_on_nearly_every_position() -> None:
    check = run(variant())
    assert (check.problem, check.unreachable, check.unanswered) == (None, None, 0)
    positions = sum(s.positions for s in check.scores)
    agreed = sum(s.agreed for s in check.scores)
    assert positions == 12 * 32
    assert agreed / positions > 0.99
    assert check.scoring == "promptLogprobs"
    assert check.reprompted == 0


def test_re_prompting_scores_exactly_what_prompt_logprobs_score() -> None:
    """Both ways of teacher forcing give the same figures: where the candidate cannot echo,
    re-prompting at each divergence reaches every position the echo scored."""
    echoed = run(variant(token_error_rate=0.1))
    reprompted = run(variant(token_error_rate=0.1, prompt_logprobs=False))
    assert reprompted.scoring == "reprompting"
    assert reprompted.reprompted == len(PROMPTS)
    assert [s.agreed for s in reprompted.scores] == [s.agreed for s in echoed.scores]
    assert [s.positions for s in reprompted.scores] == [s.positions for s in echoed.scores]
    assert [s.first_divergence for s in reprompted.scores] == [
        s.first_divergence for s in echoed.scores
    ]
    gaps = zip(reprompted.scores, echoed.scores, strict=True)
    assert all(a.logprob_gap == pytest.approx(b.logprob_gap, abs=1e-6) for a, b in gaps)


def test_chat_prompts_are_re_prompted_through_continue_final_message() -> None:
    check = run(variant(token_error_rate=0.2), PROMPTS[:2] + CHAT)
    assert check.reprompted == 1
    chat = check.scores[-1]
    assert chat.positions == 32
    assert chat.agreed < 32, "the broken compile's errors are seen in the chat answer too"


def test_the_worst_prompts_come_first_with_the_first_divergence_marked() -> None:
    check = run(variant(token_error_rate=0.2))
    examples = check.examples
    assert 0 < len(examples) <= 3
    assert [e.agreement for e in examples] == sorted(e.agreement for e in examples)
    for example in examples:
        at = example.diverges_at
        assert at is not None
        assert example.baseline[:at] == example.candidate[:at]
        assert example.baseline[at : at + 1] != example.candidate[at : at + 1]


def test_a_request_failing_for_now_is_asked_again() -> None:
    slept: list[float] = []
    flaky = Flaky(in_process(TinyModel("bfloat16")), failures=2, when="topic number 3")
    check = run(client(flaky), sleep=slept.append)
    assert check.unanswered == 0
    assert len(check.scores) == len(PROMPTS)
    assert slept == [0.5, 1.0] * 2, "the answer and the score each tried twice more"


def test_a_prompt_never_answered_is_counted_not_fatal() -> None:
    flaky = Flaky(in_process(TinyModel("bfloat16")), failures=ATTEMPTS, when="topic number 5")
    check = run(client(flaky), sleep=lambda _: None)
    assert (check.problem, check.unreachable) == (None, None)
    assert check.unanswered == 1
    assert len(check.scores) == len(PROMPTS) - 1


def test_a_variant_down_is_found_in_one_prompt() -> None:
    flaky = Flaky(in_process(TinyModel("bfloat16")), failures=10**6)
    check = run(client(flaky), sleep=lambda _: None)
    assert check.unreachable == "the candidate did not answer: /v1/completions failed (503): busy"
    assert flaky.calls == ATTEMPTS


def test_a_refusal_ends_the_check_naming_the_variant() -> None:
    refusing = Flaky(in_process(TinyModel("float32")), failures=1, error=RequestRefused)
    check = QualityRun(client(refusing), variant(), max_tokens=8).run(PROMPTS)
    assert check.problem == "the baseline: /v1/completions failed (503): busy"
    assert check.scores == ()


def test_an_empty_set_cannot_be_run() -> None:
    assert run(variant(), []).problem == "the prompt set holds no prompt"


def test_a_server_without_log_probabilities_ends_the_check_naming_it() -> None:
    def without_logprobs(path: str, payload: dict[str, Any]) -> Mapping[str, Any]:
        body = dict(in_process(TinyModel("bfloat16"))(path, payload))
        body["choices"] = [{**body["choices"][0], "logprobs": None}]
        return body

    check = run(client(without_logprobs), sleep=lambda _: pytest.fail("a refusal is not retried"))
    assert check.problem == (
        "the candidate: the completion holds no token log-probabilities (logprobs)"
    )


def test_a_server_refusing_echo_is_re_prompted() -> None:
    def refusing_echo(path: str, payload: dict[str, Any]) -> Mapping[str, Any]:
        if payload.get("echo"):
            raise RequestRefused(f"{path} refused (400): echo is not supported")
        return in_process(TinyModel("bfloat16", Outputs(token_error_rate=0.1)))(path, payload)

    check = run(client(refusing_echo))
    assert (check.problem, check.scoring) == (None, "reprompting")
    assert [s.agreed for s in check.scores] == [
        s.agreed for s in run(variant(token_error_rate=0.1)).scores
    ]
