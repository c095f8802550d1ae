"""The model servers' own metrics, in the shape each real server and release exports them.

- **vLLM** (vllm/v1/metrics/loggers.py; the OpenAI server's prometheus-fastapi-instrumentator):
  every ``vllm:`` series carries ``model_name`` and ``engine``. ``vllm:inter_token_latency_seconds``
  exists from 0.11, ``vllm:time_per_output_token_seconds`` until 0.11 (deprecated in 0.11, hidden
  from 0.12). ``http_requests_total{handler,method,status}`` exists from 0.8.3 (vLLM PRs 15657,
  15894), with status grouped as ``2xx``/``5xx`` and a series only once its group occurred.
  ``vllm:request_prompt_tokens`` and ``vllm:request_generation_tokens`` are histograms of each
  finished request's tokens (vLLM's buckets run 1, 2, 5, 10, ... to the model's length; the
  fleet's are powers of two, which leave ``_sum`` and ``_count`` the same).
- **TGI** (text-generation-inference router): histograms ``tgi_request_duration``,
  ``tgi_request_queue_duration``, ``tgi_request_mean_time_per_token_duration``,
  ``tgi_request_generated_tokens``, ``tgi_request_input_length``; counters without a ``_total``
  suffix: ``tgi_request_count`` when a request starts, ``tgi_request_success`` when it ends,
  ``tgi_request_failure{err}`` only once a request failed.

``namespace`` and ``pod`` are added to every series, as a PodMonitor's relabelling attaches them
to a model server's target.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
)

from acceltrial_testbed.sandbox.fleet.counters import Histogram, PodCounters
from acceltrial_testbed.sandbox.fleet.serving import BareCounter, HistogramRows

Server = Literal["vllm", "tgi"]
_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?$")
DEFAULT_VLLM_VERSION = "0.11.0"
"""The release the demo's baseline image runs (vllm/vllm-openai:v0.11.0)."""
HANDLER = "/v1/chat/completions"


def parse_version(text: str) -> tuple[int, int, int]:
    """``0.11``, ``0.11.0`` or ``v0.11.0`` as a tuple; ValueError otherwise."""
    found = _VERSION.match(text.strip())
    if found is None:
        raise ValueError(f"{text!r} is not a vLLM release like 0.11.0")
    major, minor, patch = found.groups()
    return int(major), int(minor), int(patch or 0)


@dataclass(frozen=True)
class VllmShape:
    """Which of the version-dependent series one vLLM release exports."""

    inter_token_latency: bool
    time_per_output_token: bool
    http_requests: bool

    @classmethod
    def of(cls, version: str) -> VllmShape:
        release = parse_version(version)
        return cls(
            inter_token_latency=release >= (0, 11, 0),
            time_per_output_token=release < (0, 12, 0),
            http_requests=release >= (0, 8, 3),
        )


@dataclass(frozen=True)
class ServedPod:
    """One pod to export: its name, its counters and the shape of its server."""

    name: str
    counters: PodCounters
    vllm: VllmShape


def families(server: Server, pods: Sequence[ServedPod], model: str) -> Iterator[Metric]:
    """The metric families of every pod, as ``server`` exports them."""
    if server == "tgi":
        yield from _tgi(pods)
    else:
        yield from _vllm(pods, model)


def _add_histogram(family: HistogramRows, key: list[str], hist: Histogram) -> None:
    family.add_row(key, hist)


