"""Query templates and presets: which PromQL measures each criterion, rendered once per variant.

A template may use ``{{namespace}}``, ``{{pods}}``, ``{{deployment}}`` and ``{{interval}}``. Values
are checked and escaped so that none can break out of a label matcher: ``{{pods}}`` becomes an
anchored regex of the variant's pod names with regex metacharacters escaped, then escaped again
for a PromQL double-quoted string.

Presets name the metrics of the usual model servers (sources: vLLM's and TGI's metric docs,
neuron-monitor's Prometheus exporter, NVIDIA DCGM exporter), so users write ``metric:
latency_p99`` instead of PromQL.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from acceltrial.api.durations import duration_seconds
from acceltrial.api.placeholders import ALLOWED_PLACEHOLDERS

Variant = Literal["baseline", "candidate"]
Accelerator = Literal["gpu", "neuron"]

_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_POD_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


class TemplateError(ValueError):
    """A template or a value cannot be rendered safely."""


@dataclass(frozen=True)
class VariantTarget:
    """What a query is rendered for: one variant's namespace, Deployment, pods and hardware."""

    variant: Variant
    namespace: str
    deployment: str
    pods: tuple[str, ...]
    accelerator: Accelerator


def render(template: str, target: VariantTarget, interval: str) -> str:
    """Render ``template`` for ``target``; TemplateError on an unknown placeholder or value."""
    values = {
        "namespace": _label_value(target.namespace, _DNS_LABEL, "namespace"),
        "deployment": _label_value(target.deployment, _DNS_LABEL, "deployment"),
        "pods": _pods_regex(target.pods),
        "interval": promql_duration(interval),
    }

    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in ALLOWED_PLACEHOLDERS:
            allowed = ", ".join("{{" + n + "}}" for n in ALLOWED_PLACEHOLDERS)
            raise TemplateError(f"unknown placeholder {{{{{name}}}}}; allowed: {allowed}")
        return values[name]

    return _PLACEHOLDER.sub(substitute, template)


def promql_duration(interval: str) -> str:
    """A Kubernetes-style duration as a PromQL duration (whole seconds, or milliseconds)."""
    seconds = duration_seconds(interval)
    if seconds <= 0:
        raise TemplateError(f"interval must be positive, got {interval!r}")
    millis = round(seconds * 1000)
    return f"{millis // 1000}s" if millis % 1000 == 0 else f"{millis}ms"


def _label_value(value: str, pattern: re.Pattern[str], what: str) -> str:
    if not pattern.match(value):
        raise TemplateError(f"{what} {value!r} is not a valid Kubernetes name")
    return value


def _pods_regex(pods: tuple[str, ...]) -> str:
    for pod in pods:
        _label_value(pod, _POD_NAME, "pod name")
    if not pods:
        # Matches no pod: a variant without pods has no data, which is inconclusive, never a pass.
        return "^$"
    # Pod names hold only [a-z0-9.-]; of those only "." means something in a regex.
    alternatives = "|".join(pod.replace(".", "\\.") for pod in sorted(pods))
    regex = f"^(?:{alternatives})$"
    return regex.replace("\\", "\\\\")  # PromQL string literal: a regex backslash is written \\


_WINDOW = "[{{interval}}]"


def _selector(*extra: str) -> str:
    return "{" + ", ".join(['namespace="{{namespace}}"', 'pod=~"{{pods}}"', *extra]) + "}"


def _rate(metric: str, *extra: str) -> str:
    return f"sum(rate({metric}{_selector(*extra)}{_WINDOW}))"


def _increase(metric: str) -> str:
    return f"sum(increase({metric}{_selector()}{_WINDOW}))"


def _scrapes(counter: str) -> str:
    # The fewest scrapes any of the variant's series holds in the window.
    return f"min(count_over_time({counter}{_selector()}{_WINDOW}))"


