"""The Prometheus metrics source: the HTTP API client (client.py), the PromQL of the presets
and templates (presets.py), and the reader that answers the analysis' requests (reader.py)."""

from acceltrial.providers.metrics.prometheus.client import (
    Auth,
    BadResponse,
    PrometheusBusy,
    PrometheusClient,
    PrometheusServerError,
    PrometheusUnreachable,
    QueryRejected,
    QueryTimeout,
    Series,
    sigv4_signer,
)
from acceltrial.providers.metrics.prometheus.reader import PrometheusReader

__all__ = [
    "Auth",
    "BadResponse",
    "PrometheusBusy",
    "PrometheusClient",
    "PrometheusReader",
    "PrometheusServerError",
    "PrometheusUnreachable",
    "QueryRejected",
    "QueryTimeout",
    "Series",
    "sigv4_signer",
]
