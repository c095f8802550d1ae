"""The simulated fleet through a real Prometheus: the presets' own queries, run on what it
exports, give back the profile it simulates (p99, token rate, utilization and error ratio within
the sampling error of the requests it drew in the 5 s window), and each variant's
utilization comes from its own exporter (DCGM for GPUs, neuron-monitor for NeuronCores), one
target per node, relabelled by Prometheus as the Prometheus Operator's ServiceMonitor job does."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from acceltrial.engine.metrics import Accelerator, MetricRequest, PresetMetric, Variant
from acceltrial.engine.targets import variant_target
from acceltrial.providers.metrics.prometheus import PrometheusClient
from acceltrial.providers.metrics.prometheus.reader import promql as render_promql
from acceltrial_testbed.demo.cluster import Client
from acceltrial_testbed.sandbox.fleet.accelerators import ExporterOptions
from acceltrial_testbed.sandbox.fleet.exporter import Fleet, FleetSpec
from acceltrial_testbed.sandbox.fleet.model import ServingProfile, serve
from acceltrial_testbed.sandbox.fleet.serving import metrics_endpoint, serve_exporters
from acceltrial_testbed.sandbox.fleet.traffic import Entry
from acceltrial_testbed.sandbox.prometheus import PrometheusServer
from tests.conftest import tool
from tests.integration.e2e_kit import BACKENDS, backend_of
from tests.sandbox.conftest import IMMEDIATE

pytestmark = pytest.mark.slow
PLANE = "real" if "real" in BACKENDS else "emulator"
"""The real control plane when it is built (always in CI), else the emulator."""

RPS = 600.0
"""Enough requests that a 5 s window holds about 1000 a pod: the fleet draws them at random, and
a p99 of 1000 requests is within about 4% of the profile's (one standard error)."""
GENERATED = 150
GPU = ServingProfile(p50=1.2, p99=2.8, capacity_rps=600, error_ratio=0.01)
NEURON = ServingProfile(p50=0.9, p99=2.0, capacity_rps=900, error_ratio=0.0)


def deployment(name: str, labels: dict[str, str], limits: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "fleet"},
        "spec": {
            "replicas": 2 if "nvidia.com/gpu" in limits else 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels, "annotations": IMMEDIATE},
                "spec": {
                    "tolerations": [{"key": "aws.amazon.com/neuron", "operator": "Exists"}],
                    "containers": [
                        {"name": "vllm", "image": "vllm", "resources": {"limits": limits}}
                    ],
                },
            },
        },
    }  # fmt: skip


CHART_DEFAULTS = "chart defaults"
"""dcgm-exporter's chart (honorLabels false), neuron-monitor's sample DaemonSet (no k8s info)."""
HONORED = "honorLabels true, neuron-monitor with --enable-k8s-info"


@pytest.fixture(scope="module", params=[CHART_DEFAULTS, HONORED])
def measured(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[PrometheusClient, Fleet]]:
    honored = request.param == HONORED
    with backend_of(PLANE, nodes_per_group=2) as sandbox, contextlib.ExitStack() as stack:
        client = Client(sandbox.access)
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
            gpu_exporter=ExporterOptions(kubernetes_labels=True, honor_labels=honored),
            neuron_exporter=ExporterOptions(kubernetes_labels=honored, honor_labels=honored),
        )
        fleet = Fleet(sandbox.access, spec).start()
        stack.callback(fleet.stop)
        _wait(lambda: fleet.snapshot().variants["candidate"].pods == 1)
        url = stack.enter_context(metrics_endpoint(fleet))
        jobs = serve_exporters(fleet.node_exporters(), stack)
        folder: Path = tmp_path_factory.mktemp("fleet-prometheus")
        prometheus = PrometheusServer(tool("prometheus"), folder, [url[7:]], jobs).start()
        stack.callback(prometheus.stop)
        reader = PrometheusClient(prometheus.url)
        _wait(lambda: _scrapes(reader) >= 6, timeout=40)
        yield reader, fleet


def _wait(condition: Any, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)  # bounded poll of real processes


def _scrapes(reader: PrometheusClient) -> float:
    """Scrapes of the fleet in the last 6 s: the 5 s windows below need a full one."""
    series = reader.instant('count_over_time(up{job="fleet"}[6s])', datetime.now(UTC))
    return series[0].samples[0][1] if series else 0


def query(
    client: PrometheusClient, fleet: Fleet, metric: str, variant: Variant, averaged: bool = False
) -> float:
    """``metric`` of the preset for ``variant``, rendered as the operator renders it: for the
    variant's pods as the API server lists them and their nodes' instance ids (``averaged``
    over the window, as the cost model reads utilization)."""
    api = Client(fleet.access)
    listed = (api.get("/api/v1/namespaces/fleet/pods") or {}).get("items", [])
    nodes = (api.get("/api/v1/nodes") or {}).get("items", [])
    mine = set(fleet.pods(variant))
    pods = [p for p in listed if p["metadata"]["name"] in mine]
    accelerator: Accelerator = "gpu" if variant == "baseline" else "neuron"
    target = variant_target(variant, "fleet", "x", pods, nodes=nodes, accelerator=accelerator)
    request = MetricRequest(metric, variant, PresetMetric(metric), averaged=averaged)
    promql = render_promql(request, target, "vllm", "5s")
    series = client.instant(promql, datetime.now(UTC))
    assert len(series) == 1, promql
    return series[0].samples[0][1]


