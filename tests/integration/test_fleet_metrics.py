"""The simulated fleet through a real Prometheus: the presets' own queries, run on what it
exports, give back the profile it simulates (p99 and token rate within 10%), and each variant's
utilization comes from its own exporter (DCGM for GPUs, neuron-monitor for NeuronCores)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from acceltrial.demo.cluster import Client
from acceltrial.engine.queries import VariantTarget, preset_template, render
from acceltrial.providers.metrics.prometheus import PrometheusClient
from acceltrial.sandbox.cluster import Sandbox
from acceltrial.sandbox.fleet.exporter import Fleet, FleetSpec
from acceltrial.sandbox.fleet.model import ServingProfile, serve
from acceltrial.sandbox.fleet.serving import metrics_endpoint
from acceltrial.sandbox.fleet.traffic import Entry
from acceltrial.sandbox.prometheus import PrometheusServer
from tests.conftest import tool

pytestmark = pytest.mark.slow

RPS = 8.0
GENERATED = 150
GPU = ServingProfile(p50=1.2, p99=2.8, capacity_rps=8, error_ratio=0.01)
NEURON = ServingProfile(p50=0.9, p99=2.0, capacity_rps=12, error_ratio=0.0)


def deployment(name: str, labels: dict[str, str], limits: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "fleet"},
        "spec": {
            "replicas": 2 if "nvidia.com/gpu" in limits else 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "tolerations": [{"key": "aws.amazon.com/neuron", "operator": "Exists"}],
                    "containers": [
                        {"name": "vllm", "image": "vllm", "resources": {"limits": limits}}
                    ],
                },
            },
        },
    }  # fmt: skip


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[PrometheusClient, Fleet]]:
    with Sandbox(ready_delay=0.1) as sandbox:
        client = Client(sandbox.url)
        client.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                             "metadata": {"name": "fleet"}})  # fmt: skip
        labels = {"app": "llama3"}
        deployments = "/apis/apps/v1/namespaces/fleet/deployments"
        client.create(deployments, deployment("gpu", labels, {"nvidia.com/gpu": "1"}))
        candidate = {**labels, "acceltrial.dev/variant": "candidate"}
        limits = {"aws.amazon.com/neuroncore": "2"}
        client.create(deployments, deployment("inf2", candidate, limits))
        service = {"apiVersion": "v1", "kind": "Service",
                   "metadata": {"name": "llama3", "namespace": "fleet"},
                   "spec": {"selector": labels, "ports": [{"port": 8000}]}}  # fmt: skip
        client.create("/api/v1/namespaces/fleet/services", service)
        spec = FleetSpec(
            entry=Entry("fleet", service="llama3"),
            rps=RPS,
            prompt_tokens=512,
            generated_tokens=GENERATED,
            profiles={"baseline": GPU, "candidate": NEURON},
        )
        fleet = Fleet(sandbox.url, spec).start()
        try:
            _wait(lambda: fleet.snapshot().variants["candidate"].pods == 1)
            with metrics_endpoint(fleet) as url:
                folder: Path = tmp_path_factory.mktemp("fleet-prometheus")
                prometheus = PrometheusServer(tool("prometheus"), folder, [url[7:]]).start()
                try:
                    reader = PrometheusClient(prometheus.url)
                    _wait(lambda: _scrapes(reader) >= 6, timeout=40)
                    yield reader, fleet
                finally:
                    prometheus.stop()
        finally:
            fleet.stop()


def _wait(condition: Any, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)  # bounded poll of real processes


def _scrapes(reader: PrometheusClient) -> float:
    """Scrapes of the fleet in the last 6 s: the 5 s windows below need a full one."""
    series = reader.instant('count_over_time(up{job="fleet"}[6s])', datetime.now(UTC))
    return series[0].samples[0][1] if series else 0


def query(client: PrometheusClient, fleet: Fleet, metric: str, variant: str) -> float:
    pods = tuple(sorted(fleet.pods(variant)))
    accelerator = "gpu" if variant == "baseline" else "neuron"
    target = VariantTarget(variant, "fleet", "x", pods, accelerator)  # type: ignore[arg-type]
    promql = render(preset_template("vllm", metric, accelerator), target, "5s")
    series = client.instant(promql, datetime.now(UTC))
    assert len(series) == 1, promql
    return series[0].samples[0][1]


@pytest.mark.parametrize(
    ("variant", "profile", "replicas"), [("baseline", GPU, 2), ("candidate", NEURON, 1)]
)
def test_p99_and_token_rate_match_the_simulated_profile(
    measured: tuple[PrometheusClient, Fleet], variant: str, profile: ServingProfile, replicas: int
) -> None:
    client, fleet = measured
    per_pod = RPS / 3  # three Ready pods behind one Service
    rates = serve(profile, per_pod)
    p99 = query(client, fleet, "latency_p99", variant)
    assert p99 == pytest.approx(rates.latency_quantile(0.99), rel=0.10)
    tokens = query(client, fleet, "token_rate", variant)
    assert tokens == pytest.approx(replicas * rates.succeeded * GENERATED, rel=0.10)
    utilization = query(client, fleet, "accelerator_utilization", variant)
    assert utilization == pytest.approx(rates.utilization, rel=0.10)


def test_the_error_ratio_is_the_profiles(measured: tuple[PrometheusClient, Fleet]) -> None:
    client, fleet = measured
    assert query(client, fleet, "error_ratio", "baseline") == pytest.approx(0.01, rel=0.05)
    assert query(client, fleet, "error_ratio", "candidate") == 0
