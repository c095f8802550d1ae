"""Building a Prometheus client from a trial's ``analysis.prometheus`` and its resolved secrets.

The caller (handlers/metrics_source.py, through the kube gateway) reads the Secrets the spec
names; this module only maps values to client settings, so it stays testable without a cluster.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

from acceltrial.api.durations import duration_seconds
from acceltrial.api.spec import PrometheusSpec
from acceltrial.providers.metrics.prometheus import Auth, PrometheusClient, sigv4_signer

T = TypeVar("T")


@dataclass(frozen=True)
class ResolvedSecrets:
    """The secret values a PrometheusSpec refers to, read by the caller."""

    bearer_token: str | None = None
    basic: tuple[str, str] | None = None
    ca_pem: str | None = None


class MissingSecret(ValueError):
    """The spec names a secret value that was not provided."""


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
