"""The fleet itself: per-pod counters that grow with the traffic each pod serves, exported under
the real servers' metric names.

Every ``tick_seconds`` the fleet re-reads the cluster (pods, Services, the HTTPRoute), splits the
total request rate, and advances each Ready pod's counters by what its variant's model serves
in that time: expected values, not random draws, so what Prometheus computes can be checked
against the profile. A scrape first serves the time since the last tick at the current rates and
stamps every sample with that moment, so counters are as current as a real server's however late
a busy machine runs the tick (stale counters read 12 req/s as 21 over a short ``rate()`` window).
Pods carry ``namespace`` and ``pod`` labels, as Prometheus' Kubernetes service discovery attaches
them, so the presets' queries select them as in production.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from acceltrial.engine.candidate import VARIANT_LABEL
from acceltrial.engine.queries import Variant
from acceltrial.sandbox.fleet.model import ReplicaRates, ServingProfile, serve
from acceltrial.sandbox.fleet.traffic import (
    ClusterView,
    Entry,
    Manifest,
    read_cluster,
    ready,
    split,
)

LOG = logging.getLogger(__name__)
# Fine buckets (10% apart) so histogram_quantile() lands within a few percent of the truth;
# real vLLM buckets are coarser, which only widens that error.
BUCKETS = tuple(round(0.001 * 1.1**i, 6) for i in range(124))
TTFT_SHARE = 0.1
"""Share of a request's latency spent before the first token (prefill)."""


@dataclass(frozen=True)
class Regression:
    """A change to one variant's serving once a condition holds."""

    variant: Variant
    from_weight: int | None = None
    """Active while the variant gets at least this percentage of the requests."""
    after_seconds: float | None = None
    """Active from this long after the variant first served a request."""
    latency_factor: float = 1.0
    error_ratio: float | None = None


@dataclass(frozen=True)
class FleetSpec:
    """What the fleet simulates."""

    entry: Entry
    rps: float
    prompt_tokens: int
    generated_tokens: int
    profiles: Mapping[Variant, ServingProfile]
    regressions: Sequence[Regression] = ()
    model_name: str = "model"


@dataclass
class _Histogram:
    buckets: list[float] = field(default_factory=lambda: [0.0] * len(BUCKETS))
    count: float = 0.0
    total: float = 0.0

    def observe(self, requests: float, cdf: Callable[[float], float], mean: float) -> None:
        for i, bound in enumerate(BUCKETS):
            self.buckets[i] += requests * cdf(bound)
        self.count += requests
        self.total += requests * mean


@dataclass
class _Pod:
    namespace: str
    variant: Variant
    accelerator: tuple[str, int]
    """Which exporter reports its accelerator (dcgm or neuron) and how many units it holds."""
    e2e: _Histogram = field(default_factory=_Histogram)
    ttft: _Histogram = field(default_factory=_Histogram)
    itl: _Histogram = field(default_factory=_Histogram)
    succeeded: float = 0.0
    failed: float = 0.0
    prompt_tokens: float = 0.0
    generated_tokens: float = 0.0
    rates: ReplicaRates | None = None


@dataclass(frozen=True)
class VariantTraffic:
    """What one variant serves right now."""

    pods: int
    offered_rps: float
    succeeded_rps: float
    p99: float | None


@dataclass(frozen=True)
class FleetSnapshot:
    variants: Mapping[Variant, VariantTraffic]

    @property
    def candidate_percent(self) -> float:
        total = sum(v.offered_rps for v in self.variants.values())
        return 100 * self.variants["candidate"].offered_rps / total if total else 0.0


