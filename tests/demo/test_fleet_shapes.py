"""The fleet's exposition in each real exporter's shape, parsed as Prometheus parses it and
linted by promtool: vLLM by release, TGI, dcgm-exporter and neuron-monitor per node, and the
scrape jobs the Prometheus Operator would generate for their ServiceMonitors."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from acceltrial_testbed.sandbox.fleet.accelerators import ExporterOptions, NodeExporter
from acceltrial_testbed.sandbox.fleet.exporter import Fleet, FleetSpec
from acceltrial_testbed.sandbox.fleet.model import ServingProfile
from acceltrial_testbed.sandbox.fleet.serving import exposition
from acceltrial_testbed.sandbox.fleet.traffic import ClusterView, Entry
from acceltrial_testbed.sandbox.servicemonitor import EndpointTarget, ServiceMonitor, scrape_job
from tests.conftest import tool

HEALTHY = ServingProfile(p50=1.0, p99=3.0, capacity_rps=10)
FAILING = ServingProfile(p50=1.0, p99=3.0, capacity_rps=10, error_ratio=0.1)
GPU_NODE, NEURON_NODE = "ip-10-1-0-4.ec2.internal", "ip-10-2-0-4.ec2.internal"


def pod(name: str, node: str, limits: dict[str, str], candidate: bool = False) -> dict[str, Any]:
    labels = {"app": "llama", **({"acceltrial.dev/variant": "candidate"} if candidate else {})}
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"nodeName": node,
                 "containers": [{"name": "vllm", "resources": {"limits": limits}}]},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }  # fmt: skip


def node(name: str, instance_type: str, allocatable: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"node.kubernetes.io/instance-type": instance_type,
                                              "topology.kubernetes.io/zone": "us-east-1b"}},
        "spec": {"providerID": f"aws:///us-east-1b/i-0{name[3:7]}"},
        "status": {"allocatable": allocatable},
    }  # fmt: skip


VIEW = ClusterView(
    pods=[pod("gpu-a", GPU_NODE, {"nvidia.com/gpu": "1"}),
          pod("inf2-a", NEURON_NODE, {"aws.amazon.com/neuroncore": "2"}, candidate=True)],
    services={"llama": {"metadata": {"name": "llama"}, "spec": {"selector": {"app": "llama"}}},
              "inf2": {"metadata": {"name": "inf2"},
                       "spec": {"selector": {"acceltrial.dev/variant": "candidate"}}}},
    route={"spec": {"rules": [{"backendRefs": [{"name": "llama", "weight": 50},
                                               {"name": "inf2", "weight": 50}]}]}},
)  # fmt: skip
NODES = [
    node(GPU_NODE, "g5.2xlarge", {"nvidia.com/gpu": "2"}),
    node(NEURON_NODE, "inf2.8xlarge", {"aws.amazon.com/neuroncore": "2"}),
    node("ip-10-0-0-4.ec2.internal", "m5.xlarge", {"cpu": "4"}),
]


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def fleet(
    rps: float = 8.0, baseline: ServingProfile = HEALTHY, seconds: float = 10.0, **spec: Any
) -> Fleet:
    clock = Clock()
    made = Fleet(
        "http://unused",
        FleetSpec(entry=Entry("ml", route="llama3"), rps=rps, prompt_tokens=100,
                  generated_tokens=50, profiles={"baseline": baseline, "candidate": HEALTHY},
                  **({"seed": 3} | spec)),
        clock=clock, reader=lambda _url, _entry: VIEW, node_reader=lambda _url: NODES,
    )  # fmt: skip
    made.advance()
    clock.now = seconds
    made.advance()
    return made


def samples(text: str, name: str) -> list[dict[str, str]]:
    """Labels of every sample called ``name``, as Prometheus' text parser reads them (the Python
    parser adds ``_total`` to a counter that lacks it, as TGI's do; Prometheus keeps the name)."""
    return [
        {**s.labels, "__value__": str(s.value)}
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name in (name, f"{name}_total")
    ]


