"""Building a trial's metrics source from its ``analysis`` and the secrets it resolved.

``analysis.source`` chooses the source (``prometheus``, the default; a new source is one more
entry in :data:`SOURCES` and its own folder). The caller (handlers/metrics_source.py, through the
kube gateway) reads the Secrets the spec names; this module only maps values to client settings,
so it stays testable without a cluster.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from acceltrial.api.durations import duration_seconds
from acceltrial.api.spec import AnalysisSpec, PrometheusSpec
from acceltrial.providers.metrics.port import MetricsSource
from acceltrial.providers.metrics.prometheus import (
    Auth,
    PrometheusClient,
    PrometheusReader,
    sigv4_signer,
)

T = TypeVar("T")


@dataclass(frozen=True)
class ResolvedSecrets:
    """The secret values a PrometheusSpec refers to, read by the caller."""

    bearer_token: str | None = None
    basic: tuple[str, str] | None = None
    ca_pem: str | None = None


class MissingSecret(ValueError):
    """The spec names a secret value that was not provided."""


def source_for(analysis: AnalysisSpec, secrets: ResolvedSecrets) -> MetricsSource:
    """The metrics source ``analysis.source`` names, configured as the spec says."""
    return SOURCES[analysis.source](analysis, secrets)


def _prometheus(analysis: AnalysisSpec, secrets: ResolvedSecrets) -> MetricsSource:
    return reader_for(analysis, client_for(analysis.prometheus, secrets))


def reader_for(analysis: AnalysisSpec, client: PrometheusClient) -> PrometheusReader:
    """The trial's requests asked of ``client``, in the trial's preset and interval."""
    return PrometheusReader(client, analysis.preset, analysis.interval)


SOURCES: dict[str, Callable[[AnalysisSpec, ResolvedSecrets], MetricsSource]] = {
    "prometheus": _prometheus,
}
"""Metrics sources by their ``analysis.source`` name."""


def client_for(spec: PrometheusSpec, secrets: ResolvedSecrets) -> PrometheusClient:
    """A client configured as ``spec`` says."""
    auth = Auth()
    if spec.auth is not None:
        if spec.auth.bearer_token_secret_ref is not None:
            auth = Auth(bearer_token=_required(secrets.bearer_token, "auth.bearerTokenSecretRef"))
        elif spec.auth.basic_auth_secret_ref is not None:
            auth = Auth(basic=_required(secrets.basic, "auth.basicAuthSecretRef"))
        elif spec.auth.sigv4 is not None:
            auth = Auth(sign=sigv4_signer(spec.auth.sigv4.region, spec.auth.sigv4.service))
    ca_pem = None
    insecure = False
    if spec.tls is not None:
        insecure = spec.tls.insecure_skip_verify
        if spec.tls.ca_secret_ref is not None:
            ca_pem = _required(secrets.ca_pem, "tls.caSecretRef")
    return PrometheusClient(
        spec.address,
        timeout_seconds=duration_seconds(spec.timeout),
        auth=auth,
        ca_pem=ca_pem,
        insecure_skip_verify=insecure,
    )


def _required(value: T | None, field: str) -> T:
    if value is None:
        raise MissingSecret(f"analysis.prometheus.{field}: the referenced secret value is missing")
    return value
