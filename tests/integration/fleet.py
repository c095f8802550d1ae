"""A tiny simulated inference fleet for lifecycle tests: vLLM-style metrics for the sandbox's pods.

On every scrape it lists the Ready pods of the watched namespaces in the sandbox and exports,
per pod, counters that grow at a constant request rate since the pod was first seen, with the
latency histogram and error share of the pod's variant. Names and labels are vLLM's, so the
presets' queries work unchanged.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from acceltrial.sandbox.access import Access, as_access
from tests.integration.http_stub import http_server

BUCKETS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0, 1.5, 2.0, 5.0)


@dataclass(frozen=True)
class Profile:
    """How the pods of one variant serve."""

    rps: float = 5.0
    median: float = 0.25
    sigma: float = 0.3
    error_ratio: float = 0.001


class Fleet(Collector):
    """Exports metrics for the Ready pods of ``profiles``' namespaces and variants."""

    def __init__(self, cluster: Access | str, profiles: dict[tuple[str, str], Profile]) -> None:
        self.access = as_access(cluster)
        self.profiles = profiles  # (namespace, variant) -> profile
        self.first_seen: dict[str, float] = {}

    def collect(self) -> Iterator[Metric]:
        latency = HistogramMetricFamily(
            "vllm:e2e_request_latency_seconds", "End-to-end latency.", labels=["namespace", "pod"]
        )
        http = CounterMetricFamily(
            "http_requests", "HTTP responses.", labels=["namespace", "pod", "status"]
        )
        now = time.time()
        for namespace, pod, profile in self._pods():
            served = profile.rps * (now - self.first_seen.setdefault(pod, now))
            dist = NormalDist(math.log(profile.median), profile.sigma)
            buckets = [(str(b), served * dist.cdf(math.log(b))) for b in BUCKETS]
            mean = profile.median * math.exp(profile.sigma**2 / 2)
            latency.add_metric(
                [namespace, pod], [*buckets, ("+Inf", served)], sum_value=served * mean
            )
            failed = served * profile.error_ratio
            http.add_metric([namespace, pod, "2xx"], served - failed)
            http.add_metric([namespace, pod, "5xx"], failed)
        yield latency
        yield http

    def _pods(self) -> Iterator[tuple[str, str, Profile]]:
        # One list of every namespace's pods: a scrape (1 s timeout) has no time for one HTTPS
        # request per namespace to a busy real API server.
        with self.access.open("/api/v1/pods", timeout=5) as reply:
            pods: list[dict[str, Any]] = json.loads(reply.read())["items"]
        for pod in sorted(pods, key=lambda p: (p["metadata"]["namespace"], p["metadata"]["name"])):
            namespace = pod["metadata"]["namespace"]
            labels = pod["metadata"].get("labels") or {}
            variant = labels.get("acceltrial.dev/variant", "baseline")
            profile = self.profiles.get((namespace, variant))
            if profile is not None and _ready(pod):
                yield namespace, pod["metadata"]["name"], profile


@contextmanager
def serving(fleet: Fleet) -> Iterator[str]:
    """Serve the fleet's metrics on a free loopback port (yields the URL), always in the classic
    text format.

    prometheus_client's OpenMetrics output rewrites ``:`` in sample names to ``_``, so
    ``vllm:e2e_request_latency_seconds`` would be stored under another name; the text format
    keeps the names real vLLM servers expose.
    """
    registry = CollectorRegistry()
    registry.register(fleet)
    with http_server(
        lambda _h, _b: (200, generate_latest(registry)), content_type=CONTENT_TYPE_LATEST
    ) as url:
        yield url


def _ready(pod: dict[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
