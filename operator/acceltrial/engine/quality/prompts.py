"""A quality prompt set as the user writes it: JSON Lines, one prompt a line, bounded.

Pure: text in, prompts out, or a :class:`PromptsError` naming the line and the fix. A line is
``{"prompt": "..."}`` (the completions API) or ``{"messages": [{"role": ..., "content": ...}]}``
(the chat API), with an optional ``"expected"``: a string the answer must contain, or
``{"regex": "..."}`` a pattern it must match. Blank lines and lines starting with ``#`` are
skipped, so a set can carry its own provenance.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

MAX_PROMPTS = 2000
"""The most prompts a set may hold: 2,000 prompts of 64 tokens take a few minutes per variant at
8 in flight; a larger set belongs in an offline evaluation, not a gate before traffic moves."""
MAX_BYTES = 1024 * 1024
"""The largest set: a ConfigMap holds at most 1 MiB."""
ROLES = ("system", "user", "assistant")


class PromptsError(ValueError):
    """A prompt set that cannot be used, with the line and the fix."""


@dataclass(frozen=True)
class Expected:
    """What an answer must hold to meet a task check: a substring, or a regex match."""

    contains: str | None = None
    regex: str | None = None

    def met_by(self, answer: str) -> bool:
        if self.regex is not None:
            return re.search(self.regex, answer) is not None
        return self.contains is not None and self.contains in answer


@dataclass(frozen=True)
class Prompt:
    """One prompt: ``text`` for the completions API or ``messages`` for the chat API."""

    line: int
    text: str | None = None
    messages: tuple[tuple[str, str], ...] = ()
    """(role, content) pairs, in order."""
    expected: Expected | None = None

    @property
    def chat(self) -> bool:
        return self.text is None


def parse_prompts(text: str) -> list[Prompt]:
    """The prompts of a JSON Lines set; PromptsError on the first line that cannot be used."""
    size = len(text.encode())
    if size > MAX_BYTES:
        raise PromptsError(
            f"the prompt set is {size:,} bytes; at most {MAX_BYTES:,} (1 MiB) fit: use fewer "
            "or shorter prompts"
        )
    prompts = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        prompts.append(_prompt(number, stripped))
        if len(prompts) > MAX_PROMPTS:
            raise PromptsError(
                f"line {number}: the prompt set holds more than {MAX_PROMPTS} prompts; keep at "
                f"most {MAX_PROMPTS}"
            )
    if not prompts:
        raise PromptsError(
            'the prompt set holds no prompt: write one JSON object a line, {"prompt": "..."} or '
            '{"messages": [{"role": "user", "content": "..."}]}'
        )
    return prompts


def _prompt(number: int, line: str) -> Prompt:
    try:
        raw = json.loads(line)
    except json.JSONDecodeError as error:
        raise PromptsError(
            f"line {number}: not JSON ({error.msg} at column {error.colno})"
        ) from None
    if not isinstance(raw, dict):
        raise PromptsError(f"line {number}: write a JSON object, not {type(raw).__name__}")
    unknown = sorted(set(raw) - {"prompt", "messages", "expected"})
    if unknown:
        raise PromptsError(
            f"line {number}: unknown key {unknown[0]!r}; a line holds prompt or messages, and "
            "optionally expected"
        )
    expected = _expected(number, raw.get("expected"))
    if ("prompt" in raw) == ("messages" in raw):
        raise PromptsError(
            f"line {number}: give exactly one of prompt (completions) or messages (chat)"
        )
    if "prompt" in raw:
        if not isinstance(raw["prompt"], str) or not raw["prompt"]:
            raise PromptsError(f"line {number}: prompt must be a non-empty string")
        return Prompt(number, text=raw["prompt"], expected=expected)
    return Prompt(number, messages=_messages(number, raw["messages"]), expected=expected)


def _messages(number: int, raw: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(raw, Sequence) or isinstance(raw, str) or not raw:
        raise PromptsError(f"line {number}: messages must be a non-empty list of messages")
    messages = []
    for index, message in enumerate(raw):
        where = f"line {number}: messages[{index}]"
        if not isinstance(message, Mapping):
            raise PromptsError(f"{where} must be an object with role and content")
        role, content = message.get("role"), message.get("content")
        if role not in ROLES:
            raise PromptsError(f"{where}.role must be one of {', '.join(ROLES)}")
        if not isinstance(content, str):
            raise PromptsError(f"{where}.content must be a string")
        messages.append((str(role), content))
    return tuple(messages)


def _expected(number: int, raw: Any) -> Expected | None:
    if raw is None:
        return None
    if isinstance(raw, str) and raw:
        return Expected(contains=raw)
    if isinstance(raw, Mapping) and set(raw) == {"regex"} and isinstance(raw["regex"], str):
        try:
            re.compile(raw["regex"])
        except re.error as error:
            raise PromptsError(f"line {number}: expected.regex does not compile: {error}") from None
        return Expected(regex=raw["regex"])
    raise PromptsError(f'line {number}: expected must be a non-empty string or {{"regex": "..."}}')
