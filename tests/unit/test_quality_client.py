"""The OpenAI-compatible client of the quality check against responses written from vLLM's and
OpenAI's documented JSON (tests/fixtures/openai/README.md cites them), and against a local
server for what it sends and how it fails."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest

from acceltrial.engine.quality.compare import score_prompt
from acceltrial.engine.quality.prompts import parse_prompts
from acceltrial.providers.quality.openai import (
    AnswerError,
    OpenAiClient,
    RequestRefused,
    ScoringUnsupported,
    chat_answer,
    completion_answer,
    scored_continuation,
)
from tests.conftest import REPO

FIXTURES = REPO / "tests" / "fixtures" / "openai"


def fixture(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    return loaded


def test_a_completion_gives_its_text_and_each_tokens_log_probability() -> None:
    answer = completion_answer(fixture("completion-logprobs.json"))

    assert answer.text == " Paris.\n"
    assert answer.tokens == ((" Paris", -0.0123), (".", -0.4055), ("\n", -1.204))


def test_a_chat_answer_gives_its_content_and_tokens() -> None:
    answer = chat_answer(fixture("chat-logprobs.json"))

    assert answer.text == "84"
    assert answer.tokens == (("84", -0.0021),)


def test_an_echo_scores_the_continuation_with_the_servers_own_top_1() -> None:
    """The baseline answered " France." to "Paris is the capital of"; the candidate, teacher
    forced, would have said " France" then ",": the second position diverges."""
    scored = scored_continuation(fixture("completion-echo.json"), positions=2)

    assert scored == [(" France", -0.05), (",", -0.45)]
    baseline = [(" France", -0.04), (".", -0.7)]
    score = score_prompt(baseline, scored)
    assert (score.agreed, score.first_divergence) == (1, 1)
    assert score.logprob_gap == pytest.approx(0.01 + 0.25)


def test_a_server_without_prompt_log_probabilities_cannot_score() -> None:
    with pytest.raises(ScoringUnsupported, match="cannot score a given continuation"):
        scored_continuation(fixture("completion-no-echo.json"), positions=2)


def test_an_answer_without_log_probabilities_is_an_error_naming_them() -> None:
    body = fixture("completion-logprobs.json")
    body["choices"][0]["logprobs"] = None
    with pytest.raises(AnswerError, match=r"no token log-probabilities \(logprobs\)"):
        completion_answer(body)


class _Server(BaseHTTPRequestHandler):
    answers: ClassVar[dict[str, tuple[int, bytes]]] = {}
    seen: ClassVar[list[tuple[str, dict[str, Any]]]] = []

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.seen.append((self.path, json.loads(self.rfile.read(length))))
        status, body = self.answers[self.path]
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    _Server.answers, _Server.seen = {}, []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Server)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_it_asks_greedily_with_log_probabilities(server: str) -> None:
    raw = json.dumps(fixture("completion-logprobs.json")).encode()
    chat = json.dumps(fixture("chat-logprobs.json")).encode()
    _Server.answers = {"/v1/completions": (200, raw), "/v1/chat/completions": (200, chat)}
    client = OpenAiClient(server, model="llama3")
    text, messages = parse_prompts(
        '{"prompt": "The capital of France is"}\n'
        '{"messages": [{"role": "user", "content": "12 x 7?"}]}'
    )

    assert client.answer(text, 3).tokens[0] == (" Paris", -0.0123)
    assert client.answer(messages, 8).text == "84"

    (path, sent), (chat_path, chat_sent) = _Server.seen
    assert path == "/v1/completions"
    assert sent == {"model": "llama3", "prompt": "The capital of France is", "temperature": 0,
                    "max_tokens": 3, "logprobs": 1}  # fmt: skip
    assert chat_path == "/v1/chat/completions"
    assert chat_sent["messages"] == [{"role": "user", "content": "12 x 7?"}]
    assert (chat_sent["logprobs"], chat_sent["top_logprobs"], chat_sent["temperature"]) == (
        True, 1, 0,
    )  # fmt: skip


def test_a_refusal_is_permanent_and_a_server_error_temporary(server: str) -> None:
    _Server.answers = {
        "/v1/completions": (400, b'{"object": "error", "message": "logprobs > max_logprobs"}'),
        "/v1/chat/completions": (503, b'{"error": {"message": "overloaded"}}'),
    }
    client = OpenAiClient(server)
    text, messages = parse_prompts(
        '{"prompt": "a"}\n{"messages": [{"role": "user", "content": "b"}]}'
    )

    with pytest.raises(
        RequestRefused, match=r"refused \(400\): logprobs > max_logprobs"
    ) as refused:
        client.answer(text, 4)
    assert not refused.value.temporary
    with pytest.raises(AnswerError, match=r"failed \(503\): overloaded") as failed:
        client.answer(messages, 4)
    assert failed.value.temporary


def test_an_unreachable_server_is_a_temporary_error() -> None:
    client = OpenAiClient("http://127.0.0.1:9", timeout=2)
    (prompt,) = parse_prompts('{"prompt": "a"}')
    with pytest.raises(AnswerError, match="cannot reach") as failed:
        client.answer(prompt, 4)
    assert failed.value.temporary
