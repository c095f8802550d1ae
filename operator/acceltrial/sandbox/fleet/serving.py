"""Serving a collector's metrics over HTTP, always in Prometheus' classic text format.

prometheus_client's OpenMetrics output (which Prometheus asks for first) rewrites ``:`` in
sample names to ``_``, so ``vllm:e2e_request_latency_seconds`` would be stored under another
name; the text format keeps the names real vLLM servers expose.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.registry import Collector


@contextmanager
def metrics_endpoint(collector: Collector) -> Iterator[str]:
    """Serve ``collector`` at ``/metrics`` on a free loopback port; yield the base URL."""
    registry = CollectorRegistry()
    registry.register(collector)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = generate_latest(registry)
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE_LATEST)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass  # one line per scrape would drown the demo's output

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="fleet-metrics", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
