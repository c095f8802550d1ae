"""What the analysis asks a metrics source for, in the domain's words.

A :class:`MetricRequest` names a measure of one variant (a metric a model server's preset
offers, or the user's own query, passed through untouched), over what span, and whether the
requests behind it or raw counters are wanted. A metrics adapter (providers/metrics/) turns it
into its own query language and answers with a :class:`~acceltrial.engine.analysis.Reading`;
the engine never sees PromQL.

The names here are facts about model servers, not about Prometheus: which metrics each preset
(vLLM, TGI) exports, which ones the cost model computes instead of reading.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Variant = Literal["baseline", "candidate"]
Accelerator = Literal["gpu", "neuron"]
Stream = Literal["latency", "errors"]
"""Raw counters the sequential test reads: a latency histogram's buckets, requests by status."""

COST_METRICS = frozenset({"cost_per_million_tokens", "cost_per_thousand_requests"})
"""Computed by the cost model from prices and throughput, never read from a source."""
UTILIZATION_METRIC = "accelerator_utilization"
"""Read from the accelerator's exporter (dcgm-exporter, neuron-monitor), whatever the preset."""
REQUESTS_METRIC = "requests"
"""Requests a variant finished in the window: how much traffic a value rests on."""
SCRAPES_METRIC = "scrapes"
"""Scrapes of the request counter in the window: how much evidence a rate rests on."""
LATENCY_METRICS = frozenset({"latency_mean", "latency_p50", "latency_p90", "latency_p99"})

REQUEST_SHAPE_METRICS = ("prompt_tokens_mean", "generated_tokens_mean")
"""The baseline's mean prompt and generated tokens per request: the capacity sweep's requests
when ``spec.capacityTest.requests`` is not given."""
_SERVER_METRICS = frozenset(
    {*LATENCY_METRICS, "ttft_p99", "itl_p99", "request_rate", "token_rate", "error_ratio"}
)
PRESET_METRICS: dict[str, frozenset[str]] = {
    "vllm": _SERVER_METRICS | {REQUESTS_METRIC, SCRAPES_METRIC, *REQUEST_SHAPE_METRICS},
    "tgi": _SERVER_METRICS | {REQUESTS_METRIC, SCRAPES_METRIC, *REQUEST_SHAPE_METRICS},
}
"""The metrics each model server's preset reads (``custom`` reads none: every criterion brings
its own query)."""
COUNTER_PRESETS = frozenset({"vllm", "tgi"})
"""Presets whose servers export the raw counters the sequential test needs."""


def offers(preset: str, metric: str) -> bool:
    """Whether ``metric`` can be read for a server of ``preset``."""
    return metric == UTILIZATION_METRIC or metric in PRESET_METRICS.get(preset, frozenset())


@dataclass(frozen=True)
class VariantTarget:
    """Whose metrics a request reads: one variant's namespace, Deployment, pods and hardware."""

    variant: Variant
    namespace: str
    deployment: str
    pods: tuple[str, ...]
    accelerator: Accelerator
    instances: tuple[str, ...] = ()
    """EC2 instance ids of the nodes the pods run on."""
    pods_regex: str | None = None
    """A regex of pod names given directly (``acceltrial check --baseline-pods``), used as is."""
    serving: int | None = None
    """How many of the pods take traffic now (Ready, not terminating): the replicas the cost
    model divides throughput by, for both variants alike (None: all of ``pods``)."""

    @property
    def replicas(self) -> int:
        """Pods serving the variant's traffic: the serving ones when known, else all."""
        return len(self.pods) if self.serving is None else self.serving


@dataclass(frozen=True)
class PresetMetric:
    """A metric the trial's preset offers (``error_ratio``, ``latency_p99``, ...)."""

    name: str


@dataclass(frozen=True)
class OwnQuery:
    """The user's own query (``criteria[].query``, ``requestsQuery``), in the source's language,
    with the documented placeholders."""

    text: str


Measure = PresetMetric | OwnQuery


@dataclass(frozen=True)
class MetricRequest:
    """One reading the analysis needs, for one variant of one criterion (or cost input)."""

    criterion: str
    """The key its reading is filed under: a criterion's name, or a cost input's."""
    variant: Variant
    measure: Measure
    mode: Literal["instant", "range"] = "instant"
    """One value at the window's end, or the samples across the window (statistical tests)."""
    requests: Measure | None = None
    """Also the requests the variant finished in the window (``minRequests``)."""
    counters: Stream | None = None
    """Instead of a value: the raw counters of this stream across the window, one part per
    histogram bound or status class (the sequential test)."""
    averaged: bool = False
    """The value averaged over the window, as a rate spans it (utilization for the cost model)."""

    @property
    def spans_window(self) -> bool:
        """Whether it reads samples across the window (a range read), not one value at its end."""
        return self.mode == "range" or self.counters is not None
