"""``status.quality``: what became of the quality check (``spec.quality``), the figures each
criterion was judged on and the prompts where the candidate strayed furthest, for the report."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from acceltrial.api.base import ApiModel
from acceltrial.api.spec.quality import QualityMetric

QualityVerdict = Literal["Pass", "Fail", "Inconclusive"]
Scoring = Literal["promptLogprobs", "reprompting"]
"""How the baseline's answers were teacher-forced through the candidate: scored in one request
(``echo`` with ``logprobs``), or by asking it to continue at each divergence."""
EXAMPLE_CHARACTERS = 600
"""The longest prompt or answer text kept in an example."""


class QualityCriterionResult(ApiModel):
    """One quality criterion: the figure, its interval and the verdict."""

    name: str = Field(max_length=63)
    metric: QualityMetric
    verdict: QualityVerdict
    value: float | None = None
    """The figure over the prompts (for a relative limit, the candidate's over the
    baseline's); none when nothing measured it."""
    low: float | None = None
    """The interval's low end (the bootstrap over prompts, at confidence)."""
    high: float | None = None
    confidence: float | None = Field(default=None, ge=0, le=1)
    reason: str = Field(max_length=1024)
    """The figure, its interval and the limit in words."""


class QualityExample(ApiModel):
    """One prompt where the candidate strayed furthest from the baseline."""

    prompt: str = Field(max_length=EXAMPLE_CHARACTERS + 3)
    baseline: str = Field(max_length=EXAMPLE_CHARACTERS + 3)
    """The baseline's greedy answer."""
    candidate: str = Field(max_length=EXAMPLE_CHARACTERS + 3)
    """The candidate's greedy answer."""
    agreement: float = Field(ge=0, le=1)
    """The share of the baseline's answer positions where the candidate agreed."""
    diverges_at: int | None = Field(default=None, ge=0)
    """The character where the two answers first differ; none where they agree."""


class QualityStatus(ApiModel):
    """The latest quality check."""

    verdict: QualityVerdict
    step: int = Field(ge=0)
    """The step it ran at: 0 before any user request, not even a mirrored one."""
    checked_at: datetime
    prompts: int = Field(ge=0)
    """Prompts asked of both variants."""
    unanswered: int = Field(default=0, ge=0)
    """Prompts either variant left unanswered after retries."""
    scoring: Scoring | None = None
    """How the completions prompts' baseline answers were teacher-forced through the
    candidate: by its prompt log-probabilities, or by re-prompting where it gives none."""
    reprompted: int = Field(default=0, ge=0)
    """Prompts teacher-forced by re-prompting: chat prompts (a chat template the operator does
    not know cannot be echoed), and every prompt where the candidate gives no prompt
    log-probabilities."""
    reason: str = Field(max_length=4096)
    """The verdict in words: the failing criterion and its figure, or why it cannot tell."""
    criteria: list[QualityCriterionResult] = Field(default_factory=list, max_length=8)
    examples: list[QualityExample] = Field(default_factory=list, max_length=3)
    """The prompts where the candidate agreed least, side by side."""
