"""TLS to Prometheus: a private CA is trusted when given, refused when not; and the client is
built from a trial's analysis.prometheus with its resolved secrets."""

from __future__ import annotations

import json
import ssl
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from acceltrial.api.spec import PrometheusSpec
from acceltrial.providers.metrics.factory import MissingSecret, ResolvedSecrets, client_for
from acceltrial.providers.metrics.prometheus import PrometheusUnreachable
from tests.integration.http_stub import http_server

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
EMPTY = json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}}).encode()


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1, made with the openssl command."""
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=prometheus.test",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


@pytest.fixture(scope="module")
def https_url(certificate: tuple[Path, Path]) -> Iterator[str]:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*map(str, certificate))
    with http_server(lambda _h, _b: (200, EMPTY), tls=context) as url:
        yield url


def spec(address: str, **extra: object) -> PrometheusSpec:
    return PrometheusSpec.model_validate({"address": address, "timeout": "5s", **extra})


def test_a_private_ca_is_trusted_when_given(https_url: str, certificate: tuple[Path, Path]) -> None:
    ca = certificate[0].read_text()
    client = client_for(
        spec(https_url, tls={"caSecretRef": {"name": "prom-ca", "key": "ca.crt"}}),
        ResolvedSecrets(ca_pem=ca),
    )
    assert client.instant("up", NOW) == []


def test_an_unknown_ca_is_refused(https_url: str) -> None:
    with pytest.raises(PrometheusUnreachable, match="CERTIFICATE_VERIFY_FAILED"):
        client_for(spec(https_url), ResolvedSecrets()).instant("up", NOW)


def test_verification_can_be_switched_off(https_url: str) -> None:
    client = client_for(spec(https_url, tls={"insecureSkipVerify": True}), ResolvedSecrets())
    assert client.instant("up", NOW) == []


def test_a_named_secret_must_be_provided() -> None:
    with pytest.raises(MissingSecret, match=r"analysis\.prometheus\.auth\.bearerTokenSecretRef"):
        client_for(
            spec("http://p:9090", auth={"bearerTokenSecretRef": {"name": "t", "key": "token"}}),
            ResolvedSecrets(),
        )
