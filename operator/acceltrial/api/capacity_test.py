"""``spec.capacityTest`` and ``status.capacityTest``: how much one candidate pod carries at the
latency SLO, measured by a load sweep before any user's request reaches it
(docs/capacity-test.md). The plan of the sweep is engine/capacity_sweep.py."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import ConfigDict, Field

from acceltrial.api.base import ApiModel, cel, cel_rules
from acceltrial.api.durations import Duration

StoppedBecause = Literal["slo", "errors", "flat", "maxDuration", "maxConcurrency"]
"""Why a sweep stopped: a latency percentile above its limit (``slo``), the error ratio above
its limit (``errors``), throughput no longer growing (``flat``), the time bound
(``maxDuration``) or the concurrency bound (``maxConcurrency``)."""
MAX_STAIRS = 32
BaselineMeasure = Literal["replica", "production"]
BaselineFrom = Literal["sweep", "production"]


class CapacitySlo(ApiModel):
    """What a stair of the sweep must meet to count: latency percentiles and the error ratio."""

    model_config = ConfigDict(
        json_schema_extra=cel_rules(
            cel(
                "has(self.latencyP99) || has(self.ttftP99) || has(self.itlP99) || "
                "has(self.errorRatio)",
                "give at least one of latencyP99, ttftP99, itlP99 or errorRatio",
            ),
        )
    )

    latency_p99: Duration | None = None
    """End-to-end latency p99 limit, e.g. 2s."""
    ttft_p99: Duration | None = None
    """Time-to-first-token p99 limit, e.g. 500ms (the sweep then streams its answers)."""
    itl_p99: Duration | None = None
    """Limit on the p99 over requests of each one's mean gap between tokens, e.g. 50ms (the
    sweep then streams its answers)."""
    error_ratio: float | None = Field(default=None, ge=0, le=1)
    """Failed requests over all requests, e.g. 0.01."""


class LoadShapeSpec(ApiModel):
    """The sweep's requests: mean prompt and generated tokens, as production sends them."""

    prompt_tokens: int = Field(ge=1, le=131072)
    """Prompt tokens of each request."""
    generated_tokens: int = Field(ge=1, le=32768)
    """Tokens generated for each request (``max_tokens`` with ``ignore_eos``)."""


class CapacityTestSpec(ApiModel):
    """A load sweep of the candidate's pods before any user's request reaches them."""

    model_config = ConfigDict(
        json_schema_extra=cel_rules(
            cel(
                "self.startConcurrency <= self.maxConcurrency",
                "startConcurrency cannot exceed maxConcurrency",
            ),
            cel(
                "duration(self.stairDuration) >= duration('2s') && "
                "duration(self.stairDuration) <= duration(self.maxDuration)",
                "stairDuration must be at least 2s and at most maxDuration",
                ".stairDuration",
            ),
        )
    )

    slo: CapacitySlo
    """Limits a stair must meet; the pod's capacity is the best goodput of a stair within them."""
    requests: LoadShapeSpec | None = None
    """The shape of the sweep's requests (production's mean prompt and answer lengths). When
    absent, the baseline's own means over the last five analysis intervals (at least a minute),
    from its server's token histograms (vLLM's ``vllm:request_prompt_tokens`` and
    ``vllm:request_generation_tokens``, TGI's ``tgi_request_input_length`` and
    ``tgi_request_generated_tokens``); a sweep that cannot read them is inconclusive."""
    max_duration: Duration = "5m"
    """Bound on the whole sweep."""
    stair_duration: Duration = "15s"
    """How long each concurrency is held (its first quarter is warm-up)."""
    start_concurrency: int = Field(default=1, ge=1, le=1024)
    """Concurrency of the first stair; it doubles from there."""
    max_concurrency: int = Field(default=256, ge=1, le=1024)
    """Bound on the concurrency."""
    model: str | None = Field(default=None, min_length=1, max_length=256)
    """The ``model`` each request names, where the servers serve several (vLLM's
    ``--served-model-name``); none is sent by default."""
    baseline: BaselineMeasure = "replica"
    """How the baseline's side of the cost ratio is measured. ``replica`` (the default): a
    temporary replica of the baseline, outside every route, on a GPU node that already serves
    the baseline and has room, swept alike and deleted after; production's operating point
    when no such node has room. ``production``: production's operating point (its throughput
    over its utilization), with no extra GPU pod."""


class SweepStair(ApiModel):
    """One stair of the sweep as measured."""

    concurrency: int = Field(ge=1)
    rps: float = Field(ge=0)
    """Successful requests per second (all pods)."""
    error_ratio: float | None = Field(default=None, ge=0, le=1)
    latency_p99: float | None = Field(default=None, ge=0)
    """Seconds."""
    within_slo: bool


