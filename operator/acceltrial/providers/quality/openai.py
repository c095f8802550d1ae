"""The OpenAI-compatible API as vLLM and TGI serve it, for the quality check: a greedy answer with
its log-probabilities, and a given continuation scored token by token (teacher forcing).

- ``answer``: ``POST /v1/completions`` (a prompt) or ``/v1/chat/completions`` (messages) with
  ``temperature: 0``, ``max_tokens`` and ``logprobs`` (1, or ``true`` with ``top_logprobs: 1``
  for chat); the answer's tokens with their log-probabilities.
- ``score``: ``POST /v1/completions`` with the prompt followed by the baseline's answer,
  ``echo: true``, ``logprobs: 1`` and ``max_tokens: 1``: the server returns the log-probabilities
  of the prompt's tokens, and ``top_logprobs`` at each position is the candidate's own top-1
  there. A server that returns no prompt log-probabilities (no ``echo``) raises
  :class:`ScoringUnsupported`, and the caller re-prompts at each divergence instead.

Response shapes (the OpenAI API reference, which vLLM's ``entrypoints/openai`` protocol follows):
a completion choice's ``logprobs`` holds ``tokens``, ``token_logprobs`` (None for the first
prompt token), ``top_logprobs`` (a list of ``{token: logprob}``, None where absent) and
``text_offset``; a chat choice's ``logprobs.content`` is a list of ``{token, logprob, bytes,
top_logprobs: [{token, logprob, bytes}]}``.

Every failure is an :class:`AnswerError` whose message says what happened; only a refused
request (4xx but 408 and 429) is permanent.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from http.client import HTTPResponse
from typing import Any

from acceltrial.engine.quality.prompts import Prompt

Token = tuple[str, float]
"""A token and its log-probability."""
RETRYABLE_STATUS = frozenset({408, 429})


class AnswerError(Exception):
    """A model server did not answer as asked."""

    temporary = True


class Unreachable(AnswerError):
    """No connection to the server (no such host, refused, reset): asking again may help."""


class RequestRefused(AnswerError):
    """The server refused the request (4xx): asking again cannot help."""

    temporary = False


class LogprobsMissing(AnswerError):
    """The server answered in the API's shape without the log-probabilities asked for (a server
    started without them, or one that ignores ``logprobs``): asking again cannot help."""

    temporary = False


class ScoringUnsupported(AnswerError):
    """The server cannot score a given continuation (no prompt log-probabilities)."""

    temporary = False


@dataclass(frozen=True)
class Generated:
    """A generated answer's length and, when streamed, its timing."""

    tokens: int
    first_token_seconds: float | None = None
    """Time to first token, from the request's start."""
    token_gap_seconds: float | None = None
    """The mean gap between the answer's later tokens (inter-token latency)."""


@dataclass(frozen=True)
class Answer:
    """A greedy answer: its text and its tokens with their log-probabilities."""

    text: str
    tokens: tuple[Token, ...]


Transport = Callable[[str, dict[str, Any]], Mapping[str, Any]]
"""``(path, JSON payload) -> JSON body``, raising :class:`AnswerError`: the seam where a test or
a benchmark answers without HTTP, as httpx's ``MockTransport`` does."""


