"""The baseline's temporary replica as a trial's capacity sweep runs it, against the emulated
API server and its scheduler: created from the baseline's template, swept through its own
Service when a GPU node of the baseline's kind has room, unswept with the scheduler's words when
none has, and deleted either way."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from acceltrial.api.spec import TrialSpec
from acceltrial.engine.baseline_replica import replica_name, unschedulable
from acceltrial.handlers.capacity_test import baseline_sweep, trial_sweeps
from acceltrial.handlers.snapshot import TickSnapshot
from acceltrial.kube.gateway import Kube
from acceltrial.providers.quality.load import LoadShape
from acceltrial_testbed.sandbox.fleet.model_server import ModelServers, model_endpoint
from acceltrial_testbed.sandbox.topology import load_topology
from tests.handlers.conftest import PLANE, create_trial, trial_spec
from tests.handlers.test_quality_reads import wait_for_ready_pods
from tests.integration.e2e_kit import control_plane
from tests.sandbox.conftest import Api, Backend

SHAPE = LoadShape(prompt_tokens=8, generated_tokens=4)
REQUESTS = {"promptTokens": 8, "generatedTokens": 4}
SWEEP = {
    "slo": {"latencyP99": "5s"},
    "stairDuration": "2s",
    "maxDuration": "30s",
    "maxConcurrency": 2,
}


def sweep_spec(requests: bool = True) -> TrialSpec:
    body = trial_spec().model_dump(mode="json", by_alias=True, exclude_none=True)
    sweep = {**SWEEP, **({"requests": REQUESTS} if requests else {})}
    return TrialSpec.model_validate({**body, "capacityTest": sweep})


@pytest.fixture(scope="module")
def cluster() -> Iterator[Backend]:
    """Five g5.xlarge nodes (one GPU each): room for both tests' baselines, in either order, and
    the replica of the one that has room."""
    topology = load_topology()
    pools = [p.model_copy(update={"count": 5}) if p.name == "gpu-g5" else p
             for p in topology.node_groups]  # fmt: skip
    with control_plane(
        PLANE, topology.model_copy(update={"node_groups": pools}), ready_delay=0.05
    ) as sandbox:
        yield sandbox


def snapshot_in(api: Api, kube: Kube, namespace: str, requests: bool = True) -> TickSnapshot:
    spec = sweep_spec(requests)
    if requests:  # a sweep: the baseline's pods must be placed (without, it never starts)
        wait_for_ready_pods(kube, namespace, {"app": "llama3"}, 2)
    return TickSnapshot(kube, spec, create_trial(api, namespace, spec))


def gone(kube: Kube, namespace: str, name: str) -> bool:
    return kube.deployment(namespace, name) is None and kube.service(namespace, name) is None


def test_a_replica_with_room_is_swept_through_its_own_service_then_deleted(
    api: Api, kube: Kube, namespace: str, cluster: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    servers = ModelServers(cluster.access, {})
    with model_endpoint(servers) as url:
        monkeypatch.setenv("ACCELTRIAL_MODEL_URL", url + "/{namespace}/{service}")
        snapshot = snapshot_in(api, kube, namespace)
        outcome = baseline_sweep(snapshot, frozenset(), SHAPE)(threading.Event())
    assert outcome.problem is None, outcome.problem
    assert [s.concurrency for s in outcome.stairs] == [1, 2]
    assert servers.answered["baseline"] > 2, "the replica answered, as the baseline's model"
    assert servers.answered["candidate"] == 0
    assert gone(kube, namespace, replica_name(snapshot.trial))
    live = kube.pods(namespace, {"app": "llama3"})
    assert len(live) == 2, "the baseline's own pods are untouched, the replica not among them"


def test_with_no_room_the_replica_goes_unswept_in_the_schedulers_words_and_is_deleted(
    api: Api, kube: Kube, namespace: str
) -> None:
    first = snapshot_in(api, kube, namespace)
    # Neighbours take every GPU left (more of them than the cluster has GPUs: some pend).
    labels = {"app": "neighbour"}
    api.post(f"/apis/apps/v1/namespaces/{namespace}/deployments", {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "neighbour"},
        "spec": {"replicas": 4, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {"nodeSelector": {"node.kubernetes.io/instance-type": "g5.xlarge"},
                     "containers": [{"name": "x", "image": "x",
                                     "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}},
    })  # fmt: skip
    deadline = time.monotonic() + 20
    while unschedulable(kube.pods(namespace, labels)) is None:
        assert time.monotonic() < deadline, "the neighbours never filled the GPU nodes"
        time.sleep(0.05)
    now = [0.0]

    def pause(seconds: float) -> None:
        time.sleep(0.05)
        now[0] += seconds / 2

    try:
        outcome = baseline_sweep(first, frozenset(), SHAPE, clock=lambda: now[0], pause=pause)(
            threading.Event()
        )
    finally:
        kube.delete("Deployment", namespace, "neighbour")
    assert outcome.problem is not None
    assert outcome.problem.startswith(
        "no GPU node that serves the baseline has room for one more pod (the scheduler: "
    ), outcome.problem
    assert "nvidia.com/gpu" in outcome.problem
    assert outcome.stairs == ()
    assert gone(kube, namespace, replica_name(first.trial))


def test_without_requests_given_or_readable_the_sweep_cannot_measure_and_says_the_fix(
    api: Api, kube: Kube, namespace: str
) -> None:
    """No requests in the spec and no Prometheus to read the baseline's token histograms from:
    nothing is loaded, and the outcome names the keys that would do."""
    snapshot = snapshot_in(api, kube, namespace, requests=False)
    outcome = trial_sweeps(snapshot, 1, frozenset())(threading.Event())
    assert outcome.problem == (
        "spec.capacityTest.requests is not given and the baseline's mean tokens per request "
        "could not be read from its token histograms (no request finished, or the query "
        "failed); give requests.promptTokens and requests.generatedTokens"
    )
    assert kube.deployment(namespace, replica_name(snapshot.trial)) is None, "never created"
