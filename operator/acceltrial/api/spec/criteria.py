"""The success criteria of ``spec.analysis.criteria``: the metric or query each judges, and its
limits (absolute or relative bounds, or a statistical test)."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from acceltrial.api.base import ApiModel, DnsLabel, cel, cel_rules
from acceltrial.api.placeholders import PLACEHOLDER_HINT, QUERY_TEMPLATE_PATTERN

MetricName = Literal[
    "latency_mean",
    "latency_p50",
    "latency_p90",
    "latency_p99",
    "ttft_p99",
    "itl_p99",
    "request_rate",
    "token_rate",
    "error_ratio",
    "accelerator_utilization",
    "cost_per_million_tokens",
    "cost_per_thousand_requests",
]


PLACEHOLDER_MESSAGE = "a query template may use only the placeholders"


def placeholder_rule() -> dict[str, str]:
    """The CEL rule admitting a query template that uses only the allowed placeholders."""
    escaped = QUERY_TEMPLATE_PATTERN.replace("\\", "\\\\")  # CEL string literal escapes
    return cel(f"self.matches('{escaped}')", f"{PLACEHOLDER_MESSAGE} {PLACEHOLDER_HINT}")


class Bounds(ApiModel):
    """Limits on a value: min, max or both."""

    model_config = ConfigDict(
        json_schema_extra=cel_rules(
            cel("has(self.min) || has(self.max)", "give min, max or both"),
            cel(
                "!has(self.min) || !has(self.max) || self.min <= self.max",
                "min must not be greater than max",
            ),
        )
    )

    min: float | None = None
    """Lowest passing value (inclusive)."""
    max: float | None = None
    """Highest passing value (inclusive)."""


class RelativeBounds(ApiModel):
    """Limits on candidate / baseline measured over the same window, e.g. max: 1.10."""

    model_config = ConfigDict(
        json_schema_extra=cel_rules(
            cel(
                "has(self.min) || has(self.max)",
                "a relative criterion needs a limit: give min, max or both (a ratio to the "
                "baseline, e.g. max: 1.10)",
            ),
            cel(
                "!has(self.min) || !has(self.max) || self.min <= self.max",
                "min must not be greater than max",
            ),
        )
    )

    min: float | None = Field(default=None, ge=0)
    """Lowest passing ratio candidate / baseline (inclusive)."""
    max: float | None = Field(default=None, ge=0)
    """Highest passing ratio candidate / baseline (inclusive)."""


class StatisticalTest(ApiModel):
    """A Mann-Whitney comparison of the candidate's samples with the baseline's over the window."""

    direction: Literal["increase", "decrease", "either"]
    """Which significant change fails: increase (e.g. latency), decrease (e.g. throughput) or
    either."""
    confidence: float = Field(default=0.95, gt=0.5, lt=1)
    """Confidence level of the test and of the Hodges-Lehmann interval (0.5 < confidence < 1)."""
    allowed_change: float = Field(default=0.0, ge=0, le=10)
    """Relative shift tolerated even when significant, e.g. 0.05 lets the candidate be 5% worse."""


class Criterion(ApiModel):
    """A success criterion, fixed when the trial starts."""

    model_config = ConfigDict(
        json_schema_extra=cel_rules(
            cel(
                "has(self.metric) != has(self.query)",
                "set either metric (a preset metric name) or query (your own PromQL), not both",
            ),
            cel(
                "[has(self.absolute), has(self.relative), has(self.statistical)].exists_one(x, x)",
                "a criterion needs exactly one of absolute, relative or statistical",
            ),
            cel(
                "!has(self.statistical) || !has(self.metric) || !self.metric.startsWith('cost_')",
                "cost metrics are single values per window: judge them with absolute or "
                "relative, not statistical",
            ),
        )
    )

    name: DnsLabel
    """Name of the criterion, unique within the trial (shown in status and the report)."""
    metric: MetricName | None = None
    """A metric of the preset (latency_p99, error_ratio, accelerator_utilization, ...) or a cost
    metric computed by the operator (cost_per_million_tokens, cost_per_thousand_requests)."""
    query: str | None = Field(
        default=None,
        min_length=1,
        max_length=4096,
        json_schema_extra=cel_rules(placeholder_rule()),
    )
    """Your own PromQL template returning one series per variant; placeholders are rendered once
    per variant."""
    requests_query: str | None = Field(
        default=None,
        min_length=1,
        max_length=4096,
        json_schema_extra=cel_rules(placeholder_rule()),
    )
    """For minRequests with your own query: PromQL counting the requests a variant served in the
    window (e.g. sum(increase(http_requests_total{pod=~"{{pods}}"}[{{interval}}]))). Presets
    bring their own."""
    absolute: Bounds | None = None
    """Limits on the candidate's value."""
    relative: RelativeBounds | None = None
    """Limits on candidate / baseline."""
    statistical: StatisticalTest | None = None
    """A rank-sum comparison of both variants' samples."""
    from_weight: int = Field(default=0, ge=0, le=100)
    """Judge this criterion only at steps whose weight is at least this (e.g. cost at 25%+)."""
    min_samples: int | None = Field(default=None, ge=1, le=100000)
    """Fewest samples per variant for a verdict; fewer makes the measurement inconclusive.
    Defaults to 1 for absolute and relative criteria and 10 for statistical ones; for cost
    criteria, the fewest scrapes of each variant's request counter in the window (default 2)."""
    min_requests: float | None = Field(default=None, ge=0)
    """Fewest requests each variant must have served in the window for a verdict."""
