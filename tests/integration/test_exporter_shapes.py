"""Every preset against the shapes real exporters and real scrapes produce (issue: the vLLM
error ratio was empty on a healthy server, utilization empty behind the usual ServiceMonitor).

The fixtures in tests/fixtures/exporters are single scrapes of the upstream exporters, written from
their sources (cited in each file) and checked with ``promtool check metrics``. Here each becomes
ten minutes of stored history the way Prometheus stores a scrape: counters grow to the scraped
value, gauges stay, and the target labels Kubernetes service discovery adds are attached, with
``honor_labels: false`` renaming a clashing exporter label to ``exported_<name>`` as the Prometheus
Operator's ServiceMonitor does. The history is loaded with ``promtool tsdb create-blocks-from
openmetrics`` into a real Prometheus and queried through the presets as the operator renders them.
"""

from __future__ import annotations

import math
import re
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest

from acceltrial.engine.analysis import Reading
from acceltrial.engine.metric_check import answer
from acceltrial.engine.metrics import (
    Accelerator,
    MetricRequest,
    PresetMetric,
    Variant,
    VariantTarget,
)
from acceltrial.providers.metrics.port import Ask
from acceltrial.providers.metrics.prometheus import PrometheusClient, PrometheusReader
from tests.conftest import REPO, tool
from tests.integration.prometheus_server import create_blocks, running_prometheus

FIXTURES = REPO / "tests" / "fixtures" / "exporters"
NAMESPACE = "serving"
SECONDS = 600
STEP = 15
INTERVAL = "2m"
REQUESTS = PresetMetric("requests")
INSTANCE_ID = "i-0a1b2c3d4e5f60718"  # the node the neuron-monitor fixture was scraped on
SERVER_METRICS = {
    "vllm": ("latency_mean", "latency_p50", "latency_p90", "latency_p99", "ttft_p99", "itl_p99",
             "request_rate", "token_rate", "error_ratio"),
    "tgi": ("latency_mean", "latency_p50", "latency_p90", "latency_p99", "ttft_p99", "itl_p99",
            "request_rate", "token_rate", "error_ratio"),
}  # fmt: skip
# What promtool's lint says of upstream naming, and nothing else: real vLLM uses ':' in names,
# TGI's Rust exporter no _total suffix and no help text, dcgm-exporter upper-case label names.
UPSTREAM_LINT = ("should not contain ':'", 'should have "_total" suffix', "no help text",
                 'should not have "_count" suffix', "'snake_case' not 'camelCase'")  # fmt: skip


@dataclass(frozen=True)
class Shape:
    """One exporter as scraped: the fixture, the pod it serves, how the target is labelled."""

    name: str
    fixture: str
    pod: str
    target: dict[str, str] = field(default_factory=dict)
    honor_labels: bool = False
    idle: bool = False
    """Traffic stopped: counters stay where they are (a variant without traffic)."""

    def labels(self, exporter: dict[str, str]) -> dict[str, str]:
        """The stored labels of one exported series after the scrape's relabelling."""
        stored = dict(exporter)
        for key, value in self.target.items():
            if key in stored and not self.honor_labels:
                stored[f"exported_{key}"] = stored.pop(key)
            if key not in stored:
                stored[key] = value
        return stored


def server(name: str, fixture: str, idle: bool = False) -> Shape:
    """A model server scraped from its own pod: target labels name that pod."""
    pod = f"{name}-0"
    target = {"namespace": NAMESPACE, "pod": pod, "container": "server", "job": "serving/llama3"}
    return Shape(name, fixture, pod, target | {"instance": f"10.0.1.7:8000/{name}"}, idle=idle)


DAEMONSET = {"namespace": "gpu-operator", "pod": "dcgm-exporter-7xk2p", "container": "exporter",
             "service": "dcgm-exporter", "endpoint": "metrics", "job": "dcgm-exporter",
             "instance": "10.0.1.23:9400"}  # fmt: skip
SHAPES = {
    s.name: s
    for s in (
        server("vllm-011", "vllm-0.11.prom"),
        server("vllm-010-old-itl", "vllm-0.10-old-itl.prom"),
        server("vllm-07-no-http", "vllm-0.7-no-http.prom"),
        server("vllm-idle", "vllm-0.11.prom", idle=True),
        server("tgi", "tgi-3.prom"),
        server("tgi-idle", "tgi-3.prom", idle=True),
        Shape("dcgm-servicemonitor", "dcgm-exporter.prom", "llama3-gpu-a", DAEMONSET),
        Shape("dcgm-honor-labels", "dcgm-exporter.prom", "llama3-gpu-b", DAEMONSET, True),
        Shape("neuron-monitor", "neuron-monitor.prom", "llama3-inf2-a",
              DAEMONSET | {"namespace": "monitoring", "pod": "neuron-monitor-4fz8q",
                           "job": "neuron-monitor", "container": "neuron-monitor"}),
    )
}  # fmt: skip