def _quantile(quantile: str, histogram: str) -> str:
    buckets = f"{histogram}_bucket{_selector()}{_WINDOW}"
    return f"histogram_quantile({quantile}, sum by (le) (rate({buckets})))"


def _mean(histogram: str) -> str:
    return f"{_rate(histogram + '_sum')} / {_rate(histogram + '_count')}"


def _latency_family(histogram: str) -> dict[str, str]:
    return {
        "latency_mean": _mean(histogram),
        "latency_p50": _quantile("0.50", histogram),
        "latency_p90": _quantile("0.90", histogram),
        "latency_p99": _quantile("0.99", histogram),
        "requests": _increase(histogram + "_count"),
    }


_VLLM = {
    **_latency_family("vllm:e2e_request_latency_seconds"),
    "ttft_p99": _quantile("0.99", "vllm:time_to_first_token_seconds"),
    "itl_p99": _quantile("0.99", "vllm:inter_token_latency_seconds"),
    "request_rate": _rate("vllm:request_success_total"),
    "scrapes": _scrapes("vllm:request_success_total"),
    "token_rate": _rate("vllm:generation_tokens_total"),
    # vLLM's OpenAI server counts responses by status class (prometheus-fastapi-instrumentator).
    "error_ratio": _rate("http_requests_total", 'status=~"5.."')
    + " / "
    + _rate("http_requests_total"),
}
_TGI = {
    **_latency_family("tgi_request_duration"),
    # TGI has no time-to-first-token histogram; its queue time is the closest signal.
    "ttft_p99": _quantile("0.99", "tgi_request_queue_duration"),
    "itl_p99": _quantile("0.99", "tgi_request_mean_time_per_token_duration"),
    "request_rate": _rate("tgi_request_success"),
    "scrapes": _scrapes("tgi_request_success"),
    "token_rate": _rate("tgi_request_generated_tokens_sum"),
    "error_ratio": f"({_rate('tgi_request_count')} - {_rate('tgi_request_success')})"
    f" / {_rate('tgi_request_count')}",
}
_UTILIZATION: dict[Accelerator, str] = {
    # neuron-monitor's exporter, with --enable-k8s-info so series carry the pod's labels.
    "neuron": f"avg(neuroncore_utilization_ratio{_selector()})",
    # DCGM exporter with Kubernetes pod mapping; DCGM_FI_DEV_GPU_UTIL is a percentage.
    "gpu": f"avg(DCGM_FI_DEV_GPU_UTIL{_selector()}) / 100",
}
_UTILIZATION_OVER_WINDOW: dict[Accelerator, str] = {
    "neuron": f"avg(avg_over_time(neuroncore_utilization_ratio{_selector()}{_WINDOW}))",
    "gpu": f"avg(avg_over_time(DCGM_FI_DEV_GPU_UTIL{_selector()}{_WINDOW})) / 100",
}
PRESETS: dict[str, dict[str, str]] = {"vllm": _VLLM, "tgi": _TGI}
COST_METRICS = frozenset({"cost_per_million_tokens", "cost_per_thousand_requests"})
REQUESTS_METRIC = "requests"
SCRAPES_METRIC = "scrapes"
"""Scrapes of the request counter in the window: how much evidence a rate() rests on."""


def preset_template(preset: str, metric: str, accelerator: Accelerator) -> str:
    """The template of ``metric`` in ``preset`` for a variant on ``accelerator``."""
    if metric == "accelerator_utilization":
        return _UTILIZATION[accelerator]
    queries = PRESETS.get(preset)
    if queries is None or metric not in queries:
        raise TemplateError(f"preset {preset!r} has no query for metric {metric!r}")
    return queries[metric]


def utilization_over_window(accelerator: Accelerator) -> str:
    """Accelerator utilization averaged over the window, as a rate is: the cost model divides
    throughput by it, so both must describe the same span."""
    return _UTILIZATION_OVER_WINDOW[accelerator]
