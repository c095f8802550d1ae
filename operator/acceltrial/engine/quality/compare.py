"""Whether the candidate answers like the baseline: the comparison, its intervals, the verdict.

Pure. The baseline's greedy answer to each prompt is the reference; the candidate scores it
token by token (teacher forcing: at each position, the candidate's top-1 token and its
log-probability given the prompt and the baseline's answer so far), the online form of NxD
Inference's logit matching. Exact match across hardware is no valid criterion (vLLM does not
promise reproducibility even on one machine), so the figures are shares and gaps:

- ``token_agreement``: the share of the baseline's answer positions where the candidate's top-1
  token is the baseline's;
- ``logprob_divergence``: the mean absolute difference of the two top-1 log-probabilities;
- ``first_divergence``: the mean position of the first differing token, over ``maxTokens``
  (``maxTokens`` where none differs);
- ``expected_match``: the share of answers meeting their prompt's ``expected`` (the candidate's,
  or over the baseline's for a relative limit).

The prompts are a sample of what users ask, so every figure comes with an interval: the
percentile bootstrap over prompts (each resample draws whole prompts, as positions of one answer
are not independent), at ``1 - alpha``, from a fixed seed so a verdict is a function of its
inputs. A criterion passes or fails only when its interval clears the limit; else the check is
inconclusive, so a small prompt set cannot fail a good compile by chance.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
import numpy.typing as npt

from acceltrial.api.spec.quality import QualityCriterion, QualityMetric

RESAMPLES = 2000
"""Bootstrap resamples: the interval's ends move by well under 0.1% of the figure from one seed
to another at 100 prompts."""
SEED = 20261206
QualityVerdict = Literal["Pass", "Fail", "Inconclusive"]
_Array = npt.NDArray[np.float64]


@dataclass(frozen=True)
class PromptScore:
    """One prompt: the baseline's answer scored under the candidate."""

    positions: int
    """Positions of the baseline's answer scored."""
    agreed: int
    """Positions where the candidate's top-1 token is the baseline's."""
    logprob_gap: float
    """The sum over the positions of |baseline top-1 log-probability - candidate's|."""
    first_divergence: int | None
    """The first position where the tokens differ (0-based), None where none does."""
    baseline_met: bool | None = None
    """Whether the baseline's answer meets the prompt's ``expected`` (None: no expected)."""
    candidate_met: bool | None = None
    chat: bool = False
    """Asked through the chat API (its template applies) rather than as a completion."""


def score_prompt(
    baseline: Sequence[tuple[str, float]],
    candidate: Sequence[tuple[str, float]],
    met: tuple[bool, bool] | None = None,
    *,
    chat: bool = False,
) -> PromptScore:
    """A prompt's score from the baseline's answer as (token, top-1 log-probability) pairs and the
    candidate's top-1 (token, log-probability) at the same positions, teacher-forced; ``met``:
    whether each answer meets the prompt's expected; ``chat``: asked through the chat API."""
    scored = min(len(baseline), len(candidate))
    pairs = list(zip(baseline[:scored], candidate[:scored], strict=True))
    agreed = [b_token == c_token for (b_token, _), (c_token, _) in pairs]
    first = next((i for i, same in enumerate(agreed) if not same), None)
    gap = sum(abs(b_lp - c_lp) for (_, b_lp), (_, c_lp) in pairs)
    return PromptScore(
        positions=scored,
        agreed=sum(agreed),
        logprob_gap=gap,
        first_divergence=first,
        baseline_met=None if met is None else met[0],
        candidate_met=None if met is None else met[1],
        chat=chat,
    )


@dataclass(frozen=True)
class Figure:
    """One metric over the prompt set, with its interval at ``confidence``."""

    metric: QualityMetric
    value: float
    low: float
    high: float
    prompts: int
    confidence: float
    relative: bool = False
    """The candidate's figure over the baseline's (expected_match with a relative limit)."""

    def said(self) -> str:
        what = f"{self.metric} (candidate / baseline)" if self.relative else self.metric
        return (
            f"{what} {self.value:.4g} ({self.confidence:.0%} interval {self.low:.4g} to "
            f"{self.high:.4g} over {self.prompts} prompts)"
        )


@dataclass(frozen=True)
class QualityJudgement:
    """The verdict on one quality criterion, with the figure behind it."""

    criterion: str
    metric: QualityMetric
    verdict: QualityVerdict
    reason: str
    figure: Figure | None = None


def figure_of(
    metric: QualityMetric,
    scores: Sequence[PromptScore],
    max_tokens: int,
    alpha: float,
    relative: bool = False,
) -> Figure | None:
    """``metric`` over ``scores`` with its bootstrap interval; None when nothing measures it (no
    position scored; no prompt with ``expected``; a relative share over a baseline that met
    none)."""
    columns = _columns(metric, scores, max_tokens, relative)
    if columns is None:
        return None
    top, bottom = columns
    if bottom.sum() <= 0:
        return None
    value = float(top.sum() / bottom.sum())
    resampled = _bootstrap(top, bottom)
    low, high = np.quantile(resampled, [alpha / 2, 1 - alpha / 2]) if resampled.size else (0, 0)
    return Figure(metric, value, float(low), float(high), len(top), 1 - alpha, relative)


