"""The fleet's answers in the OpenAI-compatible JSON vLLM serves: a completion (with
``logprobs``, and with ``echo`` the prompt's tokens scored first) and a chat completion.

Shapes as the OpenAI API reference and vLLM's ``entrypoints/openai`` protocol give them (the
fixtures in tests/fixtures/openai follow the same sources): ``choices[].text`` and
``choices[].logprobs`` with ``tokens``, ``token_logprobs``, ``top_logprobs`` (one ``{token:
logprob}`` map a position, null for the prompt's first token) and ``text_offset``;
``choices[].message.content`` and ``choices[].logprobs.content[]`` with ``token``, ``logprob``,
``bytes`` and ``top_logprobs[]``; ``usage``. A variant whose ``outputs.promptLogprobs`` is false
answers an ``echo`` without the prompt's tokens, as a server that cannot score a given
continuation does.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from acceltrial_testbed.sandbox.fleet.language_model import Step, TinyModel, tokenize

CREATED = 1765000000
"""A fixed ``created`` stamp: the answers are a function of the request."""


def _id(prefix: str, request: Mapping[str, Any]) -> str:
    return prefix + hashlib.sha256(repr(sorted(request.items())).encode()).hexdigest()[:24]


def completion(model: TinyModel, name: str, request: Mapping[str, Any]) -> dict[str, Any]:
    """``POST /v1/completions``: greedy, ``max_tokens`` long, with log-probabilities when asked;
    with ``echo`` (and prompt log-probabilities) the prompt's tokens scored first."""
    prompt = str(request.get("prompt") or "")
    generated = model.generate(prompt, int(request.get("max_tokens") or 16))
    steps: list[Step | None] = list(generated)
    text = "".join(step.token for step in generated)
    echoed = bool(request.get("echo")) and model.outputs.prompt_logprobs
    if echoed:
        steps = model.score(prompt) + steps
        text = prompt + text
    choice: dict[str, Any] = {"index": 0, "text": text, "logprobs": None,
                              "finish_reason": "length", "stop_reason": None}  # fmt: skip
    if request.get("logprobs") is not None:
        choice["logprobs"] = _completion_logprobs(steps, prompt if echoed else "")
    return _envelope(
        "cmpl-",
        "text_completion",
        name,
        request,
        choice=choice,
        prompt=prompt,
        completion_tokens=len(generated),
    )


def _completion_logprobs(steps: Sequence[Step | None], prompt: str) -> dict[str, Any]:
    tokens: list[str] = []
    values: list[float | None] = []
    tops: list[dict[str, float] | None] = []
    offsets: list[int] = []
    at = 0
    words = iter(prompt.split())
    for step in steps:
        if step is None:  # the prompt's first token: nothing precedes it
            first = next(words, "")
            tokens.append(first)
            values.append(None)
            tops.append(None)
            offsets.append(at)
            at += len(first)
            continue
        tokens.append(step.token)
        values.append(step.logprob)
        tops.append({step.top_token: step.top_logprob})
        offsets.append(at)
        at += len(step.token)
    return {"text_offset": offsets, "token_logprobs": values, "tokens": tokens,
            "top_logprobs": tops}  # fmt: skip


class RequestError(ValueError):
    """A request vLLM would refuse (400), in its words."""


def chat_completion(model: TinyModel, name: str, request: Mapping[str, Any]) -> dict[str, Any]:
    """``POST /v1/chat/completions``: the messages as one prompt (role and content, a line
    each), greedy, with ``logprobs.content`` when ``logprobs`` is true. With
    ``continue_final_message`` (and ``add_generation_prompt: false``, as vLLM requires) the last
    message is left open and continued: its content follows the others' lines as it is."""
    messages = list(request.get("messages") or [])
    continued = bool(request.get("continue_final_message"))
    if continued and request.get("add_generation_prompt", True):
        raise RequestError(
            "Cannot set both `continue_final_message` and `add_generation_prompt` to True."
        )
    tail = str(messages.pop().get("content") or "") if continued and messages else ""
    prompt = "\n".join(f"{m.get('role')}: {m.get('content')}" for m in messages) + tail
    generated = model.generate(prompt, int(request.get("max_tokens") or 16))
    text = "".join(step.token for step in generated).strip()
    choice: dict[str, Any] = {
        "index": 0, "message": {"role": "assistant", "content": text, "tool_calls": []},
        "logprobs": None, "finish_reason": "length", "stop_reason": None,
    }  # fmt: skip
    if request.get("logprobs"):
        choice["logprobs"] = {"content": [_chat_token(step) for step in generated]}
    return _envelope(
        "chatcmpl-",
        "chat.completion",
        name,
        request,
        choice=choice,
        prompt=prompt,
        completion_tokens=len(generated),
    )


def _envelope(
    prefix: str, kind: str, name: str, request: Mapping[str, Any], *, choice: dict[str, Any],
    prompt: str, completion_tokens: int,
) -> dict[str, Any]:  # fmt: skip
    """The response around one choice: id, object, model and usage."""
    prompt_tokens = len(tokenize(prompt))
    return {
        "id": _id(prefix, request), "object": kind, "created": CREATED, "model": name,
        "choices": [choice],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }  # fmt: skip


def _chat_token(step: Step) -> dict[str, Any]:
    raw = list(step.token.encode())
    top = {
        "token": step.top_token,
        "logprob": step.top_logprob,
        "bytes": list(step.top_token.encode()),
    }
    return {"token": step.token, "logprob": step.logprob, "bytes": raw, "top_logprobs": [top]}


_PIECE = re.compile(r"\s*\S+|\s+$")


def stream_chunks(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A completion's answer as ``stream: true`` sends it: one chunk per generated token (the
    answer's text cut before each word), the last with its ``finish_reason``, then one with
    the ``usage`` and no choice (``stream_options.include_usage``)."""
    choice = body["choices"][0]
    text = str(choice.get("text") or choice.get("message", {}).get("content") or "")
    pieces = _PIECE.findall(text) or [""]
    head = {key: body[key] for key in ("id", "object", "created", "model")}
    chunks = [
        {**head, "choices": [{"index": 0, "text": piece, "logprobs": None,
                              "finish_reason": None}]}
        for piece in pieces
    ]  # fmt: skip
    chunks[-1]["choices"][0]["finish_reason"] = choice.get("finish_reason", "length")
    return [*chunks, {**head, "choices": [], "usage": body["usage"]}]
