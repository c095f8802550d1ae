"""The trial's metrics source: the Secrets ``analysis.prometheus`` names, read through the kube
gateway and handed to the metrics source factory (which only maps values to settings)."""

from __future__ import annotations

from acceltrial.api.spec import AnalysisSpec, PrometheusSpec
from acceltrial.kube.gateway import Kube
from acceltrial.providers.metrics.factory import ResolvedSecrets, source_for
from acceltrial.providers.metrics.port import MetricsSource


def metrics_source(kube: Kube, namespace: str, analysis: AnalysisSpec) -> MetricsSource:
    """The trial's metrics source, with the secret values its spec refers to."""
    return source_for(analysis, resolve_secrets(kube, namespace, analysis.prometheus))


def resolve_secrets(kube: Kube, namespace: str, prometheus: PrometheusSpec) -> ResolvedSecrets:
    secrets = ResolvedSecrets()
    auth, tls = prometheus.auth, prometheus.tls
    if auth is not None and auth.bearer_token_secret_ref is not None:
        ref = auth.bearer_token_secret_ref
        secrets = ResolvedSecrets(bearer_token=kube.secret_value(namespace, ref.name, ref.key))
    if auth is not None and auth.basic_auth_secret_ref is not None:
        name = auth.basic_auth_secret_ref.name
        user = kube.secret_value(namespace, name, "username")
        password = kube.secret_value(namespace, name, "password")
        if user is not None and password is not None:
            secrets = ResolvedSecrets(basic=(user, password))
    if tls is not None and tls.ca_secret_ref is not None:
        ref = tls.ca_secret_ref
        secrets = ResolvedSecrets(
            bearer_token=secrets.bearer_token,
            basic=secrets.basic,
            ca_pem=kube.secret_value(namespace, ref.name, ref.key),
        )
    return secrets
