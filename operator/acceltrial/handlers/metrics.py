"""The operator's Prometheus metrics and the endpoint that serves them."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Info, start_http_server

from acceltrial import __version__

REGISTRY = CollectorRegistry()
BUILD_INFO = Info(
    "acceltrial_build", "Version of the running acceltrial operator.", registry=REGISTRY
)
BUILD_INFO.info({"version": __version__})
ADMISSIONS = Counter(
    "acceltrial_admissions",
    "Trial specs the operator judged, by result (valid or invalid).",
    ["result"],
    registry=REGISTRY,
)


def serve_metrics(port: int, address: str = "0.0.0.0") -> int:
    """Serve /metrics on ``port`` (0 picks a free one); return the port bound."""
    server, _thread = start_http_server(port, addr=address, registry=REGISTRY)
    return int(server.server_port)
