"""The operator's Prometheus metrics and the endpoint that serves them.

docs/operations.md lists every metric; the chart's dashboard and alerts (charts/acceltrial/files)
read them, so a rename here is a breaking change there.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info, start_http_server

from acceltrial import __version__
from acceltrial.api.status import EconomicsStatus

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
MEASUREMENTS = Counter(
    "acceltrial_measurements",
    "Measurements of a step (or the bake), by outcome: Pass, Fail, Inconclusive, Thin (too few "
    "requests to judge) or Error (the metrics source could not be read).",
    ["namespace", "trial", "outcome"],
    registry=REGISTRY,
)
UNIT_COST = Gauge(
    "acceltrial_unit_cost_usd",
    "What cost criteria judge: a variant's cost per unit of capacity at the target utilization, "
    "in USD, per 1M tokens or per 1k requests, as of the trial's latest measurement.",
    ["namespace", "trial", "variant", "per"],
    registry=REGISTRY,
)
NOTIFICATIONS = Counter(
    "acceltrial_notifications",
    "Notifications of trials' events, by receiver kind (webhook, slack, sns) and result "
    "(delivered, failed: after its retries, or refused for good).",
    ["provider", "result"],
    registry=REGISTRY,
)
# Every receiver kind and result exported from the start, at 0: a rate over a counter that
# appears only at its first failure misses that failure (and the dashboard shows nothing).
for _provider in ("webhook", "slack", "sns"):
    for _result in ("delivered", "failed", "refused"):
        NOTIFICATIONS.labels(_provider, _result)
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


def record_costs(namespace: str, trial: str, economics: EconomicsStatus | None) -> None:
    """Export each variant's unit costs, where the latest measurement had them."""
    if economics is None:
        return
    for variant, figures in (("baseline", economics.baseline), ("candidate", economics.candidate)):
        if figures is None:
            continue
        for per, value in (
            ("1M tokens", figures.unit_cost_per_million_tokens),
            ("1k requests", figures.unit_cost_per_thousand_requests),
        ):
            if value is not None:
                UNIT_COST.labels(namespace, trial, variant, per).set(value)


def serve_metrics(port: int, address: str = "0.0.0.0") -> int:
    """Serve /metrics on ``port`` (0 picks a free one); return the port bound."""
    server, _thread = start_http_server(port, addr=address, registry=REGISTRY)
    return int(server.server_port)