def _columns(
    metric: QualityMetric, scores: Sequence[PromptScore], max_tokens: int, relative: bool
) -> tuple[_Array, _Array] | None:
    """Per prompt, what the figure sums above and below the line (a ratio of sums)."""
    if metric == "expected_match":
        checked = [s for s in scores if s.candidate_met is not None and s.baseline_met is not None]
        if not checked:
            return None
        candidate = np.array([float(bool(s.candidate_met)) for s in checked])
        baseline = np.array([float(bool(s.baseline_met)) for s in checked])
        return (candidate, baseline) if relative else (candidate, np.ones(len(checked)))
    scored = [s for s in scores if s.positions > 0]
    if not scored:
        return None
    positions = np.array([float(s.positions) for s in scored])
    per_metric: dict[str, Callable[[], tuple[_Array, _Array]]] = {
        "token_agreement": lambda: (np.array([float(s.agreed) for s in scored]), positions),
        "logprob_divergence": lambda: (np.array([s.logprob_gap for s in scored]), positions),
        "first_divergence": lambda: (
            np.array([
                float(max_tokens if s.first_divergence is None else s.first_divergence)
                for s in scored
            ]),
            np.full(len(scored), float(max_tokens)),
        ),
    }  # fmt: skip
    return per_metric[metric]()


def _bootstrap(top: _Array, bottom: _Array) -> _Array:
    """The ratio of sums over ``RESAMPLES`` resamples of whole prompts (those whose denominator
    is not zero)."""
    rng = np.random.default_rng(SEED)
    picks = rng.integers(0, len(top), size=(RESAMPLES, len(top)))
    above, below = top[picks].sum(axis=1), bottom[picks].sum(axis=1)
    kept = below > 0
    return np.asarray(above[kept] / below[kept], dtype=np.float64)


def judge_quality(
    criteria: Sequence[QualityCriterion],
    scores: Sequence[PromptScore],
    max_tokens: int,
    alpha: float,
    *,
    unanswered: int = 0,
    max_unanswered: float = 0.05,
) -> list[QualityJudgement]:
    """Each criterion judged on ``scores`` (the prompts both variants answered); all of them
    inconclusive when more than ``max_unanswered`` of the prompts went unanswered.

    A set that mixes chat and completion prompts is also judged on each kind alone, at
    ``alpha`` shared between them (Bonferroni): a fault only one API meets, such as a wrong chat
    template, would otherwise hide in the pooled figure. A kind that fails fails the criterion;
    otherwise the pooled verdict stands."""
    asked = len(scores) + unanswered
    if asked and unanswered / asked > max_unanswered:
        why = (
            f"{unanswered} of {asked} prompts got no answer after retries, more than the "
            f"{max_unanswered:.0%} quality.maxUnanswered allows"
        )
        return [QualityJudgement(c.name, c.metric, "Inconclusive", why) for c in criteria]
    kinds = {
        kind: [s for s in scores if s.chat == chat]
        for kind, chat in (("chat", True), ("completion", False))
    }
    mixed = all(kinds.values())
    judged = []
    for criterion in criteria:
        pooled = _judged(criterion, scores, max_tokens, alpha)
        parts = (
            [
                _of_kind(kind, _judged(criterion, group, max_tokens, alpha / len(kinds)), group)
                for kind, group in kinds.items()
            ]
            if mixed and pooled.verdict != "Fail"
            else []
        )
        judged.append(next((p for p in parts if p.verdict == "Fail"), pooled))
    return judged


def _of_kind(
    kind: str, judgement: QualityJudgement, group: Sequence[PromptScore]
) -> QualityJudgement:
    """A judgement on one kind of prompts, saying so."""
    return replace(judgement, reason=f"over the {len(group)} {kind} prompts, {judgement.reason}")


def _judged(
    criterion: QualityCriterion, scores: Sequence[PromptScore], max_tokens: int, alpha: float
) -> QualityJudgement:
    relative = criterion.relative is not None
    figure = figure_of(criterion.metric, scores, max_tokens, alpha, relative)
    if figure is None:
        why = {
            "expected_match": "no prompt with expected was answered by both variants"
            + (", or the baseline met none" if relative else ""),
        }.get(criterion.metric, "no answer position was scored")
        return QualityJudgement(criterion.name, criterion.metric, "Inconclusive", why)
    bounds = criterion.relative or criterion.absolute
    assert bounds is not None  # the API requires one
    low_limit, high_limit = bounds.min, bounds.max
    limits = " and ".join(
        f"{name} {limit:.4g}"
        for name, limit in (("min", low_limit), ("max", high_limit))
        if limit is not None
    )
    said = figure.said()
    if (low_limit is not None and figure.high < low_limit) or (
        high_limit is not None and figure.low > high_limit
    ):
        return QualityJudgement(
            criterion.name, criterion.metric, "Fail", f"{said}: beyond {limits}", figure
        )
    if (low_limit is None or figure.low >= low_limit) and (
        high_limit is None or figure.high <= high_limit
    ):
        return QualityJudgement(
            criterion.name, criterion.metric, "Pass", f"{said}: within {limits}", figure
        )
    why = f"{said}: the interval holds {limits}, so more prompts are needed to tell"
    return QualityJudgement(criterion.name, criterion.metric, "Inconclusive", why, figure)
