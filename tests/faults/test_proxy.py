"""The fault-injecting proxy in front of the sandbox's API server and in front of a Prometheus:
each fault kind does what it says, the rest goes through untouched, and a seed replays."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from bench.faultproxy import WATCH_DROP_SECONDS, FaultProxy, Schedule, proxied
from kubernetes import config

from acceltrial.kube.calls import KubeError
from acceltrial.kube.gateway import Kube
from acceltrial.providers.metrics.prometheus import (
    PrometheusBusy,
    PrometheusClient,
    PrometheusServerError,
)
from acceltrial_testbed.sandbox.kubeconfig import write_kubeconfig
from tests.integration.e2e_kit import BACKENDS, backend_of
from tests.integration.http_stub import Responder, http_server
from tests.sandbox.conftest import CONFIGMAPS, Api, Backend, configmap

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="module", params=BACKENDS)
def sandbox(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """The real control plane when it is built (always in CI; the proxy reaches it over TLS
    with its admin certificate), else the emulator."""
    with backend_of(request.param, nodes_per_group=1) as cluster:
        yield cluster


def only(*kinds: str, rate: float = 1.0) -> Schedule:
    return Schedule(kinds=kinds, rate=rate, seed=7)


def test_a_conflict_refuses_writes_and_lets_reads_through(sandbox: Backend) -> None:
    Api.to(sandbox.access).post(CONFIGMAPS, configmap("kept"))
    with proxied(sandbox.access, only("conflict")) as proxy:
        api = Api(proxy.url)
        assert api.get(f"{CONFIGMAPS}/kept").status == 200
        refused = api.merge(f"{CONFIGMAPS}/kept", {"data": {"k": "changed"}})
        assert (refused.status, refused.body["reason"]) == (409, "Conflict")
        assert proxy.injected == {"conflict": 1}
    assert "k" not in (Api.to(sandbox.access).get(f"{CONFIGMAPS}/kept").body.get("data") or {})


@pytest.mark.parametrize(("kind", "code"), [("error-500", 500), ("error-503", 503),
                                            ("throttle", 429)])  # fmt: skip
def test_server_errors_are_answered_by_the_proxy(sandbox: Backend, kind: str, code: int) -> None:
    with proxied(sandbox.access, only(kind)) as proxy:
        reply = Api(proxy.url).get(CONFIGMAPS)
    assert reply.status == code
    assert "injected" in reply.body["message"]
    if code == 429:
        assert reply.headers["Retry-After"] == "1"


def test_the_gateway_sees_injected_errors_as_temporary_and_a_delay_as_no_answer(
    sandbox: Backend, tmp_path: Path
) -> None:
    for kind, status in (("error-503", 503), ("throttle", 429), ("conflict", 409)):
        with proxied(sandbox.access, only(kind)) as proxy:
            with pytest.raises(KubeError) as failed:
                kube(proxy, str(tmp_path)).apply(configmap_manifest("via-proxy"))
            assert (failed.value.status, failed.value.permanent) == (status, False)
    with proxied(sandbox.access, only("delay"), delay_seconds=1.5) as proxy:
        with pytest.raises(KubeError) as slow:
            kube(proxy, str(tmp_path), timeout=0.5).config_map("default", "missing")
        assert (slow.value.status, slow.value.permanent) == (0, False)
        assert "get ConfigMap default/missing" in str(slow.value)


def test_a_watch_is_cut_and_a_resumed_watch_is_gone(sandbox: Backend) -> None:
    direct = Api.to(sandbox.access)
    direct.post(CONFIGMAPS, configmap("w1"))
    direct.post(CONFIGMAPS, configmap("w2"))
    with proxied(sandbox.access, only("watch-drop")) as proxy:
        events = Api(proxy.url).watch(CONFIGMAPS, timeoutSeconds="5")
    assert len(events) == 1, "the stream ends after its first event, long before its timeout"
    version = direct.get(CONFIGMAPS).body["metadata"]["resourceVersion"]
    with proxied(sandbox.access, only("watch-gone")) as proxy:
        events = Api(proxy.url).watch(CONFIGMAPS, resourceVersion=version, timeoutSeconds="5")
        assert proxy.injected == {"watch-gone": 1}
    assert [(e["type"], e["object"]["code"], e["object"]["reason"]) for e in events] == [
        ("ERROR", 410, "Expired")
    ]
    with proxied(sandbox.access, only("watch-gone")) as proxy:
        listed = Api(proxy.url).watch(CONFIGMAPS, count=1, timeoutSeconds="1")
    assert listed[0]["type"] == "ADDED", "a watch without a version to resume is not refused"


def test_the_first_watch_of_each_stream_gets_the_fault_whatever_the_rate(sandbox: Backend) -> None:
    """An operator opens few watches, all at its start: at a rate alone, a run can pass with no
    watch fault at all (CI once did)."""
    direct = Api.to(sandbox.access)
    direct.post(CONFIGMAPS, configmap("f1"))
    direct.post(CONFIGMAPS, configmap("f2"))
    with proxied(sandbox.access, only("watch-drop", rate=0.0)) as proxy:
        api = Api(proxy.url)
        first = api.watch(CONFIGMAPS, timeoutSeconds="2")
        again = api.watch(CONFIGMAPS, timeoutSeconds="2")
        assert proxy.injected == {"watch-drop": 1}
    assert (len(first), len(again)) == (1, len(direct.get(CONFIGMAPS).body["items"]))
    version = direct.get(CONFIGMAPS).body["metadata"]["resourceVersion"]
    with proxied(sandbox.access, only("watch-gone", rate=0.0)) as proxy:
        api = Api(proxy.url)
        assert api.watch(CONFIGMAPS, count=1, timeoutSeconds="1")[0]["type"] == "ADDED"
        gone = api.watch(CONFIGMAPS, resourceVersion=version, timeoutSeconds="1")
        resumed = api.watch(CONFIGMAPS, resourceVersion=version, timeoutSeconds="1")
        assert proxy.injected == {"watch-gone": 1}
    assert [e["type"] for e in gone] == ["ERROR"]
    assert all(e["type"] != "ERROR" for e in resumed)


def test_a_dropped_watch_without_events_is_cut_too(sandbox: Backend) -> None:
    started = time.monotonic()
    with proxied(sandbox.access, only("watch-drop")) as proxy:
        events = Api(proxy.url).watch(
            CONFIGMAPS, labelSelector="acceltrial.dev/none=nothing", timeoutSeconds="60"
        )
        assert proxy.injected == {"watch-drop": 1}
    assert events == []
    assert time.monotonic() - started < WATCH_DROP_SECONDS + 10, "cut, not ended by its timeout"


def test_the_same_seed_injects_the_same_faults(sandbox: Backend) -> None:
    def run(seed: int) -> list[int]:
        schedule = Schedule(kinds=("error-500", "error-503", "throttle"), rate=0.5, seed=seed)
        with proxied(sandbox.access, schedule) as proxy:
            return [Api(proxy.url).get(CONFIGMAPS).status for _ in range(30)]

    first = run(11)
    assert first == run(11)
    assert first != run(12)
    assert {200, 500, 503, 429} <= set(first)


def test_after_and_limit_bound_the_faults(sandbox: Backend) -> None:
    schedule = Schedule(kinds=("error-500",), rate=1.0, after=3, limit=2)
    with proxied(sandbox.access, schedule) as proxy:
        codes = [Api(proxy.url).get(CONFIGMAPS).status for _ in range(8)]
    assert codes == [200, 200, 200, 500, 500, 200, 200, 200]


def counting_prometheus() -> tuple[list[int], Responder]:
    """A Prometheus stand-in whose answer changes with every request (the value counts)."""
    calls: list[int] = []

    def answer(_h: BaseHTTPRequestHandler, _b: bytes) -> tuple[int, bytes]:
        calls.append(1)
        result = [{"metric": {"pod": pod}, "value": [1764676800, str(len(calls))]}
                  for pod in ("a", "b")]  # fmt: skip
        data = {"resultType": "vector", "result": result}
        return 200, json.dumps({"status": "success", "data": data}).encode()

    return calls, answer


def test_prometheus_partial_and_stale_answers() -> None:
    _, answer = counting_prometheus()
    with http_server(answer) as upstream:
        with proxied(upstream, only("partial")) as proxy:
            series = PrometheusClient(proxy.url).instant("up", NOW)
        assert [s.labels["pod"] for s in series] == ["a"], "half the series are gone"
        schedule = Schedule(kinds=("stale",), rate=1.0, after=1)
        with proxied(upstream, schedule) as proxy:
            fresh = PrometheusClient(proxy.url).instant("up", NOW)
            stale = PrometheusClient(proxy.url).instant("up", NOW)
        assert fresh[0].samples[0][1] == stale[0].samples[0][1], "the earlier answer again"


def test_prometheus_errors_through_the_proxy_are_typed() -> None:
    _, answer = counting_prometheus()
    with http_server(answer) as upstream:
        for kind, error in (("throttle", PrometheusBusy), ("error-503", PrometheusServerError)):
            with proxied(upstream, only(kind)) as proxy, pytest.raises(error) as raised:
                PrometheusClient(proxy.url).instant("up", NOW)
            assert raised.value.temporary


def test_a_restarted_upstream_is_reached_after_retarget() -> None:
    _, answer = counting_prometheus()
    with http_server(answer) as first:
        pass  # the first Prometheus is gone
    with proxied(first, Schedule()) as proxy:
        with pytest.raises(PrometheusServerError, match="HTTP 502"):
            PrometheusClient(proxy.url).instant("up", NOW)
        with http_server(answer) as second:
            proxy.retarget(second)
            assert len(PrometheusClient(proxy.url).instant("up", NOW)) == 2


def kube(proxy: FaultProxy, folder: str, timeout: float | None = None) -> Kube:
    path = write_kubeconfig(Path(folder) / "proxy.kubeconfig", proxy.url)
    api = config.new_client_from_config(config_file=str(path))
    return Kube(api) if timeout is None else Kube(api, timeout_seconds=timeout)


def configmap_manifest(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"}, "data": {"k": "v"}}  # fmt: skip