_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"')


def scraped(text: str) -> Iterator[tuple[str, str, dict[str, str], float]]:
    """(family, type, labels, value) of each sample, names exactly as Prometheus stores them
    (prometheus_client's parser would add _total to TGI's counters)."""
    types: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(maxsplit=3)
            types[name] = kind
        elif line and not line.startswith("#"):
            found = _SAMPLE.match(line)
            assert found, line
            name, labels, number = found.groups()
            family = max((f for f in types if name.startswith(f)), key=len)
            yield name, types[family], dict(_LABEL.findall(labels or "")), float(number)


def history(shape: Shape, end: int) -> Iterator[tuple[str, str]]:
    """(family line, sample line) pairs of ten minutes of stored history."""
    text = (FIXTURES / shape.fixture).read_text()
    text = text.replace('pod="llama3-gpu-a"', f'pod="{shape.pod}"')
    for name, kind, exported, number in scraped(text):
        grows = kind in ("counter", "histogram")
        labels = ",".join(f'{k}="{v}"' for k, v in sorted(shape.labels(exported).items()))
        for ts in range(end - SECONDS, end + 1, STEP):
            share = 1.0 if not grows else (0.5 if shape.idle else (ts - end + SECONDS) / SECONDS)
            yield (
                f"# TYPE {name} {'gauge' if not grows else 'unknown'}",
                (f"{name}{{{labels}}} {number * share:.6f} {ts}"),
            )


def openmetrics(end: int) -> str:
    families: dict[str, list[str]] = {}
    for shape in SHAPES.values():
        for header, sample in history(shape, end):
            families.setdefault(header, []).append(sample)
    lines = [line for header, samples in families.items() for line in (header, *samples)]
    return "\n".join([*lines, "# EOF", ""])


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, datetime]]:
    end = int(time.time()) // 60 * 60 - 120
    data = tmp_path_factory.mktemp("shapes") / "data"
    create_blocks(openmetrics(end), data)
    with running_prometheus(data) as url:
        yield url, datetime.fromtimestamp(end, tz=UTC)


def value(
    stored: tuple[str, datetime], preset: str, metric: str, shape: Shape, *,
    accelerator: Accelerator = "gpu", variant: Variant = "baseline",
) -> tuple[float | None, str]:  # fmt: skip
    url, at = stored
    instances = (INSTANCE_ID,) if accelerator == "neuron" else ()
    target = VariantTarget(variant, NAMESPACE, "llama3", (shape.pod,), accelerator, instances)
    request = MetricRequest(metric, variant, PresetMetric(metric))
    reader = PrometheusReader(PrometheusClient(url), preset, INTERVAL)
    found = answer(request, reader.read(request, target, at, at, 15.0))
    return found.value, f"{found.said}: {found.asked}"