def _vllm(pods: Sequence[ServedPod], model: str) -> Iterator[Metric]:
    labels = ["namespace", "pod", "model_name", "engine"]
    e2e = HistogramRows(
        "vllm:e2e_request_latency_seconds", "End-to-end request latency.", labels=labels
    )
    ttft = HistogramRows("vllm:time_to_first_token_seconds", "Time to first token.", labels=labels)
    itl = HistogramRows("vllm:inter_token_latency_seconds", "Inter-token latency.", labels=labels)
    tpot = HistogramRows(
        "vllm:time_per_output_token_seconds", "Time per output token.", labels=labels
    )
    success = CounterMetricFamily(
        "vllm:request_success", "Finished requests.", labels=[*labels, "finished_reason"]
    )
    prompt_per_request = HistogramRows(
        "vllm:request_prompt_tokens", "Number of prefill tokens processed.", labels=labels
    )
    generated_per_request = HistogramRows(
        "vllm:request_generation_tokens", "Number of generation tokens processed.", labels=labels
    )
    prompt = CounterMetricFamily("vllm:prompt_tokens", "Prefill tokens.", labels=labels)
    generation = CounterMetricFamily("vllm:generation_tokens", "Generated tokens.", labels=labels)
    running = GaugeMetricFamily("vllm:num_requests_running", "Requests running.", labels=labels)
    waiting = GaugeMetricFamily("vllm:num_requests_waiting", "Requests waiting.", labels=labels)
    http = CounterMetricFamily(
        "http_requests",
        "Total number of requests by method, status and handler.",
        labels=["namespace", "pod", "handler", "method", "status"],
    )
    for pod in pods:
        counters, shape = pod.counters, pod.vllm
        key = [counters.namespace, pod.name, model, "0"]
        _add_histogram(e2e, key, counters.e2e)
        _add_histogram(ttft, key, counters.ttft)
        _add_histogram(prompt_per_request, key, counters.prompt_per_request)
        _add_histogram(generated_per_request, key, counters.generated_per_request)
        if shape.inter_token_latency:
            _add_histogram(itl, key, counters.itl)
        if shape.time_per_output_token:
            _add_histogram(tpot, key, counters.itl)
        # vLLM creates a child per finish reason up front, so these exist at zero.
        success.add_metric([*key, "stop"], counters.succeeded)
        success.add_metric([*key, "length"], 0.0)
        success.add_metric([*key, "abort"], 0.0)
        prompt.add_metric(key, counters.prompt_tokens)
        generation.add_metric(key, counters.generated_tokens)
        running.add_metric(key, counters.running)
        waiting.add_metric(key, counters.waiting)
        if shape.http_requests:
            where = [counters.namespace, pod.name, HANDLER, "POST"]
            # The instrumentator creates a status group's series on its first response.
            if counters.succeeded > 0:
                http.add_metric([*where, "2xx"], counters.succeeded)
            if counters.failed > 0:
                http.add_metric([*where, "5xx"], counters.failed)
    yield from (e2e, ttft, itl, tpot, prompt_per_request, generated_per_request, success, prompt,
                generation, running, waiting, http)  # fmt: skip


def _tgi(pods: Sequence[ServedPod]) -> Iterator[Metric]:
    labels = ["namespace", "pod"]
    histograms = {
        "tgi_request_duration": ("e2e", "End-to-end request duration."),
        "tgi_request_queue_duration": ("queue", "Time spent in the queue."),
        "tgi_request_mean_time_per_token_duration": ("time_per_token", "Mean time per token."),
        "tgi_request_generated_tokens": ("generated_per_request", "Generated tokens."),
        "tgi_request_input_length": ("prompt_per_request", "Input length in tokens."),
    }
    hist_families = {
        name: HistogramRows(name, doc, labels=labels) for name, (_, doc) in histograms.items()
    }
    count = BareCounter("tgi_request_count", "Requests started.")
    success = BareCounter("tgi_request_success", "Requests finished successfully.")
    failure = BareCounter("tgi_request_failure", "Failed requests by error kind.")
    queue_size = GaugeMetricFamily("tgi_queue_size", "Requests waiting.", labels=labels)
    batch_size = GaugeMetricFamily(
        "tgi_batch_current_size", "Requests in the batch.", labels=labels
    )
    for pod in pods:
        counters = pod.counters
        key = {"namespace": counters.namespace, "pod": pod.name}
        for name, (attribute, _) in histograms.items():
            _add_histogram(hist_families[name], list(key.values()), getattr(counters, attribute))
        count.add_sample("tgi_request_count", key, counters.started)
        success.add_sample("tgi_request_success", key, counters.succeeded)
        # TGI registers a failure series on the first failure of its kind.
        for err, value in (("generation", counters.errored), ("overloaded", counters.refused)):
            if value > 0:
                failure.add_sample("tgi_request_failure", key | {"err": err}, value)
        queue_size.add_metric(list(key.values()), counters.waiting)
        batch_size.add_metric(list(key.values()), counters.running)
    yield from hist_families.values()
    yield from (count, success, failure, queue_size, batch_size)
