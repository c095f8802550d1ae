"""The PromQL of each preset metric, and templates rendered once per variant.

A template may use ``{{namespace}}``, ``{{pods}}``, ``{{deployment}}``, ``{{interval}}`` and
``{{instances}}``. Values are checked and escaped so that none can break out of a label matcher:
``{{pods}}`` becomes an anchored regex of the variant's pod names with regex metacharacters
escaped, then escaped again for a PromQL double-quoted string; ``{{instances}}`` the same for the
EC2 instance ids of the nodes those pods run on.

Presets name the metrics of the usual model servers, so users write ``metric: latency_p99``
instead of PromQL, and they answer on the shapes real exporters and real Prometheus setups produce
(docs/metrics.md):

- vLLM's ``http_requests_total`` has no ``status="5xx"`` series until the first 5xx (status
  classes come from prometheus-fastapi-instrumentator), so the error count is ``or vector(0)``:
  zero errors is 0, no traffic at all stays empty (or NaN), which is Inconclusive.
- vLLM renamed ``vllm:time_per_output_token_seconds`` to ``vllm:inter_token_latency_seconds``
  (deprecated in 0.11); the two builds of one trial may export either, so both are read.
- TGI counts ``tgi_request_count`` when a request starts and ``tgi_request_success`` when it
  ends, so ``1 - success/count`` reads requests in flight as errors; errors are
  ``tgi_request_failure`` over finished requests instead.
- Utilization exporters run as DaemonSets: dcgm-exporter behind a ServiceMonitor with
  ``honorLabels: false`` has the GPU's pod in ``exported_pod`` / ``exported_namespace`` (older
  releases: ``pod_name`` / ``pod_namespace``); neuron-monitor carries pod labels only with
  ``--enable-k8s-info`` and otherwise only instance labels, matched through ``{{instances}}``.
  The first shape that answers is used.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from acceltrial.api.durations import duration_seconds
from acceltrial.api.placeholders import ALLOWED_PLACEHOLDERS
from acceltrial.engine.metrics import (
    REQUESTS_METRIC,
    SCRAPES_METRIC,
    UTILIZATION_METRIC,
    Accelerator,
    Stream,
    VariantTarget,
)
from acceltrial.providers.metrics.port import RequestError

_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_INSTANCE_ID = re.compile(r"^i-[0-9a-f]{8,17}$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_POD_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


class TemplateError(RequestError):
    """A template or a value cannot be rendered safely."""


def render(template: str, target: VariantTarget, interval: str) -> str:
    """Render ``template`` for ``target``; TemplateError on an unknown placeholder or value."""
    values = {
        "namespace": _label_value(target.namespace, _DNS_LABEL, "namespace"),
        "deployment": _label_value(target.deployment, _DNS_LABEL, "deployment"),
        "pods": _given_regex(target.pods_regex) if target.pods_regex else _pods_regex(target.pods),
        "interval": promql_duration(interval),
        "instances": _instances_regex(target.instances),
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


def _instances_regex(instances: tuple[str, ...]) -> str:
    for instance in instances:
        if not _INSTANCE_ID.match(instance):
            raise TemplateError(f"instance id {instance!r} is not an EC2 instance id")
    alternatives = "|".join(sorted(set(instances)))
    return f"^(?:{alternatives})$" if instances else "^$"


def _given_regex(regex: str) -> str:
    try:
        re.compile(regex)
    except re.error as error:
        raise TemplateError(f"pods regex {regex!r} is not a regular expression: {error}") from None
    return regex.replace("\\", "\\\\").replace('"', '\\"')


_WINDOW = "[{{interval}}]"
# Where exporters put the pod a series belongs to: scraped from the pod itself (or with
# honorLabels: true), behind a ServiceMonitor with honorLabels: false, dcgm-exporter's old names.
_POD_LABELS = (("namespace", "pod"), ("exported_namespace", "exported_pod"),
               ("pod_namespace", "pod_name"))  # fmt: skip


def _selector(*extra: str, labels: tuple[str, str] = _POD_LABELS[0]) -> str:
    namespace, pod = labels
    matchers = [f'{namespace}="{{{{namespace}}}}"', f'{pod}=~"{{{{pods}}}}"', *extra]
    return "{" + ", ".join(matchers) + "}"


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
        REQUESTS_METRIC: _increase(histogram + "_count"),
    }


def _quantile_of_either(quantile: str, histogram: str, old_name: str) -> str:
    """A quantile of whichever of two names of one histogram a server exports (the new wins)."""
    new = f"rate({histogram}_bucket{_selector()}{_WINDOW})"
    old = f"rate({old_name}_bucket{_selector()}{_WINDOW})"
    return f"histogram_quantile({quantile}, sum by (le) ({new} or {old}))"


def _zero_if_absent(expression: str) -> str:
    """A count whose series appears only once it is non-zero: 0 when absent."""
    return f"({expression} or vector(0))"


def _per_pod(
    aggregate: str, metric: str, by_instance: bool = False, over_window: bool = False
) -> str:
    """``aggregate`` of a per-device metric of the variant's pods, from the first label shape
    that answers; by instance id last, for exporters without pod labels. ``over_window``
    averages each series over the window first (as a rate() spans it)."""
    selectors = [_selector(labels=labels) for labels in _POD_LABELS]
    if by_instance:
        selectors.append('{instance_id=~"{{instances}}"}')
    series = [
        f"avg_over_time({metric}{selector}{_WINDOW})" if over_window else f"{metric}{selector}"
        for selector in selectors
    ]
    return "(" + " or ".join(f"{aggregate}({one})" for one in series) + ")"


_VLLM = {
    **_latency_family("vllm:e2e_request_latency_seconds"),
    "ttft_p99": _quantile("0.99", "vllm:time_to_first_token_seconds"),
    "itl_p99": _quantile_of_either(
        "0.99", "vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"
    ),
    "request_rate": _rate("vllm:request_success_total"),
    SCRAPES_METRIC: _scrapes("vllm:request_success_total"),
    "token_rate": _rate("vllm:generation_tokens_total"),
    # Per finished request (vllm/v1/metrics/loggers.py: "Number of prefill tokens processed.").
    "prompt_tokens_mean": _mean("vllm:request_prompt_tokens"),
    "generated_tokens_mean": _mean("vllm:request_generation_tokens"),
    # vLLM's OpenAI server counts responses by status class (prometheus-fastapi-instrumentator);
    # releases before spring 2025 export no http_requests_total: empty, so Inconclusive.
    "error_ratio": _zero_if_absent(_rate("http_requests_total", 'status=~"5.."'))
    + " / "
    + _rate("http_requests_total"),
}
_TGI_FAILURES = _zero_if_absent(_rate("tgi_request_failure"))
_TGI = {
    **_latency_family("tgi_request_duration"),
    # TGI has no time-to-first-token histogram; its queue time is the closest signal.
    "ttft_p99": _quantile("0.99", "tgi_request_queue_duration"),
    "itl_p99": _quantile("0.99", "tgi_request_mean_time_per_token_duration"),
    "request_rate": _rate("tgi_request_success"),
    SCRAPES_METRIC: _scrapes("tgi_request_success"),
    "token_rate": _rate("tgi_request_generated_tokens_sum"),
    "prompt_tokens_mean": _mean("tgi_request_input_length"),
    "generated_tokens_mean": _mean("tgi_request_generated_tokens"),
    # Failures over finished requests (tgi_request_count also counts requests still running).
    "error_ratio": f"{_TGI_FAILURES} / ({_rate('tgi_request_success')} + {_TGI_FAILURES})",
}
_UTILIZATION: dict[Accelerator, str] = {
    # neuron-monitor: pod labels with --enable-k8s-info, else the nodes' instance ids.
    "neuron": _per_pod("avg", "neuroncore_utilization_ratio", by_instance=True),
    # dcgm-exporter with Kubernetes pod mapping; DCGM_FI_DEV_GPU_UTIL is a percentage.
    "gpu": _per_pod("avg", "DCGM_FI_DEV_GPU_UTIL") + " / 100",
}
_UTILIZATION_OVER_WINDOW: dict[Accelerator, str] = {
    "neuron": _per_pod("avg", "neuroncore_utilization_ratio", by_instance=True, over_window=True),
    "gpu": _per_pod("avg", "DCGM_FI_DEV_GPU_UTIL", over_window=True) + " / 100",
}
PRESETS: dict[str, dict[str, str]] = {"vllm": _VLLM, "tgi": _TGI}

_TGI_OUTCOMES = (
    f'label_replace(sum(tgi_request_failure{_selector()}), "status", "5xx", "", "") or '
    f'label_replace(sum(tgi_request_success{_selector()}), "status", "2xx", "", "")'
)
COUNTER_QUERIES: Mapping[str, Mapping[Stream, str]] = {
    "vllm": {
        "latency": f"sum by (le) (vllm:e2e_request_latency_seconds_bucket{_selector()})",
        "errors": f"sum by (status) (http_requests_total{_selector()})",
    },
    "tgi": {
        "latency": f"sum by (le) (tgi_request_duration_bucket{_selector()})",
        "errors": _TGI_OUTCOMES,
    },
}
"""Raw counters of the sequential test, per preset and stream."""
COUNTER_LABELS: Mapping[Stream, str] = {"latency": "le", "errors": "status"}
"""The label that splits each stream's counters into the engine's parts."""


def preset_template(preset: str, metric: str, accelerator: Accelerator) -> str:
    """The template of ``metric`` in ``preset`` for a variant on ``accelerator``."""
    if metric == UTILIZATION_METRIC:
        return _UTILIZATION[accelerator]
    queries = PRESETS.get(preset)
    if queries is None or metric not in queries:
        raise TemplateError(f"preset {preset!r} has no query for metric {metric!r}")
    return queries[metric]


def utilization_over_window(accelerator: Accelerator) -> str:
    """Accelerator utilization averaged over the window, as a rate is: the cost model divides
    throughput by it, so both must describe the same span."""
    return _UTILIZATION_OVER_WINDOW[accelerator]