class OpenAiClient:
    """One variant's OpenAI-compatible endpoint (``base_url`` ends before ``/v1``), over HTTP
    unless a ``transport`` is given."""

    def __init__(
        self,
        base_url: str,
        model: str | None = None,
        timeout: float = 30.0,
        transport: Transport | None = None,
    ) -> None:
        self.base_url, self.model, self.timeout = base_url.rstrip("/"), model, timeout
        self.transport = transport

    def answer(self, prompt: Prompt, max_tokens: int) -> Answer:
        """The greedy answer to ``prompt`` with each token's log-probability."""
        if prompt.chat:
            body = self._post("/v1/chat/completions", {
                "messages": [{"role": r, "content": c} for r, c in prompt.messages],
                "temperature": 0, "max_tokens": max_tokens, "logprobs": True,
                "top_logprobs": 1,
            })  # fmt: skip
            return chat_answer(body)
        body = self._post("/v1/completions", {
            "prompt": prompt.text, "temperature": 0, "max_tokens": max_tokens, "logprobs": 1,
        })  # fmt: skip
        return completion_answer(body)

    def continue_answer(self, prompt: Prompt, partial: str, max_tokens: int) -> Answer:
        """The greedy continuation of ``prompt`` followed by ``partial`` (the start of an
        answer): for chat, ``partial`` as an open assistant message (vLLM's
        ``continue_final_message``, without a generation prompt)."""
        if prompt.chat:
            messages = [{"role": r, "content": c} for r, c in prompt.messages]
            body = self._post("/v1/chat/completions", {
                "messages": [*messages, {"role": "assistant", "content": partial}],
                "continue_final_message": True, "add_generation_prompt": False,
                "temperature": 0, "max_tokens": max_tokens, "logprobs": True, "top_logprobs": 1,
            })  # fmt: skip
            return chat_answer(body)
        body = self._post("/v1/completions", {
            "prompt": (prompt.text or "") + partial, "temperature": 0, "max_tokens": max_tokens,
            "logprobs": 1,
        })  # fmt: skip
        return completion_answer(body)

    def generate(self, prompt: str, max_tokens: int, stream: bool = False) -> Generated:
        """Ask for ``max_tokens`` generated after ``prompt`` (``ignore_eos``, as vLLM's own
        benchmark asks, so every answer is that long): the tokens the server says it generated
        (``usage.completion_tokens``; ``max_tokens`` when it does not say) and, streamed, when
        the first token came and the mean gap between the others."""
        payload = {"prompt": prompt, "temperature": 0, "max_tokens": max_tokens,
                   "ignore_eos": True}  # fmt: skip
        if stream and self.transport is None:
            return self._streamed(payload, max_tokens)
        body = self._post("/v1/completions", payload)
        _choice(body)
        return Generated(_completion_tokens(body, max_tokens))

    def _streamed(self, payload: dict[str, Any], max_tokens: int) -> Generated:
        """``stream: true``: server-sent events, each ``data: {chunk}``, ``data: [DONE]`` last."""
        payload = {**payload, "stream": True, "stream_options": {"include_usage": True}}
        if self.model is not None:
            payload = {"model": self.model, **payload}
        sent, times, tokens = time.monotonic(), [], max_tokens
        with self._open("/v1/completions", payload) as reply:
            for raw in reply:
                line = raw.strip()
                if not line.startswith(b"data:"):
                    continue
                data = line[len(b"data:") :].strip()
                if data == b"[DONE]":
                    break
                chunk = _json_object("/v1/completions", data)
                choices = chunk.get("choices") or []
                if choices and isinstance(choices[0], dict) and choices[0].get("text"):
                    times.append(time.monotonic())
                tokens = _completion_tokens(chunk, tokens)
        if not times:
            raise AnswerError("/v1/completions: the stream held no token")
        gaps = (times[-1] - times[0]) / (len(times) - 1) if len(times) > 1 else None
        return Generated(tokens, times[0] - sent, gaps)

    def score(self, prefix: str, continuation: str, positions: int) -> list[Token]:
        """The server's own top-1 token and log-probability at each of the last ``positions``
        tokens of ``prefix + continuation`` (teacher forcing); ScoringUnsupported when it
        returns no prompt log-probabilities."""
        body = self._post("/v1/completions", {
            "prompt": prefix + continuation, "temperature": 0, "max_tokens": 1,
            "logprobs": 1, "echo": True,
        })  # fmt: skip
        return scored_continuation(body, positions)

    def _post(self, path: str, payload: dict[str, Any]) -> Mapping[str, Any]:
        if self.model is not None:
            payload = {"model": self.model, **payload}
        if self.transport is not None:
            return self.transport(path, payload)
        with self._open(path, payload) as reply:
            raw = reply.read()
        return _json_object(path, raw)

    @contextmanager
    def _open(self, path: str, payload: dict[str, Any]) -> Iterator[HTTPResponse]:
        """The server's reply to ``POST path``, open for reading; AnswerError when it fails."""
        data = json.dumps(payload).encode()
        request = urllib.request.Request(
            self.base_url + path, data=data, method="POST",
            headers={"Content-Type": "application/json", "Accept": "application/json"},
        )  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as reply:
                yield reply
        except urllib.error.HTTPError as error:
            said = _error_text(error)
            if 400 <= error.code < 500 and error.code not in RETRYABLE_STATUS:
                raise RequestRefused(f"{path} refused ({error.code}): {said}") from None
            raise AnswerError(f"{path} failed ({error.code}): {said}") from None
        except TimeoutError:
            raise AnswerError(f"{path}: no answer within {self.timeout:g}s") from None
        except urllib.error.URLError as error:
            raise Unreachable(f"{path}: cannot reach {self.base_url}: {error.reason}") from None


