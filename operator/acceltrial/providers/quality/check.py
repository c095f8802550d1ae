"""Running a prompt set against both variants: each prompt answered greedily by the baseline and
the candidate, the baseline's answer teacher-forced through the candidate, the scores and the
worst prompts gathered into a :class:`~acceltrial.engine.quality.check.QualityCheck`.

Teacher forcing, two ways (the report says which):

- ``promptLogprobs``: the candidate scores the prompt followed by the baseline's answer in one
  request (``echo`` with ``logprobs``), its own top-1 at every position;
- ``reprompting``, where the server cannot (no ``echo``, or it refuses the request) and for chat
  prompts (a chat template the operator does not know cannot be echoed): the candidate's own
  greedy answer agrees with the baseline's up to its first divergence; there the candidate is
  asked to continue from the prompt plus the baseline's answer up to and including that
  position (vLLM's ``continue_final_message`` for chat), as NxD Inference's logit matching
  re-runs from a divergent token, within ``REPROMPTS`` requests a prompt.

``token_agreement`` means the same both ways: the share of the baseline's answer positions
where the candidate's top-1 agrees.

A request that fails for now (5xx, a timeout, no connection) is asked again ``ATTEMPTS`` times;
a prompt still unanswered is counted (the gate's ``maxUnanswered``). A refusal (4xx; for the
echo request, re-prompting instead) or an answer without log-probabilities ends the check with
a problem naming the variant. Prompts run ``concurrency`` at a time; the first is asked alone,
so a variant that cannot be reached is found in one request, not in a hundred.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Literal, Protocol, TypeVar

from acceltrial.api.quality import EXAMPLE_CHARACTERS, QualityExample, Scoring
from acceltrial.engine.quality.check import QualityCheck
from acceltrial.engine.quality.compare import PromptScore, score_prompt
from acceltrial.engine.quality.prompts import Prompt
from acceltrial.providers.quality.openai import (
    Answer,
    AnswerError,
    RequestRefused,
    ScoringUnsupported,
    Token,
)

ATTEMPTS = 3
"""Tries per request when it fails for now."""
BACKOFF_SECONDS = 0.5
"""Wait before the second try; doubled before the third."""
REPROMPTS = 16
"""Continuations asked of the candidate per prompt when re-prompting: at a 10% token error
rate a 64-token answer diverges about 6 times; positions past the budget go unscored."""
EXAMPLES = 3
Variant = Literal["baseline", "candidate"]
_T = TypeVar("_T")


class Endpoint(Protocol):
    """One variant's OpenAI-compatible API (providers/quality/openai.py's client)."""

    def answer(self, prompt: Prompt, max_tokens: int) -> Answer: ...

    def score(self, prefix: str, continuation: str, positions: int) -> list[Token]: ...

    def continue_answer(self, prompt: Prompt, partial: str, max_tokens: int) -> Answer: ...


class _Stop(Exception):
    """The check cannot run at all (a refusal, an answer without log-probabilities)."""


class _Unanswered(Exception):
    """A request still failed after its tries."""

    def __init__(self, variant: Variant, error: AnswerError) -> None:
        super().__init__(f"the {variant} did not answer: {error}")


@dataclass(frozen=True)
class _Scored:
    prompt: Prompt
    score: PromptScore
    baseline: Answer
    candidate: Answer


@dataclass
class QualityRun:
    """One run of a prompt set (``run``), with its settings."""

    baseline: Endpoint
    candidate: Endpoint
    max_tokens: int = 64
    concurrency: int = 8
    sleep: Callable[[float], None] = time.sleep
    _echo: bool = field(default=True, init=False)
    """Whether the candidate scores a given continuation; False after it said it cannot."""
    _reprompted: int = field(default=0, init=False)
    """Prompts teacher-forced by re-prompting (chat prompts, and all once echo failed)."""
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def run(self, prompts: Sequence[Prompt]) -> QualityCheck:
        if not prompts:
            return QualityCheck(problem="the prompt set holds no prompt")
        try:
            first = self._prompt(prompts[0])
        except _Stop as stop:
            return QualityCheck(problem=str(stop))
        except _Unanswered as unanswered:
            return QualityCheck(unreachable=str(unanswered))
        try:
            rest = self._concurrently(prompts[1:])
        except _Stop as stop:
            return QualityCheck(problem=str(stop))
        scored = [first, *(r for r in rest if r is not None)]
        return QualityCheck(
            scores=tuple(s.score for s in scored),
            unanswered=sum(r is None for r in rest),
            scoring=self._scoring(),
            reprompted=self._reprompted,
            examples=worst_examples(scored),
        )

    def _concurrently(self, prompts: Sequence[Prompt]) -> list[_Scored | None]:
        def one(prompt: Prompt) -> _Scored | None:
            try:
                return self._prompt(prompt)
            except _Unanswered:
                return None

        with ThreadPoolExecutor(max(1, self.concurrency), "quality") as pool:
            return list(pool.map(one, prompts))

    def _scoring(self) -> Scoring:
        """How the completions prompts were teacher-forced: by prompt log-probabilities unless
        the candidate could not give them (chat prompts are re-prompted either way)."""
        return "promptLogprobs" if self._echo else "reprompting"

    def _prompt(self, prompt: Prompt) -> _Scored:
        baseline = self._ask("baseline", lambda: self.baseline.answer(prompt, self.max_tokens))
        candidate = self._ask("candidate", lambda: self.candidate.answer(prompt, self.max_tokens))
        forced = self._teacher_forced(prompt, baseline, candidate)
        met = None
        if prompt.expected is not None:
            met = (prompt.expected.met_by(baseline.text), prompt.expected.met_by(candidate.text))
        score = score_prompt(baseline.tokens, forced, met, chat=prompt.chat)
        return _Scored(prompt, score, baseline, candidate)

    def _teacher_forced(self, prompt: Prompt, baseline: Answer, candidate: Answer) -> list[Token]:
        """The candidate's top-1 at each position of the baseline's answer."""
        if not baseline.tokens:
            return []
        if self._echo and prompt.text is not None:
            text = _joined(baseline.tokens)
            positions = len(baseline.tokens)
            try:
                return self._ask(
                    "candidate", lambda: self.candidate.score(prompt.text or "", text, positions)
                )
            except _Stop as stop:
                # A server that refuses echo (400) cannot score a continuation either.
                if not isinstance(stop.__cause__, ScoringUnsupported | RequestRefused):
                    raise
                self._echo = False
        return self._reprompt(prompt, baseline.tokens, candidate.tokens)

    def _reprompt(
        self, prompt: Prompt, reference: Sequence[Token], own: Sequence[Token]
    ) -> list[Token]:
        """Teacher forcing by re-prompting at each divergence (see the module docstring)."""
        with self._lock:
            self._reprompted += 1
        scored: list[Token] = []
        continuation = list(own)
        for _ in range(REPROMPTS + 1):
            at = len(scored)
            agreed = 0
            while agreed < len(continuation) and at + agreed < len(reference):
                scored.append(continuation[agreed])
                if continuation[agreed][0] != reference[at + agreed][0]:
                    break
                agreed += 1
            if len(scored) >= len(reference) or len(scored) == at + len(continuation):
                # The end of the reference, or an answer that stopped short (its end of text).
                return scored
            partial = _joined(reference[: len(scored)])
            left = len(reference) - len(scored)
            ask = functools.partial(self.candidate.continue_answer, prompt, partial, left)
            continuation = list(self._ask("candidate", ask).tokens)
        return scored

    def _ask(self, variant: Variant, request: Callable[[], _T]) -> _T:
        """``request``'s answer, tried ``ATTEMPTS`` times while it fails for now."""
        for attempt in range(ATTEMPTS):
            try:
                return request()
            except AnswerError as error:
                if not error.temporary:
                    raise _Stop(f"the {variant}: {error}") from error
                if attempt == ATTEMPTS - 1:
                    raise _Unanswered(variant, error) from error
                self.sleep(BACKOFF_SECONDS * 2**attempt)
        raise AssertionError("unreachable")  # pragma: no cover