class VariantCapacityTest(ApiModel):
    """What the sweep measured for one variant."""

    rps_per_pod: float | None = Field(default=None, ge=0)
    """Goodput per pod at the SLO: the best stair within it, over the pods swept. None when no
    stair met the SLO."""
    tokens_per_second_per_pod: float | None = Field(default=None, ge=0)
    """Generated tokens per second per pod at that stair."""
    concurrency: int | None = Field(default=None, ge=1)
    """The concurrency of that stair."""
    latency_p50: float | None = Field(default=None, ge=0)
    """Seconds, at that stair."""
    latency_p99: float | None = Field(default=None, ge=0)
    """Seconds, at that stair."""
    ttft_p99: float | None = Field(default=None, ge=0)
    """Time to first token p99 (seconds) at that stair, when answers were streamed."""
    itl_p99: float | None = Field(default=None, ge=0)
    """Inter-token latency p99 (seconds) at that stair, when answers were streamed."""
    error_ratio: float | None = Field(default=None, ge=0, le=1)
    """At that stair."""
    pods: int = Field(ge=1)
    """Pods the load was spread over."""
    stopped_because: StoppedBecause
    """slo, errors, flat, maxDuration or maxConcurrency."""
    reason: str = Field(max_length=1024)
    """The stop, in words."""
    utilization: float | None = Field(default=None, ge=0)
    """The pods' accelerator utilization over that stair, 0..1."""
    utilization_rps_per_pod: float | None = Field(default=None, ge=0)
    """What a projection from utilization makes of that stair's load (``rpsPerPod`` over
    ``utilization``): the figure the cost model would use unmeasured."""
    stairs: list[SweepStair] = Field(default_factory=list, max_length=MAX_STAIRS)
    """Every stair, in the order run."""
    seconds: float = Field(ge=0)
    """How long the sweep took."""


class CapacityCost(ApiModel):
    """Cost per unit of capacity at the target utilization (USD), as the cost criteria judge
    it before any user's request reaches the candidate: the candidate at its measured capacity,
    the baseline at its replica's (or, unswept, at its production operating point: its
    throughput over its utilization)."""

    baseline_per_million_tokens: float | None = Field(default=None, ge=0)
    candidate_per_million_tokens: float | None = Field(default=None, ge=0)
    baseline_per_thousand_requests: float | None = Field(default=None, ge=0)
    candidate_per_thousand_requests: float | None = Field(default=None, ge=0)
    baseline_rps_per_pod: float | None = Field(default=None, ge=0)
    """The baseline's capacity per pod the costs use: its replica's sweep, or what production
    shows (``baselineFrom``)."""


class SweptRequests(ApiModel):
    """The shape of the requests the sweep sent, and where it came from."""

    prompt_tokens: int = Field(ge=1)
    generated_tokens: int = Field(ge=1)
    source: Literal["spec", "baseline"]
    """``spec``: ``spec.capacityTest.requests``; ``baseline``: the baseline's own means, read
    from its token histograms."""
    baseline_requests: int | None = Field(default=None, ge=0)
    """How many of the baseline's requests those means rest on (``source: baseline``): the
    fewer, the further a mean may be from production's (its standard error is about half the
    mean over the square root of this count, since token counts vary by about half their
    mean)."""


class CapacityTestStatus(ApiModel):
    """The capacity sweep's outcome."""

    verdict: Literal["Pass", "Fail", "Inconclusive"]
    """Pass: measured; Fail: the candidate breaks the SLO at the lowest concurrency;
    Inconclusive: the sweep could not run or measured nothing."""
    reason: str = Field(max_length=4096)
    measured_at: datetime
    candidate: VariantCapacityTest | None = None
    """The candidate's pods, swept before any user's request reached them."""
    baseline: VariantCapacityTest | None = None
    """The baseline's temporary replica, swept alike (``spec.capacityTest.baseline: replica``
    and a GPU node had room)."""
    baseline_from: BaselineFrom | None = None
    """Where the baseline's capacity comes from: ``sweep`` (its replica, the comparison is
    symmetric) or ``production`` (its operating point: asymmetric, as the report says)."""
    baseline_note: str | None = Field(default=None, max_length=1024)
    """Why production's operating point stands in for the baseline, when it does."""
    requests: SweptRequests | None = None
    """The requests the sweep sent."""
    cost: CapacityCost | None = None
    """Both variants' cost at those capacities, when a cost criterion asks."""