def _json_object(path: str, raw: bytes) -> Mapping[str, Any]:
    try:
        body = json.loads(raw)
    except json.JSONDecodeError:
        raise AnswerError(f"{path}: the answer is not JSON") from None
    if not isinstance(body, dict):
        raise AnswerError(f"{path}: the answer is not a JSON object")
    return body


def _completion_tokens(body: Mapping[str, Any], otherwise: int) -> int:
    usage = body.get("usage")
    generated = usage.get("completion_tokens") if isinstance(usage, dict) else None
    return generated if isinstance(generated, int) and generated >= 0 else otherwise


def _error_text(error: urllib.error.HTTPError) -> str:
    """The server's own words: vLLM's ``message``, or OpenAI's ``error.message``."""
    try:
        body = json.loads(error.read() or b"{}")
    except (json.JSONDecodeError, OSError):
        return str(error.reason or "")
    if not isinstance(body, dict):
        return str(error.reason or "")
    nested = body.get("error")
    message = body.get("message") or (nested.get("message") if isinstance(nested, dict) else nested)
    return str(message or error.reason or "")


def _choice(body: Mapping[str, Any]) -> Mapping[str, Any]:
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise AnswerError("the answer holds no choices")
    return choices[0]


def completion_answer(body: Mapping[str, Any]) -> Answer:
    """A completion's text and tokens (``logprobs.tokens`` with ``token_logprobs``)."""
    choice = _choice(body)
    logprobs = choice.get("logprobs") or {}
    tokens = logprobs.get("tokens")
    values = logprobs.get("token_logprobs")
    if not isinstance(tokens, list) or not isinstance(values, list) or len(tokens) != len(values):
        raise LogprobsMissing("the completion holds no token log-probabilities (logprobs)")
    pairs = tuple((str(t), float(v)) for t, v in zip(tokens, values, strict=True) if v is not None)
    return Answer(str(choice.get("text") or ""), pairs)


def chat_answer(body: Mapping[str, Any]) -> Answer:
    """A chat answer's text and tokens (``logprobs.content[].token`` and ``.logprob``)."""
    choice = _choice(body)
    content = (choice.get("logprobs") or {}).get("content")
    if not isinstance(content, list):
        raise LogprobsMissing("the chat answer holds no token log-probabilities (logprobs)")
    pairs = tuple((str(c["token"]), float(c["logprob"])) for c in content if isinstance(c, dict))
    message = choice.get("message") or {}
    return Answer(str(message.get("content") or ""), pairs)


def scored_continuation(body: Mapping[str, Any], positions: int) -> list[Token]:
    """The server's top-1 (token, log-probability) at each of the last ``positions`` echoed
    prompt tokens; the generated token after them is not part of the echo's scoring."""
    choice = _choice(body)
    logprobs = choice.get("logprobs") or {}
    tops = logprobs.get("top_logprobs")
    tokens = logprobs.get("tokens")
    if not isinstance(tops, list) or not isinstance(tokens, list) or len(tops) < positions + 1:
        raise ScoringUnsupported(
            "the server returned no log-probabilities of the prompt (echo with logprobs): it "
            "cannot score a given continuation"
        )
    # The echo holds the prompt's tokens, then the one generated (max_tokens: 1).
    window: Sequence[Any] = tops[-(positions + 1) : -1]
    scored = []
    for top in window:
        if not isinstance(top, dict) or not top:
            raise ScoringUnsupported("a position of the echoed prompt has no top log-probability")
        token, value = max(top.items(), key=lambda item: float(item[1]))
        scored.append((str(token), float(value)))
    return scored