def _joined(tokens: Sequence[Token]) -> str:
    return "".join(token for token, _ in tokens)


def worst_examples(scored: Sequence[_Scored]) -> tuple[QualityExample, ...]:
    """The prompts where the candidate agreed least (earliest divergence first on a tie), at
    most ``EXAMPLES``, only those where the answers differ."""

    def agreement(item: _Scored) -> float:
        score = item.score
        return score.agreed / score.positions if score.positions else 1.0

    differing = [s for s in scored if s.baseline.text != s.candidate.text]
    ranked = sorted(differing, key=lambda s: (agreement(s), s.score.first_divergence or 0))
    return tuple(_example(s, agreement(s)) for s in ranked[:EXAMPLES])


def _example(item: _Scored, agreement: float) -> QualityExample:
    baseline, candidate = item.baseline.text, item.candidate.text
    prompt = item.prompt
    asked = prompt.text if prompt.text is not None else prompt.messages[-1][1]
    return QualityExample(
        prompt=_cut(asked),
        baseline=_cut(baseline),
        candidate=_cut(candidate),
        agreement=round(agreement, 6),
        diverges_at=len(os.path.commonprefix([baseline, candidate])),  # noqa: RUF071 characters
    )


def _cut(text: str) -> str:
    return text if len(text) <= EXAMPLE_CHARACTERS else text[:EXAMPLE_CHARACTERS] + "..."
