"""The Prometheus client over real HTTP: authentication, SigV4, timeouts, a live scrape."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from prometheus_client import CollectorRegistry, Counter, start_http_server

from acceltrial.providers.metrics.prometheus import (
    Auth,
    BadResponse,
    PrometheusClient,
    PrometheusServerError,
    QueryTimeout,
    sigv4_signer,
)
from tests.integration.http_stub import http_server
from tests.integration.prometheus_server import running_prometheus

VECTOR = {"status": "success", "data": {"resultType": "vector", "result": [
    {"metric": {"pod": "a"}, "value": [1764676800, "NaN"]},
    {"metric": {"pod": "b"}, "value": [1764676800, "+Inf"]},
]}}  # fmt: skip
NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
CREDENTIALS = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")


def test_nan_and_infinity_strings_are_parsed() -> None:
    with http_server(lambda _h, _b: (200, json.dumps(VECTOR).encode())) as url:
        series = PrometheusClient(url).instant("up", NOW)
    assert [s.labels["pod"] for s in series] == ["a", "b"]
    assert str(series[0].samples[0][1]) == "nan"
    assert series[1].samples[0][1] == float("inf")


@pytest.mark.parametrize(
    ("auth", "expected"),
    [
        (Auth(bearer_token="s3cr3t"), "Bearer s3cr3t"),
        (Auth(basic=("grafana", "pw")), "Basic Z3JhZmFuYTpwdw=="),
    ],
)
def test_auth_headers_are_sent(auth: Auth, expected: str) -> None:
    seen: list[str | None] = []

    def respond(handler: BaseHTTPRequestHandler, _: bytes) -> tuple[int, bytes]:
        seen.append(handler.headers.get("Authorization"))
        return 200, json.dumps(VECTOR).encode()

    with http_server(respond) as url:
        PrometheusClient(url, auth=auth).instant("up", NOW)
    assert seen == [expected]


def sigv4_verifier(handler: BaseHTTPRequestHandler, body: bytes) -> tuple[int, bytes]:
    """Recompute the SigV4 signature with botocore from what arrived; 403 unless it matches."""
    authorization = handler.headers["Authorization"]
    amz_date = handler.headers["X-Amz-Date"]
    scheme, _, fields = authorization.partition(" ")
    parts = dict(item.strip().split("=", 1) for item in fields.split(","))
    signed = set(parts["SignedHeaders"].split(";"))
    headers = {k: v for k, v in handler.headers.items() if k.lower() in signed}
    request = AWSRequest(
        method="POST", url=f"http://{handler.headers['Host']}{handler.path}", data=body,
        headers=headers,
    )  # fmt: skip
    request.context["timestamp"] = amz_date
    signer = SigV4Auth(CREDENTIALS, "aps", "us-east-1")
    expected = signer.signature(signer.string_to_sign(request, signer.canonical_request(request)),
                                request)  # fmt: skip
    ok = (
        scheme == "AWS4-HMAC-SHA256"
        and parts["Credential"] == f"AKIDEXAMPLE/{amz_date[:8]}/us-east-1/aps/aws4_request"
        and {"host", "x-amz-date"} <= signed
        and parts["Signature"] == expected
    )
    return (200, json.dumps(VECTOR).encode()) if ok else (403, b'{"error": "bad signature"}')


def test_sigv4_signature_verifies_with_botocore() -> None:
    with http_server(sigv4_verifier) as url:
        signed = PrometheusClient(
            url + "/workspaces/ws-1",
            auth=Auth(sign=sigv4_signer("us-east-1", credentials=CREDENTIALS)),
        )
        assert len(signed.instant("up", NOW)) == 2
        wrong_key = Credentials("AKIDEXAMPLE", "not-the-secret")
        forged = PrometheusClient(
            url, auth=Auth(sign=sigv4_signer("us-east-1", credentials=wrong_key))
        )
        with pytest.raises(Exception, match="HTTP 403"):
            forged.instant("up", NOW)


def test_a_slow_server_times_out() -> None:
    def slow(_h: BaseHTTPRequestHandler, _b: bytes) -> tuple[int, bytes]:
        time.sleep(1.0)  # the server under test is slow; the client gives up after 0.2 s
        return 200, json.dumps(VECTOR).encode()

    with http_server(slow) as url:
        started = time.monotonic()
        with pytest.raises(QueryTimeout, match=r"within 0\.2s"):
            PrometheusClient(url, timeout_seconds=0.2).instant("up", NOW)
        assert time.monotonic() - started < 0.9


@pytest.mark.parametrize(
    ("status", "payload", "error", "text"),
    [
        (503, b'{"status":"error","errorType":"unavailable","error":"overloaded"}',
         PrometheusServerError, "HTTP 503: unavailable: overloaded"),
        (200, b"<html>proxy login</html>", BadResponse, "not JSON"),
        (200, b'{"status":"success","data":{"resultType":"matrix","result":[]}}',
         BadResponse, "expected a vector result"),
    ],
)  # fmt: skip
def test_server_failures_are_typed(
    status: int, payload: bytes, error: type[Exception], text: str
) -> None:
    with http_server(lambda _h, _b: (status, payload)) as url, pytest.raises(error, match=text):
        PrometheusClient(url).instant("up", NOW)


@pytest.mark.slow
def test_live_scrape_of_a_prometheus_client_exporter(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    served = Counter("demo_requests", "Requests served.", ["pod"], registry=registry)
    served.labels(pod="live-0").inc(42)
    server, _ = start_http_server(0, addr="127.0.0.1", registry=registry)
    scrape = (
        "scrape_configs:\n"
        "  - job_name: exporter\n"
        f"    static_configs: [{{targets: ['127.0.0.1:{server.server_port}']}}]\n"
    )
    try:
        with running_prometheus(tmp_path / "data", scrape) as url:
            client = PrometheusClient(url)
            deadline = time.monotonic() + 30
            series = []
            while time.monotonic() < deadline and not series:
                series = client.instant('demo_requests_total{pod="live-0"}', datetime.now(UTC))
                time.sleep(0.25)  # bounded poll: a fresh server discovers targets within ~5 s
    finally:
        server.shutdown()
    assert series, "Prometheus never scraped the exporter"
    assert series[0].samples[0][1] == 42.0