@pytest.mark.parametrize("fixture", sorted(p.name for p in FIXTURES.glob("*.prom")))
def test_each_fixture_is_valid_exposition_text(fixture: str) -> None:
    done = subprocess.run(
        [tool("promtool"), "check", "metrics"], input=(FIXTURES / fixture).read_text(),
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode in (0, 3), done.stderr  # 1 is a parse error; 3 lint findings
    findings = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert all(any(quirk in line for quirk in UPSTREAM_LINT) for line in findings), findings


@pytest.mark.parametrize(
    ("shape", "preset"),
    [("vllm-011", "vllm"), ("vllm-010-old-itl", "vllm"), ("tgi", "tgi")],
)
def test_every_server_metric_is_a_number_on_a_healthy_server(
    stored: tuple[str, datetime], shape: str, preset: str
) -> None:
    for metric in SERVER_METRICS[preset]:
        number, said = value(stored, preset, metric, SHAPES[shape])
        assert number is not None, f"{shape} {metric}: {said}"
        assert number >= 0


def test_zero_errors_are_zero_not_empty(stored: tuple[str, datetime]) -> None:
    """Regression: no status="5xx" series on a healthy vLLM made error_ratio empty."""
    assert value(stored, "vllm", "error_ratio", SHAPES["vllm-011"])[0] == 0
    assert value(stored, "tgi", "error_ratio", SHAPES["tgi"])[0] == 0, "in-flight is not an error"


def test_the_inter_token_latency_is_read_under_either_name(stored: tuple[str, datetime]) -> None:
    new = value(stored, "vllm", "itl_p99", SHAPES["vllm-011"])[0]
    old = value(stored, "vllm", "itl_p99", SHAPES["vllm-010-old-itl"])[0]
    assert new is not None
    assert new == old, "the same histogram under its old name"
    assert 0.025 < new <= 0.05


def test_a_vllm_without_http_metrics_cannot_give_an_error_ratio(
    stored: tuple[str, datetime],
) -> None:
    """Releases before spring 2025 export no http_requests_total: no number, and the reason
    (preflight and `acceltrial check` say it before any traffic moves)."""
    number, said = value(stored, "vllm", "error_ratio", SHAPES["vllm-07-no-http"])
    assert number is None
    assert said.startswith("it returned nothing")
    assert value(stored, "vllm", "latency_p99", SHAPES["vllm-07-no-http"])[0] is not None


@pytest.mark.parametrize(("shape", "preset"), [("vllm-idle", "vllm"), ("tgi-idle", "tgi")])
def test_a_variant_without_traffic_is_inconclusive(
    stored: tuple[str, datetime], shape: str, preset: str
) -> None:
    for metric in ("latency_mean", "latency_p99", "ttft_p99", "itl_p99", "error_ratio"):
        number, said = value(stored, preset, metric, SHAPES[shape])
        assert number is None, f"{shape} {metric} must not be judged: {said}"


@pytest.mark.parametrize("shape", ["dcgm-servicemonitor", "dcgm-honor-labels"])
def test_gpu_utilization_behind_a_servicemonitor_either_way(
    stored: tuple[str, datetime], shape: str
) -> None:
    number, said = value(stored, "vllm", "accelerator_utilization", SHAPES[shape])
    assert number == pytest.approx(0.36), said


def test_neuron_utilization_by_instance_without_pod_labels(stored: tuple[str, datetime]) -> None:
    shape = SHAPES["neuron-monitor"]
    number, said = value(
        stored, "vllm", "accelerator_utilization", shape, accelerator="neuron", variant="candidate"
    )
    assert number == pytest.approx(0.64), said


def _same(reading: Reading) -> tuple[object, ...]:
    """A reading's content, NaN equal to NaN (an idle server's quantile)."""
    values = tuple("NaN" if math.isnan(v) else v for v in reading.values)
    return (values, reading.series, reading.requests, reading.parts, reading.error, reading.asked)


@pytest.mark.parametrize(
    ("shapes", "preset"),
    [(("vllm-011", "vllm-idle", "vllm-07-no-http"), "vllm"), (("tgi", "tgi-idle"), "tgi")],
)
def test_readings_asked_together_are_the_readings_asked_alone(
    stored: tuple[str, datetime], shapes: tuple[str, ...], preset: str
) -> None:
    """A measurement asks Prometheus one query for all its readings of a window: each reading
    split from that answer is exactly the one its own query gives, on every exporter shape,
    for instant values, values with their request counts, ranges and raw counters."""
    url, at = stored
    reader = PrometheusReader(PrometheusClient(url), preset, INTERVAL)
    minutes_ago = at - timedelta(minutes=5)
    for spans_window in (False, True):
        asks = [
            Ask(request, VariantTarget("baseline", NAMESPACE, "llama3", (SHAPES[s].pod,), "gpu"))
            for s in shapes
            for request in _requests(preset, spans_window)
        ]
        together = reader.read_together(asks, minutes_ago, at, 15.0)
        alone = [reader.read(a.request, a.target, minutes_ago, at, 15.0) for a in asks]
        assert [_same(r) for r in together] == [_same(r) for r in alone]
        assert any(r.values or r.parts for r in together), "the shapes have data to compare"


def _requests(preset: str, spans_window: bool) -> list[MetricRequest]:
    if spans_window:
        return [
            MetricRequest("p99", "baseline", PresetMetric("latency_p99"), "range"),
            MetricRequest("lat", "baseline", PresetMetric("latency_mean"), counters="latency"),
            MetricRequest("err", "baseline", PresetMetric("error_ratio"), counters="errors"),
        ]
    counted = MetricRequest("e", "baseline", PresetMetric("error_ratio"), requests=REQUESTS)
    metrics = (*SERVER_METRICS[preset], "requests", "scrapes", "accelerator_utilization")
    return [MetricRequest(m, "baseline", PresetMetric(m)) for m in metrics] + [counted]
