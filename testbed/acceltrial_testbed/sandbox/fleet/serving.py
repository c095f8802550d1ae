"""Serving a collector's metrics over HTTP, in Prometheus' classic text format, written here.

prometheus_client's OpenMetrics output (which Prometheus asks for first) rewrites ``:`` in
sample names to ``_``, so ``vllm:e2e_request_latency_seconds`` would be stored under another
name, and its text output names every counter ``..._total``, which TGI's exporter does not. The
writer below prints each family under the name its samples carry.

Each accelerator exporter (one per node) gets its own endpoint, and with it the scrape job a
ServiceMonitor would give it (:func:`serve_exporters`).
"""

from __future__ import annotations

import contextlib
import functools
import math
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from acceltrial_testbed.sandbox.fleet.accelerators import NodeExporter
from acceltrial_testbed.sandbox.fleet.counters import Histogram
from acceltrial_testbed.sandbox.servicemonitor import EndpointTarget, ServiceMonitor, scrape_job

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class BareCounter(Metric):
    """A counter whose samples carry its name as is, without a ``_total`` suffix (TGI's)."""

    def __init__(self, name: str, documentation: str) -> None:
        super().__init__(name, documentation, "counter")


class HistogramRows(Metric):
    """A histogram family written straight to text, one row per label set: the fleet's
    histograms have 124 buckets, and a scrape of a few pods through prometheus_client's
    per-sample objects took longer than Prometheus' one-second timeout on a busy machine.
    Each row's bucket lines keep their label text from one scrape to the next."""

    def __init__(self, name: str, documentation: str, labels: Sequence[str]) -> None:
        super().__init__(name, documentation, "histogram")
        self.labelnames = tuple(labels)
        self.rows: list[tuple[tuple[str, ...], Histogram]] = []
        self.timestamp: float | None = None

    def add_row(self, values: Sequence[str], histogram: Histogram) -> None:
        """The histogram of one label set, as it stands now (its counts are copied)."""
        snapshot = Histogram(histogram.bounds, histogram.buckets.copy())
        snapshot.count, snapshot.total = histogram.count, histogram.total
        self.rows.append((tuple(values), snapshot))

    def text(self) -> Iterator[str]:
        stamp = "" if self.timestamp is None else f" {round(self.timestamp * 1000)}"
        for values, histogram in self.rows:
            labels = tuple(zip(self.labelnames, values, strict=True))
            prefixes = _bucket_prefixes(self.name, labels, histogram.bounds)
            for prefix, count in zip(prefixes, histogram.buckets.tolist(), strict=True):
                yield f"{prefix}{count!r}{stamp}"
            where = _labels((*labels, ("le", "+Inf")))
            yield f"{self.name}_bucket{where} {_number(histogram.count)}{stamp}"
            yield f"{self.name}_count{_labels(labels)} {_number(histogram.count)}{stamp}"
            yield f"{self.name}_sum{_labels(labels)} {_number(histogram.total)}{stamp}"


@functools.lru_cache(maxsize=1 << 12)
def _bucket_prefixes(
    name: str, labels: tuple[tuple[str, str], ...], bounds: tuple[float, ...]
) -> tuple[str, ...]:
    return tuple(f"{name}_bucket{_labels((*labels, ('le', repr(b))))} " for b in bounds)


def exposition(families: Iterable[Metric]) -> str:
    """The text format (version 0.0.4) of ``families``."""
    lines: list[str] = []
    for family in families:
        name = _family_name(family)
        documentation = family.documentation.replace("\\", r"\\").replace("\n", r"\n")
        lines.append(f"# HELP {name} {documentation}")
        lines.append(f"# TYPE {name} {family.type}")
        if isinstance(family, HistogramRows):
            lines.extend(family.text())
            continue
        for sample in family.samples:
            where = _labels(tuple(sample.labels.items()))
            stamp = "" if sample.timestamp is None else f" {round(float(sample.timestamp) * 1000)}"
            lines.append(f"{sample.name}{where} {_number(sample.value)}{stamp}")
    return "\n".join(lines) + "\n"


def _family_name(family: Metric) -> str:
    if family.type == "counter" and not isinstance(family, BareCounter):
        return family.name + "_total"  # as prometheus_client's own text output names it
    return family.name


@functools.lru_cache(maxsize=1 << 16)
def _labels(items: tuple[tuple[str, str], ...]) -> str:
    # The same label sets come back every scrape: rendered once, a scrape of many pods stays
    # well inside Prometheus' timeout.
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in items) + "}" if items else ""


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _escape(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


SHUTDOWN_POLL_SECONDS = 0.05
"""How often an endpoint's server loop looks for a shutdown request."""


@contextmanager
def metrics_endpoint(collector: Collector) -> Iterator[str]:
    """Serve ``collector`` at ``/metrics`` on a free loopback port; yield the base URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = exposition(collector.collect()).encode()
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass  # one line per scrape would drown the demo's output

    with serving_on_loopback(Handler, "fleet-metrics") as url:
        yield url


class _Listening(ThreadingHTTPServer):
    """A listen backlog as a production server's (uvicorn's is 2048): the standard library's
    5 reset the connections of a capacity sweep's 64 clients starting at once."""

    request_queue_size = 256


@contextmanager
def serving_on_loopback(handler: type[BaseHTTPRequestHandler], name: str) -> Iterator[str]:
    """Serve ``handler`` on a free loopback port in a thread called ``name``; yield the base
    URL, and stop the server on exit."""
    server = _Listening(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    # shutdown() waits for the loop's next poll: at the default 0.5 s, a fleet of a dozen
    # endpoints closed one after another took 6 s to stop.
    thread = threading.Thread(
        target=server.serve_forever, args=(SHUTDOWN_POLL_SECONDS,), name=name, daemon=True
    )
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def serve_exporters(
    exporters: Sequence[NodeExporter], stack: contextlib.ExitStack
) -> list[dict[str, Any]]:
    """Serve each node's accelerator exporter on its own endpoint (closed with ``stack``);
    return the scrape jobs the Prometheus Operator would generate for their ServiceMonitors."""
    targets: dict[str, list[EndpointTarget]] = {}
    monitors: dict[str, ServiceMonitor] = {}
    for exporter in exporters:
        url = stack.enter_context(metrics_endpoint(exporter))
        daemonset = exporter.daemonset
        monitors[daemonset.name] = ServiceMonitor(
            daemonset.namespace, daemonset.name, daemonset.port, exporter.options.honor_labels
        )
        targets.setdefault(daemonset.name, []).append(
            EndpointTarget(
                url.removeprefix("http://"), exporter.pod, exporter.node.name, daemonset.container
            )
        )
    return [scrape_job(monitors[name], listed) for name, listed in targets.items()]
