"""A measurement reads the Nodes of its pods once, not every Node each tick: a Node is read the
first time a pod runs on it (for its instance id) and kept for later ticks of every trial.
(Its own module, so its own emulated cluster with room for its pods.)"""

from __future__ import annotations

import pytest

from acceltrial.api.trial import TRIAL_GVR
from acceltrial.handlers.snapshot import NODES
from acceltrial.kube.gateway import Kube
from acceltrial.kube.nodes import MAX_AGE_SECONDS
from tests.handlers.conftest import RecordingClient
from tests.handlers.test_tick_reads import measured_tick, started_trial
from tests.sandbox.conftest import Api


def test_a_measurement_reads_each_node_of_its_pods_once_across_ticks(
    api: Api,
    kube: Kube,
    recorder: RecordingClient,
    namespace: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    status = started_trial(api, kube, namespace, "gatewayapi")
    uid = api.get(f"{TRIAL_GVR.collection_path(namespace)}/llama3-inf2").body["metadata"]["uid"]
    monkeypatch.setattr(NODES, "max_age_seconds", -1.0)  # the first tick reads every Node afresh
    recorder.sent.clear()
    measured_tick(kube, namespace, "gatewayapi", status, uid)
    hosts = scheduled(api, namespace)
    first = [path for verb, path in recorder.sent if verb == "GET" and "/api/v1/nodes/" in path]
    assert sorted(first) == sorted(f"/api/v1/nodes/{host}" for host in hosts)

    monkeypatch.setattr(NODES, "max_age_seconds", MAX_AGE_SECONDS)
    recorder.sent.clear()
    observation = measured_tick(kube, namespace, "gatewayapi", status, uid)
    assert observation.measurement is not None
    assert not [path for verb, path in recorder.sent if "/api/v1/nodes" in path], recorder.sent


def scheduled(api: Api, namespace: str) -> set[str]:
    """The Nodes the namespace's pods run on."""
    pods = api.get(f"/api/v1/namespaces/{namespace}/pods").body["items"]
    assert len(pods) == 3
    assert all(p["spec"].get("nodeName") for p in pods), "room for every pod"
    return {p["spec"]["nodeName"] for p in pods}
