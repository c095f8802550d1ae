"""Every failure is classified as temporary or permanent: the Prometheus client over real HTTP,
a measurement asking again only when that can help, the kube gateway naming the verb and the
object of a refused request, and the lifecycle's backoff."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler

import pytest
from kubernetes import client

from acceltrial.engine.analysis import MeasurementWindow
from acceltrial.engine.metrics import MetricRequest, OwnQuery, Variant, VariantTarget
from acceltrial.handlers.config import ConfigError, config_from_env
from acceltrial.handlers.retries import backoff_seconds
from acceltrial.kube.calls import request_target
from acceltrial.providers.metrics.port import NO_RETRY, Retry, collect
from acceltrial.providers.metrics.prometheus import (
    BadResponse,
    PrometheusBusy,
    PrometheusClient,
    PrometheusReader,
    PrometheusServerError,
    PrometheusUnreachable,
    QueryRejected,
    QueryTimeout,
)
from tests.integration.http_stub import http_server

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
VECTOR = (
    b'{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"2"]}]}}'
)
WINDOW = MeasurementWindow(NOW - timedelta(minutes=1), NOW, 15.0)
QUERY = MetricRequest("errors", "candidate", OwnQuery("up"))
TARGETS: dict[Variant, VariantTarget] = {
    "candidate": VariantTarget("candidate", "serving", "web-c", ("web-c-1",), "neuron")
}


def source(url: str) -> PrometheusReader:
    return PrometheusReader(PrometheusClient(url), "custom", "1m")


@pytest.mark.parametrize(
    ("status", "error", "temporary"),
    [
        (429, PrometheusBusy, True),
        (500, PrometheusServerError, True),
        (503, PrometheusServerError, True),
        (400, QueryRejected, False),
        (403, QueryRejected, False),
        (422, QueryRejected, False),
    ],
)
def test_prometheus_answers_are_classified(
    status: int, error: type[Exception], temporary: bool
) -> None:
    body = json.dumps({"status": "error", "errorType": "x", "error": "said so"}).encode()
    with http_server(lambda _h, _b: (status, body)) as url, pytest.raises(error) as raised:
        PrometheusClient(url).instant("up", NOW)
    assert raised.value.temporary is temporary
    assert f"HTTP {status}: x: said so" in str(raised.value)


def test_no_connection_timeouts_and_garbled_answers_are_temporary() -> None:
    with http_server(lambda _h, _b: (200, VECTOR)) as url:
        pass  # the server is gone: connection refused
    with pytest.raises(PrometheusUnreachable) as refused:
        PrometheusClient(url).instant("up", NOW)
    assert refused.value.temporary
    assert BadResponse("cut short").temporary
    assert QueryTimeout("slow").temporary


def answers(*statuses: int) -> tuple[list[int], object]:
    """A Prometheus stand-in answering each request with the next status (200: a value)."""
    seen: list[int] = []

    def reply(_h: BaseHTTPRequestHandler, _b: bytes) -> tuple[int, bytes]:
        status = statuses[min(len(seen), len(statuses) - 1)]
        seen.append(status)
        if status == 200:
            return 200, VECTOR
        return status, b'{"status":"error","errorType":"x","error":"no"}'

    return seen, reply


def test_a_temporary_failure_is_asked_again_with_backoff() -> None:
    seen, reply = answers(503, 429, 200)
    slept: list[float] = []
    with http_server(reply) as url:  # type: ignore[arg-type]
        retry = Retry(attempts=3, first_delay=0.25, sleep=slept.append)
        collection = collect([QUERY], source(url), TARGETS, WINDOW, retry)
    reading = collection.readings[("errors", "candidate")]
    assert reading.error is None
    assert reading.values == (2.0,)
    assert seen == [503, 429, 200]
    assert slept == [0.25, 0.5], "doubled each time"
    assert collection.queries == 1, "one planned query, asked three times"


def test_a_temporary_failure_that_lasts_becomes_an_errored_reading() -> None:
    seen, reply = answers(503)
    with http_server(reply) as url:  # type: ignore[arg-type]
        retry = Retry(attempts=3, first_delay=0.0, sleep=lambda _: None)
        reading = collect([QUERY], source(url), TARGETS, WINDOW, retry).readings[
            ("errors", "candidate")
        ]
    assert len(seen) == 3
    assert reading.error is not None
    assert "HTTP 503" in reading.error
    assert "[temporary] (asked 3 times)" in reading.error


def test_a_permanent_refusal_is_not_asked_again() -> None:
    seen, reply = answers(400, 200)
    with http_server(reply) as url:  # type: ignore[arg-type]
        reading = collect([QUERY], source(url), TARGETS, WINDOW, Retry(sleep=lambda _: None))
    assert seen == [400], "asking again cannot help"
    assert reading.readings[("errors", "candidate")].error is not None
    assert "[permanent]" in str(reading.readings[("errors", "candidate")].error)
    seen, reply = answers(503, 200)
    with http_server(reply) as url:  # type: ignore[arg-type]
        collect([QUERY], source(url), TARGETS, WINDOW, NO_RETRY)
    assert seen == [503], "NO_RETRY asks once"


@pytest.mark.parametrize(
    ("method", "args", "said"),
    [
        (client.CoreV1Api().patch_namespaced_service, ("web", "serving"),
         "patch Service serving/web"),
        (client.AppsV1Api().read_namespaced_deployment, ("llama3-gpu", "serving"),
         "get Deployment serving/llama3-gpu"),
        (client.AppsV1Api().patch_namespaced_deployment_scale, ("llama3", "serving"),
         "patch Deployment serving/llama3"),
        (client.CoreV1Api().list_namespaced_pod, ("serving",), "list Pod serving"),
        (client.CoreV1Api().list_node, (), "list Node"),
        (client.CustomObjectsApi().patch_namespaced_custom_object,
         ("gateway.networking.k8s.io", "v1", "serving", "httproutes", "llama3", []),
         "patch HTTPRoute serving/llama3"),
        (client.CustomObjectsApi().list_namespaced_custom_object,
         ("acceltrial.dev", "v1alpha1", "serving", "acceleratortrials"),
         "list AcceleratorTrial serving"),
    ],
)  # fmt: skip
def test_a_request_is_named_by_its_verb_and_object(
    method: object, args: tuple[object, ...], said: str
) -> None:
    assert request_target(method, args) == said  # type: ignore[arg-type]


def test_the_tick_backs_off_exponentially_up_to_a_cap() -> None:
    assert [backoff_seconds(n, 10.0) for n in range(6)] == [10, 20, 40, 80, 80, 80]


def test_the_api_timeout_is_read_from_the_environment() -> None:
    assert config_from_env({}).api_timeout_seconds == 30
    assert config_from_env({"ACCELTRIAL_API_TIMEOUT_SECONDS": "5"}).api_timeout_seconds == 5
    with pytest.raises(ConfigError, match="ACCELTRIAL_API_TIMEOUT_SECONDS"):
        config_from_env({"ACCELTRIAL_API_TIMEOUT_SECONDS": "0"})
