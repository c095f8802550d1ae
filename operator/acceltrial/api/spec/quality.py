"""``spec.quality``: the prompt set both variants answer before any user request reaches the
candidate, and the criteria its answers must meet (docs/quality.md). The check's outcome is
``status.quality`` (api/quality.py)."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from acceltrial.api.base import ApiModel, DnsLabel, ObjectName, cel, cel_rules
from acceltrial.api.spec.criteria import Bounds, RelativeBounds

QualityMetric = Literal[
    "token_agreement", "logprob_divergence", "first_divergence", "expected_match"
]
"""What a quality criterion judges (docs/quality.md):

- ``token_agreement``: the share of the baseline's answer positions where the candidate's top-1
  token agrees, the baseline's greedy answer teacher-forced (0..1, higher is better);
- ``logprob_divergence``: the mean absolute difference of the top-1 log-probabilities over those
  positions (nats, lower is better);
- ``first_divergence``: the mean position of the first differing token, over ``maxTokens``
  (0..1; 1 when no answer differs within it);
- ``expected_match``: the share of answers that meet their prompt's ``expected``.
"""
SHARES = ("token_agreement", "first_divergence", "expected_match")
"""Metrics that are shares (0..1): an absolute limit on them lies within 0..1."""


class ConfigMapKeyRef(ApiModel):
    """A key of a ConfigMap in the trial's namespace."""

    name: ObjectName
    """Name of the ConfigMap."""
    key: str = Field(min_length=1, max_length=253, pattern=r"^[-._a-zA-Z0-9]+$")
    """Key within the ConfigMap holding the prompt set (JSON Lines)."""


class PromptSource(ApiModel):
    """Where the prompt set comes from."""

    config_map_ref: ConfigMapKeyRef
    """A ConfigMap key holding JSON Lines, one prompt a line: ``{"prompt": "..."}`` or
    ``{"messages": [...]}``, optionally ``"expected"`` (a string the answer must contain, or
    ``{"regex": "..."}``); at most 2,000 prompts and 1 MiB."""


class QualityCriterion(ApiModel):
    """One criterion the candidate's answers must meet."""

    model_config = ConfigDict(
        json_schema_extra=cel_rules(
            cel(
                "has(self.absolute) != has(self.relative)",
                "give exactly one of absolute or relative",
            ),
            cel(
                "!has(self.relative) || self.metric == 'expected_match'",
                "relative limits apply to expected_match only (the candidate's share of answers "
                "meeting expected over the baseline's); the other metrics already compare the "
                "candidate with the baseline: give absolute",
            ),
            cel(
                "!has(self.absolute) || !(self.metric in "
                + str(list(SHARES)).replace('"', "'")
                + ") || ((!has(self.absolute.min) || (self.absolute.min >= 0.0 && "
                "self.absolute.min <= 1.0)) && (!has(self.absolute.max) || "
                "(self.absolute.max >= 0.0 && self.absolute.max <= 1.0)))",
                "token_agreement, first_divergence and expected_match are shares: their limits "
                "lie within 0 and 1 (e.g. min: 0.98)",
            ),
        )
    )

    name: DnsLabel
    """Unique name, shown in status and the report."""
    metric: QualityMetric
    """What it judges: token_agreement, logprob_divergence, first_divergence or
    expected_match."""
    absolute: Bounds | None = None
    """Limits on the figure, e.g. min: 0.98 for token_agreement."""
    relative: RelativeBounds | None = None
    """Limits on candidate / baseline (expected_match only), e.g. min: 0.95."""


class QualitySpec(ApiModel):
    """The prompt set both variants answer before any user request reaches the candidate, and
    what the candidate's answers must meet."""

    model_config = ConfigDict(
        json_schema_extra=cel_rules(
            cel(
                "self.criteria.all(c, self.criteria.exists_one(d, d.name == c.name))",
                "quality criterion names must be unique",
                ".criteria",
            ),
        )
    )

    prompts: PromptSource
    """The prompt set."""
    criteria: list[QualityCriterion] = Field(min_length=1, max_length=8)
    """What the candidate's answers must meet; each passes or fails only when its interval clears
    its limit, else the quality check is inconclusive."""
    max_tokens: int = Field(default=64, ge=1, le=512)
    """Tokens each answer runs to (greedy, ``temperature: 0``)."""
    every_step: bool = False
    """Also check at every step, users already exposed: a failure then rolls back."""
    concurrency: int = Field(default=8, ge=1, le=64)
    """Prompts in flight to each variant at once."""
    model: str | None = Field(default=None, min_length=1, max_length=256)
    """The ``model`` each request names, where the servers serve several (vLLM's
    ``--served-model-name``); none is sent by default, and a server with one model answers with
    it."""
    max_unanswered: float = Field(default=0.05, ge=0, le=1)
    """The share of prompts that may go unanswered (after retries) before the check is
    inconclusive."""