@pytest.mark.parametrize(
    ("variant", "profile", "replicas"), [("baseline", GPU, 2), ("candidate", NEURON, 1)]
)
def test_p99_and_token_rate_match_the_simulated_profile(
    measured: tuple[PrometheusClient, Fleet],
    variant: Variant,
    profile: ServingProfile,
    replicas: int,
) -> None:
    client, fleet = measured
    per_pod = RPS / 3  # three Ready pods behind one Service
    rates = serve(profile, per_pod)
    # A p99 of 1000 drawn requests has a standard error of about 4% here, 5% when a busy
    # machine leaves three scrapes, 3 s of requests, in the 5 s window; histogram buckets 10%
    # apart add up to 5% of interpolation: 4 standard errors and the buckets, 0.25 (a CI run
    # read 2.39 for the candidate's 2.0, 0.195 off).
    p99 = query(client, fleet, "latency_p99", variant)
    assert p99 == pytest.approx(rates.latency_quantile(0.99), rel=0.25)
    tokens = query(client, fleet, "token_rate", variant)
    assert tokens == pytest.approx(replicas * rates.succeeded * GENERATED, rel=0.15)
    # Averaged over the window as the cost model reads it: one scrape's gauge follows the last
    # second's draws, a few hundred requests on a machine busy enough to delay them.
    utilization = query(client, fleet, "accelerator_utilization", variant, averaged=True)
    print(f"{variant} utilization {utilization:.4f} (averaged), one scrape "
          f"{query(client, fleet, 'accelerator_utilization', variant):.4f}, "
          f"expected {rates.utilization:.4f}")  # fmt: skip
    assert utilization == pytest.approx(rates.utilization, rel=0.15)


def test_the_error_ratio_is_the_profiles(measured: tuple[PrometheusClient, Fleet]) -> None:
    client, fleet = measured
    # The baseline answers about 2000 requests in 5 s: 4 standard errors of a 1% ratio.
    bound = 4 * math.sqrt(0.01 * 0.99 / 2000)
    assert query(client, fleet, "error_ratio", "baseline") == pytest.approx(0.01, abs=bound)
    assert query(client, fleet, "error_ratio", "candidate") == 0


def scraped(
    measured: tuple[PrometheusClient, Fleet], request: pytest.FixtureRequest, metric: str
) -> tuple[list[dict[str, str]], Fleet, bool]:
    """Every series of ``metric`` by its labels, the fleet, and whether labels were honored."""
    client, fleet = measured
    labels = [dict(s.labels) for s in client.instant(metric, datetime.now(UTC))]
    return labels, fleet, HONORED in request.node.callspec.id


def test_dcgm_targets_are_the_exporter_pods_and_the_gpus_pod_is_exported_or_honored(
    measured: tuple[PrometheusClient, Fleet], request: pytest.FixtureRequest
) -> None:
    gpus, fleet, honored = scraped(measured, request, "DCGM_FI_DEV_GPU_UTIL")
    assert len(gpus) == 2, "one per g5.xlarge node, each from its own exporter target"
    assert len({g["instance"] for g in gpus}) == 2
    assert {g["job"] for g in gpus} == {"dcgm-exporter"}
    assert {g["service"] for g in gpus} == {"dcgm-exporter"}
    assert {g["endpoint"] for g in gpus} == {"metrics"}
    baseline = set(fleet.pods("baseline"))
    if honored:
        assert {g["pod"] for g in gpus} == baseline
        assert {g["namespace"] for g in gpus} == {"fleet"}
        assert not any("exported_pod" in g for g in gpus)
    else:
        assert {g["exported_pod"] for g in gpus} == baseline
        assert {g["exported_namespace"] for g in gpus} == {"fleet"}
        assert {g["exported_container"] for g in gpus} == {"vllm"}
        assert all(g["pod"].startswith("dcgm-exporter-") for g in gpus)
        assert {g["namespace"] for g in gpus} == {"monitoring"}
        assert {g["container"] for g in gpus} == {"exporter"}


def test_neuron_monitor_names_the_instance_of_the_candidates_node(
    measured: tuple[PrometheusClient, Fleet], request: pytest.FixtureRequest
) -> None:
    cores, fleet, honored = scraped(measured, request, "neuroncore_utilization_ratio")
    assert len(cores) == 2, "the two NeuronCores the candidate pod holds"
    (candidate,) = fleet.pods("candidate")
    node = client_node_of(fleet, candidate)
    instance_id = node["spec"]["providerID"].rsplit("/", 1)[-1]
    assert {c["instance_id"] for c in cores} == {instance_id}
    assert {c["instance_type"] for c in cores} == {"inf2.8xlarge"}
    assert {c["job"] for c in cores} == {"neuron-monitor"}
    if honored:
        assert {c["pod"] for c in cores} == {candidate}
    else:
        assert all(c["pod"].startswith("neuron-monitor-") for c in cores)
        assert not any("exported_pod" in c for c in cores), "no pod labels without k8s info"


def client_node_of(fleet: Fleet, pod: str) -> dict[str, Any]:
    client = Client(fleet.access)
    manifest = client.get(f"/api/v1/namespaces/fleet/pods/{pod}") or {}
    node = client.get(f"/api/v1/nodes/{manifest['spec']['nodeName']}")
    assert node is not None
    return node