class Fleet(Collector):
    """The simulated servers of one namespace; a prometheus_client collector."""

    def __init__(
        self,
        api_url: str,
        spec: FleetSpec,
        clock: Callable[[], float] = time.monotonic,
        reader: Callable[[str, Entry], ClusterView] = read_cluster,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.api_url = api_url
        self.spec = spec
        self._clock = clock
        self._wall_clock = wall_clock
        self._read = reader
        self._pods: dict[str, _Pod] = {}
        self._first_served: dict[Variant, float] = {}
        self._last: float | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- simulation ------------------------------------------------------------------------

    def advance(self) -> None:
        """Re-read the cluster and serve the time since the last call."""
        view = self._read(self.api_url, self.spec.entry)
        offered = split(view, self.spec.entry, self.spec.rps)
        now = self._clock()
        with self._lock:
            self._serve_until(now)
            self._sync_pods(view)
            shares = self._shares(offered)
            for name, pod in self._pods.items():
                profile = self._profile(pod.variant, shares[pod.variant], now)
                pod.rates = serve(profile, offered.get(name, 0.0))
                if pod.rates.offered > 0:
                    self._first_served.setdefault(pod.variant, now)

    def _serve_until(self, now: float) -> None:
        """Advance every pod's counters at its current rates up to ``now``."""
        elapsed = 0.0 if self._last is None else max(0.0, now - self._last)
        self._last = now
        for pod in self._pods.values():
            if pod.rates is not None:
                self._accumulate(pod, pod.rates, elapsed)

    def _sync_pods(self, view: ClusterView) -> None:
        current = {p["metadata"]["name"]: p for p in view.pods if ready(p)}
        for gone in set(self._pods) - set(current):
            del self._pods[gone]
        for name, pod in current.items():
            if name not in self._pods:
                labels = pod["metadata"].get("labels") or {}
                variant: Variant = "candidate" if labels.get(VARIANT_LABEL) else "baseline"
                self._pods[name] = _Pod(self.spec.entry.namespace, variant, _accelerator(pod))

    def _shares(self, offered: Mapping[str, float]) -> dict[Variant, float]:
        total = sum(offered.values())
        shares: dict[Variant, float] = {"baseline": 0.0, "candidate": 0.0}
        for name, pod in self._pods.items():
            shares[pod.variant] += 100 * offered.get(name, 0.0) / total if total else 0.0
        return shares

    def _profile(self, variant: Variant, percent: float, now: float) -> ServingProfile:
        profile = self.spec.profiles[variant]
        for regression in self.spec.regressions:
            if regression.variant == variant and self._active(regression, percent, now):
                profile = replace(
                    profile,
                    latency_factor=profile.latency_factor * regression.latency_factor,
                    error_ratio=(
                        profile.error_ratio
                        if regression.error_ratio is None
                        else regression.error_ratio
                    ),
                )
        return profile

    def _active(self, regression: Regression, percent: float, now: float) -> bool:
        if regression.from_weight is not None and percent + 1e-9 < regression.from_weight:
            return False
        if regression.after_seconds is not None:
            first = self._first_served.get(regression.variant)
            return first is not None and now - first >= regression.after_seconds
        return True

    def _accumulate(self, pod: _Pod, rates: ReplicaRates, seconds: float) -> None:
        ok = rates.succeeded * seconds
        generated = self.spec.generated_tokens
        pod.succeeded += ok
        pod.failed += rates.failed * seconds
        pod.prompt_tokens += ok * self.spec.prompt_tokens
        pod.generated_tokens += ok * generated
        pod.e2e.observe(ok, rates.latency_cdf, rates.mean_latency)
        pod.ttft.observe(
            ok, lambda s: rates.latency_cdf(s / TTFT_SHARE), rates.mean_latency * TTFT_SHARE
        )
        per_token = (1 - TTFT_SHARE) / max(1, generated)
        # Each request contributes one inter-token sample per generated token.
        pod.itl.observe(
            ok * generated,
            lambda s: rates.latency_cdf(s / per_token),
            rates.mean_latency * per_token,
        )

    def pods(self, variant: Variant) -> list[str]:
        """Names of the Ready pods serving as ``variant``."""
        with self._lock:
            return [name for name, pod in self._pods.items() if pod.variant == variant]

    def snapshot(self) -> FleetSnapshot:
        """Per variant: pods, offered and served requests per second, the modelled p99."""
        with self._lock:
            result: dict[Variant, VariantTraffic] = {}
            for variant in ("baseline", "candidate"):
                rates = [p.rates for p in self._pods.values() if p.variant == variant and p.rates]
                busy = [r for r in rates if r.succeeded > 0]
                result[variant] = VariantTraffic(
                    pods=len(rates),
                    offered_rps=sum(r.offered for r in rates),
                    succeeded_rps=sum(r.succeeded for r in rates),
                    p99=max((r.latency_quantile(0.99) for r in busy), default=None),
                )
            return FleetSnapshot(result)

    # -- running ---------------------------------------------------------------------------

    def start(self, tick_seconds: float = 0.25) -> Fleet:
        self.advance()
        self._thread = threading.Thread(
            target=self._run, args=(tick_seconds,), name="fleet", daemon=True
        )
        self._thread.start()
        return self

    def _run(self, tick_seconds: float) -> None:
        while not self._stop.wait(tick_seconds):
            try:
                self.advance()
            except OSError as error:  # the API server is going away; keep the last state
                LOG.debug("fleet could not read the cluster: %s", error)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    # -- exporting -------------------------------------------------------------------------

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            self._serve_until(self._clock())
            families = list(_families(sorted(self._pods.items()), self.spec.model_name))
            stamp = self._wall_clock()
        for family in families:
            family.samples = [sample._replace(timestamp=stamp) for sample in family.samples]
        yield from families


def _accelerator(pod: Manifest) -> tuple[str, int]:
    wanted: dict[str, Any] = {}
    for container in pod.get("spec", {}).get("containers") or []:
        resources = container.get("resources") or {}
        wanted |= resources.get("requests") or {}
        wanted |= resources.get("limits") or {}
    for resource, exporter in (
        ("aws.amazon.com/neuroncore", "neuron"),
        ("aws.amazon.com/neuron", "neuron"),
        ("nvidia.com/gpu", "dcgm"),
    ):
        amount = str(wanted.get(resource, ""))
        if amount.isdigit() and int(amount) > 0:
            units = int(amount) * (2 if resource == "aws.amazon.com/neuron" else 1)
            return exporter, units
    return "none", 0


def _families(pods: Sequence[tuple[str, _Pod]], model: str) -> Iterator[Metric]:
    labels = ["namespace", "pod", "model_name"]
    histograms = {
        "e2e": HistogramMetricFamily(
            "vllm:e2e_request_latency_seconds", "End-to-end request latency.", labels=labels
        ),
        "ttft": HistogramMetricFamily(
            "vllm:time_to_first_token_seconds", "Time to first token.", labels=labels
        ),
        "itl": HistogramMetricFamily(
            "vllm:inter_token_latency_seconds", "Inter-token latency.", labels=labels
        ),
    }
    success = CounterMetricFamily(
        "vllm:request_success", "Finished requests.", labels=[*labels, "finished_reason"]
    )
    prompt = CounterMetricFamily("vllm:prompt_tokens", "Prefill tokens.", labels=labels)
    generation = CounterMetricFamily("vllm:generation_tokens", "Generated tokens.", labels=labels)
    running = GaugeMetricFamily("vllm:num_requests_running", "Requests running.", labels=labels)
    waiting = GaugeMetricFamily("vllm:num_requests_waiting", "Requests waiting.", labels=labels)
    http = CounterMetricFamily(
        "http_requests", "Responses by status class.", labels=["namespace", "pod", "status"]
    )
    neuron = GaugeMetricFamily(
        "neuroncore_utilization_ratio",
        "NeuronCore utilization.",
        labels=["namespace", "pod", "neuroncore"],
    )
    dcgm = GaugeMetricFamily(
        "DCGM_FI_DEV_GPU_UTIL", "GPU utilization (%).", labels=["namespace", "pod", "gpu"]
    )
    for name, pod in pods:
        key = [pod.namespace, name, model]
        for attribute, family in histograms.items():
            hist: _Histogram = getattr(pod, attribute)
            buckets = [(_le(b), c) for b, c in zip(BUCKETS, hist.buckets, strict=True)]
            family.add_metric(key, [*buckets, ("+Inf", hist.count)], sum_value=hist.total)
        success.add_metric([*key, "stop"], pod.succeeded)
        prompt.add_metric(key, pod.prompt_tokens)
        generation.add_metric(key, pod.generated_tokens)
        rates = pod.rates
        running.add_metric(key, rates.running if rates else 0.0)
        waiting.add_metric(key, rates.waiting if rates else 0.0)
        http.add_metric([pod.namespace, name, "2xx"], pod.succeeded)
        http.add_metric([pod.namespace, name, "5xx"], pod.failed)
        exporter, units = pod.accelerator
        utilization = rates.utilization if rates else 0.0
        for unit in range(units):
            if exporter == "neuron":
                neuron.add_metric([pod.namespace, name, str(unit)], utilization)
            elif exporter == "dcgm":
                dcgm.add_metric([pod.namespace, name, str(unit)], 100 * utilization)
    yield from histograms.values()
    yield from (success, prompt, generation, running, waiting, http, neuron, dcgm)


def _le(bound: float) -> str:
    return repr(bound)
