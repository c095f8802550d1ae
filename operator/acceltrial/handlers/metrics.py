"""The operator's Prometheus metrics and the endpoint that serves them."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info, start_http_server

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

TRIAL_PHASE = Gauge(
    "acceltrial_trial_phase",
    "1 for the phase each trial is in, 0 for the others.",
    ["namespace", "trial", "phase"],
    registry=REGISTRY,
)
CANARY_WEIGHT = Gauge(
    "acceltrial_canary_weight",
    "Percentage of traffic the candidate receives.",
    ["namespace", "trial"],
    registry=REGISTRY,
)
ANALYSIS_RESULTS = Counter(
    "acceltrial_analysis_results",
    "Criterion measurements, by verdict.",
    ["namespace", "trial", "criterion", "verdict"],
    registry=REGISTRY,
)
NOTIFICATIONS = Counter(
    "acceltrial_notifications",
    "Notifications of trials' events, by receiver kind (webhook, slack, sns) and result "
    "(delivered, failed: after its retries, or refused for good).",
    ["provider", "result"],
    registry=REGISTRY,
)
RECONCILE_SECONDS = Histogram(
    "acceltrial_reconcile_duration_seconds",
    "Time one tick of a trial takes: observing, deciding, acting.",
    registry=REGISTRY,
)


def record_trial(
    namespace: str, trial: str, phase: str, weight: int, phases: tuple[str, ...]
) -> None:
    """Export a trial's phase (one-hot over ``phases``) and weight."""
    for candidate in phases:
        TRIAL_PHASE.labels(namespace, trial, candidate).set(1 if candidate == phase else 0)
    CANARY_WEIGHT.labels(namespace, trial).set(weight)


def serve_metrics(port: int, address: str = "0.0.0.0") -> int:
    """Serve /metrics on ``port`` (0 picks a free one); return the port bound."""
    server, _thread = start_http_server(port, addr=address, registry=REGISTRY)
    return int(server.server_port)
