"""Prepared metric histories of simulated vLLM pods, as OpenMetrics for promtool.

Each scenario lives in its own namespace, with baseline (GPU) and candidate (Neuron) pods that
export the same names and labels as vLLM, neuron-monitor and the DCGM exporter. Latencies are
log-normal with a known median and spread, so the expected p99 is ``median * exp(2.326 * sigma)``.
Seeded jitter makes samples differ from step to step, as real ones do.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from statistics import NormalDist

BUCKETS = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6, 0.7, 0.8, 1.0, 1.5, 2.0, 5.0)
STEP_SECONDS = 15
Z99 = NormalDist().inv_cdf(0.99)


@dataclass(frozen=True)
class PodProfile:
    """How one simulated pod behaves."""

    rps: float
    median: float = 0.25
    sigma: float = 0.3
    error_ratio: float = 0.001
    tokens_per_request: float = 120.0
    utilization: float = 0.6
    exports_vllm: bool = True

    @property
    def p99(self) -> float:
        return self.median * math.exp(Z99 * self.sigma)

    @property
    def mean(self) -> float:
        return self.median * math.exp(self.sigma**2 / 2)


@dataclass(frozen=True)
class Scenario:
    namespace: str
    baseline: PodProfile
    candidate: PodProfile
    baseline_pods: int = 2
    candidate_pods: int = 1

    def pods(self, variant: str) -> tuple[str, ...]:
        count = self.baseline_pods if variant == "baseline" else self.candidate_pods
        kind = "gpu" if variant == "baseline" else "inf2"
        return tuple(f"{self.namespace}-{kind}-{i}" for i in range(count))


GPU = PodProfile(rps=10.0)
SCENARIOS = {
    s.namespace: s
    for s in (
        Scenario("healthy", GPU, PodProfile(rps=4.0, median=0.24)),
        Scenario("slow-tail", GPU, PodProfile(rps=4.0, median=0.24, sigma=0.45)),
        Scenario("errors", GPU, PodProfile(rps=4.0, error_ratio=0.03)),
        Scenario("idle", GPU, PodProfile(rps=0.0)),
        Scenario("missing", GPU, PodProfile(rps=4.0, exports_vllm=False)),
        Scenario("shifted", GPU, PodProfile(rps=4.0, median=0.32)),
        Scenario("busy-idle-gpu", PodProfile(rps=10.0, utilization=0.2), PodProfile(rps=4.0)),
    )
}


def openmetrics(end: int, seconds: int = 3600, seed: int = 7) -> str:
    """The history of every scenario over ``seconds`` ending at unix time ``end``."""
    rng = random.Random(seed)
    families: dict[str, list[str]] = {name: [] for name in _FAMILIES}
    for scenario in SCENARIOS.values():
        for variant in ("baseline", "candidate"):
            profile = scenario.baseline if variant == "baseline" else scenario.candidate
            for pod in scenario.pods(variant):
                _pod_history(families, scenario.namespace, pod, variant, profile, end, seconds, rng)
    lines = []
    for name, kind in _FAMILIES.items():
        lines.append(f"# TYPE {name} {kind}")
        lines += families[name]
    return "\n".join([*lines, "# EOF", ""])


_FAMILIES = {
    "vllm:e2e_request_latency_seconds": "histogram",
    "vllm:generation_tokens": "counter",
    "vllm:request_success": "counter",
    "http_requests": "counter",
    "neuroncore_utilization_ratio": "gauge",
    "DCGM_FI_DEV_GPU_UTIL": "gauge",
}


def _pod_history(  # noqa: PLR0917 - one call site
    families: dict[str, list[str]],
    namespace: str,
    pod: str,
    variant: str,
    profile: PodProfile,
    end: int,
    seconds: int,
    rng: random.Random,
) -> None:
    base = f'namespace="{namespace}",pod="{pod}"'

    def emit(family: str, sample: str, value: float, ts: int, extra: str = "") -> None:
        labels = f"{base},{extra}" if extra else base
        families[family].append(f"{sample}{{{labels}}} {value:.4f} {ts}")

    buckets = [0.0] * len(BUCKETS)
    count = total = tokens = ok = failed = 0.0
    histogram = "vllm:e2e_request_latency_seconds"
    for ts in range(end - seconds, end + 1, STEP_SECONDS):
        served = profile.rps * STEP_SECONDS * (1 + 0.1 * rng.uniform(-1, 1))
        median = profile.median * (1 + 0.03 * rng.gauss(0, 1))
        latency = NormalDist(math.log(median), profile.sigma)
        for i, bound in enumerate(BUCKETS):
            buckets[i] += served * latency.cdf(math.log(bound))
        count += served
        total += served * median * math.exp(profile.sigma**2 / 2)
        tokens += served * profile.tokens_per_request
        ok += served * (1 - profile.error_ratio)
        failed += served * profile.error_ratio
        if profile.exports_vllm:
            for bound, value in zip(BUCKETS, buckets, strict=True):
                emit(histogram, f"{histogram}_bucket", value, ts, f'le="{bound}"')
            emit(histogram, f"{histogram}_bucket", count, ts, 'le="+Inf"')
            emit(histogram, f"{histogram}_count", count, ts)
            emit(histogram, f"{histogram}_sum", total, ts)
            emit("vllm:generation_tokens", "vllm:generation_tokens_total", tokens, ts)
            emit("vllm:request_success", "vllm:request_success_total", ok, ts)
            emit("http_requests", "http_requests_total", ok, ts, 'status="2xx"')
            emit("http_requests", "http_requests_total", failed, ts, 'status="5xx"')
        if variant == "candidate":
            emit("neuroncore_utilization_ratio", "neuroncore_utilization_ratio",
                 profile.utilization, ts)  # fmt: skip
        else:
            emit("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_GPU_UTIL", profile.utilization * 100, ts)