def promtool_accepts(text: str) -> None:
    done = subprocess.run(
        [tool("promtool"), "check", "metrics"], input=text, capture_output=True, text=True,
        check=False,
    )  # fmt: skip
    # A lint remark (e.g. TGI's counters without _total) is not a parse error.
    assert "error while linting" not in done.stderr + done.stdout, done.stderr + done.stdout


def test_a_healthy_vllm_server_has_no_5xx_series_until_its_first_5xx() -> None:
    healthy = exposition(fleet().collect())
    statuses = {s["status"] for s in samples(healthy, "http_requests_total")}
    assert statuses == {"2xx"}
    failing = exposition(fleet(baseline=FAILING).collect())
    five = [s for s in samples(failing, "http_requests_total") if s["status"] == "5xx"]
    assert [s["pod"] for s in five] == ["gpu-a"]
    assert {s["handler"] for s in five} == {"/v1/chat/completions"}
    promtool_accepts(healthy)


def test_no_traffic_means_no_http_requests_series_at_all() -> None:
    idle = exposition(fleet(rps=0.0).collect())
    assert samples(idle, "http_requests_total") == []
    assert samples(idle, "vllm:request_success_total"), "vLLM's own counters exist at zero"


def test_every_vllm_series_carries_model_name_and_engine() -> None:
    text = exposition(fleet(model_name="meta-llama/Meta-Llama-3-8B-Instruct").collect())
    for family in text_string_to_metric_families(text):
        if family.name.startswith("vllm:"):
            for sample in family.samples:
                assert sample.labels["model_name"] == "meta-llama/Meta-Llama-3-8B-Instruct"
                assert sample.labels["engine"] == "0"


@pytest.mark.parametrize(
    ("version", "itl", "tpot", "http"),
    [("0.12.0", True, False, True), ("0.11.0", True, True, True),
     ("v0.10.1", False, True, True), ("0.7", False, True, False)],
)  # fmt: skip
def test_the_vllm_release_decides_the_inter_token_names_and_http_requests(
    version: str, itl: bool, tpot: bool, http: bool
) -> None:
    text = exposition(fleet(vllm_versions={"baseline": version, "candidate": "0.11.0"}).collect())

    def has(name: str) -> bool:
        return any(s["pod"] == "gpu-a" for s in samples(text, name))

    assert has("vllm:inter_token_latency_seconds_count") is itl
    assert has("vllm:time_per_output_token_seconds_count") is tpot
    assert has("http_requests_total") is http
    promtool_accepts(text)


def test_tgi_counts_a_request_when_it_starts_and_success_when_it_ends() -> None:
    text = exposition(fleet(server="tgi").collect())
    assert "\ntgi_request_count{" in text, "TGI's counters have no _total suffix"
    count = {s["pod"]: float(s["__value__"]) for s in samples(text, "tgi_request_count")}
    success = {s["pod"]: float(s["__value__"]) for s in samples(text, "tgi_request_success")}
    assert count["gpu-a"] > success["gpu-a"] > 0, "requests in flight are counted, not ended"
    assert samples(text, "tgi_request_failure") == [], "no failure series before a failure"
    for histogram in ("tgi_request_duration", "tgi_request_queue_duration",
                      "tgi_request_mean_time_per_token_duration",
                      "tgi_request_generated_tokens", "tgi_request_input_length"):  # fmt: skip
        assert samples(text, f"{histogram}_count"), histogram
    tokens = samples(text, "tgi_request_generated_tokens_sum")
    per_request = float(tokens[0]["__value__"]) / success[tokens[0]["pod"]]
    assert per_request == pytest.approx(50, rel=0.3), "drawn around the fleet's 50 a request"
    assert not any(f.name.startswith("vllm:") for f in text_string_to_metric_families(text))
    promtool_accepts(text)


