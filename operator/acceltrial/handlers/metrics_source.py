"""The trial's metrics source: the Secrets ``analysis.prometheus`` names, read through the kube
gateway (only those labelled as readable by trials, handlers/secrets.py) and handed to the
metrics source factory (which only maps values to settings)."""

from __future__ import annotations

from acceltrial.api.spec import AnalysisSpec, PrometheusSpec
from acceltrial.handlers.secrets import SecretProblem, readable_secret
from acceltrial.kube.gateway import Kube
from acceltrial.providers.metrics.factory import ResolvedSecrets, source_for
from acceltrial.providers.metrics.port import MetricsSource


def metrics_source(kube: Kube, namespace: str, analysis: AnalysisSpec) -> MetricsSource:
    """The trial's metrics source, with the secret values its spec refers to."""
    return source_for(analysis, resolve_secrets(kube, namespace, analysis.prometheus))


def resolve_secrets(kube: Kube, namespace: str, prometheus: PrometheusSpec) -> ResolvedSecrets:
    """The values of the Secrets ``prometheus`` names, each read only when it opted in;
    SecretProblem names the first that cannot be read."""
    bearer_token = basic = ca_pem = None
    auth, tls = prometheus.auth, prometheus.tls
    if auth is not None and auth.bearer_token_secret_ref is not None:
        ref = auth.bearer_token_secret_ref
        bearer_token = readable_secret(kube, namespace, ref.name, ref.key)
    if auth is not None and auth.basic_auth_secret_ref is not None:
        name = auth.basic_auth_secret_ref.name
        user = readable_secret(kube, namespace, name, "username")
        basic = (user, readable_secret(kube, namespace, name, "password"))
    if tls is not None and tls.ca_secret_ref is not None:
        ref = tls.ca_secret_ref
        ca_pem = readable_secret(kube, namespace, ref.name, ref.key)
    return ResolvedSecrets(bearer_token=bearer_token, basic=basic, ca_pem=ca_pem)


def secret_findings(
    kube: Kube, namespace: str, prometheus: PrometheusSpec
) -> tuple[list[str], list[str]]:
    """For preflight: a named Secret that cannot be read for good is a problem (with the
    fix), one the API server could not answer now is waited for."""
    try:
        resolve_secrets(kube, namespace, prometheus)
    except SecretProblem as problem:
        finding = f"analysis.prometheus: {problem}"
        return ([], [finding]) if problem.temporary else ([finding], [])
    return [], []
