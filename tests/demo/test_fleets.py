"""Many namespaces' simulated servers on the emulated cluster: the cluster is listed once for all
of them (four list requests, whatever the number of namespaces) and then followed by watches, so
a tick asks the API server nothing; each namespace's pods serve its own profile and route, a
change made since is served, and one scrape names each metric family once."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from prometheus_client.parser import text_string_to_metric_families

from acceltrial_testbed.demo.cluster import Client
from acceltrial_testbed.sandbox.access import Access
from acceltrial_testbed.sandbox.cluster import Sandbox
from acceltrial_testbed.sandbox.fleet.exporter import FleetSpec
from acceltrial_testbed.sandbox.fleet.fleets import Fleets
from acceltrial_testbed.sandbox.fleet.model import ServingProfile
from acceltrial_testbed.sandbox.fleet.serving import exposition
from acceltrial_testbed.sandbox.fleet.traffic import Entry
from acceltrial_testbed.sandbox.topology import Topology, load_topology
from tests.sandbox.conftest import eventually

NAMESPACES = ("first", "second", "third")
GOOD = ServingProfile(p50=0.25, p99=0.5, capacity_rps=50)
ERRING = ServingProfile(p50=0.25, p99=0.5, capacity_rps=50, error_ratio=0.2)


@dataclass(frozen=True)
class CountedAccess(Access):
    """The emulator's access, remembering every path it was asked for."""

    asked: list[str] = field(default_factory=list)

    def get(self, path: str, timeout: float) -> tuple[int, bytes]:
        self.asked.append(self.url + path)
        return super().get(path, timeout)


def install(client: Client, namespace: str) -> None:
    labels = {"app": "llama3"}
    client.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                         "metadata": {"name": namespace}})  # fmt: skip
    client.create(f"/apis/apps/v1/namespaces/{namespace}/deployments", {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "llama3-gpu", "namespace": namespace},
        "spec": {"replicas": 2, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:0.11",
                                     "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}},
    })  # fmt: skip
    client.create(f"/api/v1/namespaces/{namespace}/services", {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "llama3-gpu", "namespace": namespace},
        "spec": {"selector": labels, "ports": [{"port": 8000}]},
    })  # fmt: skip
    client.create(f"/apis/gateway.networking.k8s.io/v1/namespaces/{namespace}/httproutes", {
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": "llama3", "namespace": namespace},
        "spec": {"parentRefs": [{"name": "inference"}],
                 "rules": [{"backendRefs": [{"name": "llama3-gpu", "port": 8000}]}]},
    })  # fmt: skip


def spec(namespace: str, rps: float) -> FleetSpec:
    baseline = ERRING if namespace == "second" else GOOD
    return FleetSpec(
        entry=Entry(namespace, route="llama3"),
        rps=rps,
        prompt_tokens=100,
        generated_tokens=50,
        profiles={"baseline": baseline, "candidate": GOOD},
    )


@pytest.fixture(scope="module")
def fleets() -> Iterator[tuple[Fleets, CountedAccess]]:
    default = load_topology()  # with GPU nodes for every namespace's baseline
    groups = [g.model_copy(update={"count": max(g.count, 8)}) for g in default.node_groups]
    with Sandbox(ready_delay=0.1, topology=Topology(nodeGroups=groups)) as sandbox:
        client = Client(sandbox.url)
        for namespace in NAMESPACES:
            install(client, namespace)
        access = CountedAccess(sandbox.url)
        made = Fleets(access, [spec(n, 10.0 * (i + 1)) for i, n in enumerate(NAMESPACES)])

        def every_baseline_serving() -> bool:
            made.advance()
            return all(len(made[n].pods("baseline")) == 2 for n in NAMESPACES)

        eventually(every_baseline_serving, timeout=20)
        yield made, access


def test_each_kind_is_listed_once_for_every_namespace_and_ticks_ask_nothing(
    fleets: tuple[Fleets, CountedAccess],
) -> None:
    made, access = fleets
    asked = sorted(url.removeprefix(access.url) for url in access.asked)
    assert asked == [
        "/api/v1/pods",
        "/api/v1/services",
        "/apis/gateway.networking.k8s.io/v1/httproutes",
        "/apis/gateway.networking.k8s.io/v1beta1/referencegrants",
    ]
    access.asked.clear()
    for _ in range(3):
        made.advance()
    assert access.asked == [], "followed by watches, not read again"


def test_each_namespace_serves_its_own_route_and_profile(
    fleets: tuple[Fleets, CountedAccess],
) -> None:
    made, _ = fleets
    for index, namespace in enumerate(NAMESPACES):
        baseline = made[namespace].snapshot().variants["baseline"]
        assert baseline.pods == 2
        assert baseline.offered_rps == pytest.approx(10.0 * (index + 1))
        expected = 0.8 if namespace == "second" else 1.0
        assert baseline.succeeded_rps == pytest.approx(expected * baseline.offered_rps)


def test_each_namespace_exports_only_its_own_pods(fleets: tuple[Fleets, CountedAccess]) -> None:
    made, _ = fleets
    for namespace in NAMESPACES:
        text = exposition(made[namespace].collect())
        parsed = {f.name: f for f in text_string_to_metric_families(text)}
        success = parsed["vllm:request_success"]
        assert {s.labels["namespace"] for s in success.samples} == {namespace}
        assert len({s.labels["pod"] for s in success.samples}) == 2


def test_a_namespace_given_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="one spec per namespace: first given twice"):
        Fleets("http://unused", [spec("first", 1.0), spec("first", 2.0)])


def test_a_change_made_since_is_served_without_reading_again(
    fleets: tuple[Fleets, CountedAccess],
) -> None:
    made, access = fleets
    access.asked.clear()
    client = Client(access.url)
    client.merge("/apis/apps/v1/namespaces/third/deployments/llama3-gpu", {"spec": {"replicas": 3}})

    def three_serving() -> bool:
        made.advance()
        return len(made["third"].pods("baseline")) == 3

    eventually(three_serving, timeout=20)
    assert made["third"].snapshot().variants["baseline"].offered_rps == pytest.approx(30.0)
    assert access.asked == []