def test_tgi_failures_carry_their_kind_once_they_happen() -> None:
    text = exposition(fleet(server="tgi", baseline=FAILING).collect())
    failures = samples(text, "tgi_request_failure")
    assert [(s["pod"], s["err"]) for s in failures] == [("gpu-a", "generation")]
    overloaded = exposition(fleet(rps=40.0, server="tgi").collect())
    kinds = {s["err"] for s in samples(overloaded, "tgi_request_failure")}
    assert kinds == {"overloaded"}, "beyond capacity TGI turns requests away as overloaded"


def exporters(made: Fleet) -> dict[str, NodeExporter]:
    return {e.exporter: e for e in made.node_exporters()}


def test_one_exporter_per_accelerator_node_and_none_elsewhere() -> None:
    found = [(e.exporter, e.node.name) for e in fleet().node_exporters()]
    assert found == [("dcgm", GPU_NODE), ("neuron", NEURON_NODE)]


def test_dcgm_reports_every_gpu_of_its_node_and_maps_the_held_one_to_its_pod() -> None:
    dcgm = exporters(fleet())["dcgm"]
    text = exposition(dcgm.collect())
    gpus = {s["gpu"]: s for s in samples(text, "DCGM_FI_DEV_GPU_UTIL")}
    assert set(gpus) == {"0", "1"}
    held, idle = gpus["0"], gpus["1"]
    assert (held["pod"], held["namespace"], held["container"]) == ("gpu-a", "ml", "vllm")
    assert 0 < float(held["__value__"]) <= 100, "a percentage"
    assert "pod" not in idle
    assert float(idle["__value__"]) == 0
    assert held["modelName"] == "NVIDIA A10G"
    assert held["Hostname"] == GPU_NODE
    assert held["UUID"].startswith("GPU-")
    assert dcgm.pod.startswith("dcgm-exporter-")
    assert dcgm.daemonset.namespace == "monitoring"
    promtool_accepts(text)


def test_neuron_monitor_reports_instance_labels_only_unless_k8s_info_is_on() -> None:
    text = exposition(exporters(fleet())["neuron"].collect())
    cores = samples(text, "neuroncore_utilization_ratio")
    assert [c["neuroncore"] for c in cores] == ["0", "1"]
    assert {c["instance_id"] for c in cores} == {"i-010-2"}, "the id in the Node's providerID"
    assert {c["instance_type"] for c in cores} == {"inf2.8xlarge"}
    assert {c["availability_zone"] for c in cores} == {"us-east-1b"}
    assert {c["region"] for c in cores} == {"us-east-1"}
    assert not any({"pod", "namespace", "container"} & c.keys() for c in cores)
    assert all(0 < float(c["__value__"]) <= 1 for c in cores), "a ratio"
    promtool_accepts(text)
    k8s = ExporterOptions(kubernetes_labels=True)
    text = exposition(exporters(fleet(neuron_exporter=k8s))["neuron"].collect())
    assert {c["pod"] for c in samples(text, "neuroncore_utilization_ratio")} == {"inf2-a"}


def test_the_servicemonitor_job_is_a_valid_prometheus_config(tmp_path: Path) -> None:
    monitor = ServiceMonitor("monitoring", "dcgm-exporter", "metrics", honor_labels=False)
    targets: Sequence[EndpointTarget] = [
        EndpointTarget("127.0.0.1:9400", "dcgm-exporter-abcde", GPU_NODE, "exporter")
    ]
    job = scrape_job(monitor, targets)
    assert job["job_name"] == "serviceMonitor/monitoring/dcgm-exporter/0"
    assert job["honor_labels"] is False
    config = tmp_path / "prometheus.yml"
    config.write_text(yaml.safe_dump({"scrape_configs": [job]}))
    done = subprocess.run(
        [tool("promtool"), "check", "config", str(config)], capture_output=True, text=True,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
