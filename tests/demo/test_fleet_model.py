"""The simulated fleet's serving model and traffic split, with numbers worked by hand."""

from __future__ import annotations

import math
from typing import Any

import pytest

from acceltrial_testbed.sandbox.fleet.exporter import Fleet, FleetSpec, Regression
from acceltrial_testbed.sandbox.fleet.model import ServingProfile, erlang_c, serve
from acceltrial_testbed.sandbox.fleet.traffic import ClusterView, Entry, split

PROFILE = ServingProfile(p50=1.0, p99=3.0, capacity_rps=10, error_ratio=0.01)


def test_erlang_c_matches_the_textbook_values() -> None:
    # One server at 50% load: an arrival waits with probability 0.5 (M/M/1: P = rho).
    assert erlang_c(1, 0.5) == pytest.approx(0.5)
    # Two servers, 1 Erlang offered: P(wait) = 1/3.
    assert erlang_c(2, 1.0) == pytest.approx(1 / 3)
    assert erlang_c(4, 0) == 0
    # Ten servers, 8 Erlangs: 0.4092 (the M/M/c tables).
    assert erlang_c(10, 8.0) == pytest.approx(0.4092, abs=1e-4)
    # A pod of 793 batch slots offered all of 600 requests/s at once (its neighbour not Ready
    # yet): load^k / k! overflowed past about 700 Erlangs and made the fleet's gauges NaN.
    assert 0 < erlang_c(793, 777) < 1


def test_at_low_load_latency_is_the_profile_and_it_grows_like_a_queue() -> None:
    idle = serve(PROFILE, 0.1)
    assert idle.latency_quantile(0.5) == pytest.approx(1.0, rel=0.01)
    assert idle.latency_quantile(0.99) == pytest.approx(3.0, rel=0.01)
    latencies = [serve(PROFILE, rps).latency_quantile(0.99) for rps in (2, 5, 8, 9.5)]
    assert latencies == sorted(latencies)
    assert latencies[-1] > 1.2 * latencies[0], "near capacity, waiting dominates"


def test_load_beyond_capacity_is_refused_with_errors() -> None:
    rates = serve(PROFILE, 15)
    assert rates.succeeded == pytest.approx(10 * 0.99)
    assert rates.failed == pytest.approx(15 - 9.9)
    assert rates.utilization == pytest.approx(0.95)


def test_utilization_scales_from_idle_to_at_capacity() -> None:
    profile = ServingProfile(1.0, 3.0, 10, utilization_idle=0.1, utilization_at_capacity=0.5)
    assert serve(profile, 5).utilization == pytest.approx(0.3)


def pod(name: str, labels: dict[str, str], ready: bool = True) -> dict[str, Any]:
    condition = {"type": "Ready", "status": "True" if ready else "False"}
    return {"metadata": {"name": name, "labels": labels}, "status": {"conditions": [condition]}}


def service(name: str, selector: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"selector": selector}}


BASE = {"app": "llama"}
# For the gatewayapi router the candidate's pods lose the baseline Service's selector labels.
CAND = {"acceltrial.dev/variant": "candidate"}
VIEW = ClusterView(
    pods=[pod("gpu-a", BASE), pod("gpu-b", BASE), pod("gpu-c", BASE, ready=False),
          pod("inf2-a", CAND)],
    services={"gpu": service("gpu", BASE), "inf2": service("inf2", CAND)},
    route={"spec": {"rules": [{"backendRefs": [{"name": "gpu", "weight": 75},
                                               {"name": "inf2", "weight": 25}]}]}},
)  # fmt: skip


def test_a_route_splits_by_weight_then_evenly_over_ready_pods() -> None:
    offered = split(VIEW, Entry("ml", route="llama3"), 20)
    assert offered == {"gpu-a": 7.5, "gpu-b": 7.5, "inf2-a": 5.0}


def test_a_gateway_that_ignores_weights_sends_all_to_the_first_backend() -> None:
    offered = split(VIEW, Entry("ml", route="llama3", honors_weights=False), 20)
    assert offered == {"gpu-a": 10.0, "gpu-b": 10.0}


def test_a_service_entry_spreads_over_every_ready_pod_it_selects() -> None:
    # The replicas router: candidate pods keep the baseline's labels and join its Service.
    joined = ClusterView(
        pods=[*VIEW.pods[:3], pod("inf2-a", {**BASE, **CAND})], services=VIEW.services
    )
    offered = split(joined, Entry("ml", service="gpu"), 30)
    assert offered == {"gpu-a": 10.0, "gpu-b": 10.0, "inf2-a": 10.0}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def fleet_on_view(
    clock: Clock, *regressions: Regression, wall: float = 1.7e9, seed: int = 7, rps: float = 20
) -> Fleet:
    """20 req/s of 50 generated tokens over VIEW (25% to the candidate), on fake clocks."""
    spec = FleetSpec(
        entry=Entry("ml", route="llama3"),
        rps=rps,
        prompt_tokens=100,
        generated_tokens=50,
        profiles={"baseline": PROFILE, "candidate": PROFILE},
        regressions=regressions,
        seed=seed,
    )
    reader: Any = lambda _url, _entry: VIEW  # noqa: E731
    return Fleet("http://unused", spec, clock=clock, reader=reader, wall_clock=lambda: wall)


def by_pod(fleet: Fleet, family: str, **labels: str) -> dict[str, float]:
    """The value of each pod's ``family`` sample (with ``labels``) in a scrape."""
    families = {f.name: f for f in fleet.collect()}
    return {
        s.labels["pod"]: s.value
        for s in families[family].samples
        if labels.items() <= s.labels.items() and not s.name.endswith(("_bucket", "_sum"))
    }


def within_poisson(count: float, expected: float) -> bool:
    """``count`` is within 4 standard deviations of a Poisson count of mean ``expected`` (a
    fixed seed decides; 4 sigma keeps the test honest if the seed or the draws change)."""
    return abs(count - expected) <= 4 * math.sqrt(expected)


def test_counters_count_drawn_requests_and_regressions_apply_from_their_weight() -> None:
    clock = Clock()
    fleet = fleet_on_view(clock, Regression("candidate", from_weight=25, error_ratio=0.5))
    fleet.advance()
    clock.now = 100.0
    fleet.advance()
    snapshot = fleet.snapshot()
    assert snapshot.candidate_percent == pytest.approx(25)
    assert snapshot.variants["baseline"].succeeded_rps == pytest.approx(15 * 0.99)
    assert snapshot.variants["candidate"].succeeded_rps == pytest.approx(5 * 0.5)
    answered = by_pod(fleet, "vllm:request_success", finished_reason="stop")
    assert within_poisson(answered["inf2-a"], 100 * 5 * 0.5)
    assert within_poisson(answered["gpu-a"], 100 * 7.5 * 0.99)
    assert all(float(n).is_integer() for n in answered.values()), "requests, not expectations"
    failed = by_pod(fleet, "http_requests", status="5xx")
    assert within_poisson(failed["inf2-a"], 100 * 5 * 0.5)
    tokens = by_pod(fleet, "vllm:generation_tokens")
    # Token counts are drawn around 50 a request (coefficient of variation 0.5).
    assert tokens["inf2-a"] / answered["inf2-a"] == pytest.approx(50, rel=0.1)
    families = {f.name for f in fleet.collect()}
    assert "DCGM_FI_DEV_GPU_UTIL" not in families, "utilization comes from per-node exporters"


def test_a_scrape_between_ticks_sees_counters_as_of_the_scrape_and_stamped_then() -> None:
    clock = Clock()
    fleet = fleet_on_view(clock)
    fleet.advance()
    clock.now = 10.0
    fleet.advance()
    clock.now = 14.0  # the next tick is late on a busy machine; a scrape comes first
    families = {f.name: f for f in fleet.collect()}
    at_14 = by_pod(fleet, "vllm:request_success", finished_reason="stop")["inf2-a"]
    assert within_poisson(at_14, 14 * 5 * 0.99)
    stamps = {s.timestamp for f in families.values() for s in f.samples}
    assert stamps == {1.7e9}, "every sample carries the moment it was computed for"
    clock.now = 15.0
    fleet.advance()
    scraped = by_pod(fleet, "vllm:request_success", finished_reason="stop")
    unscraped_clock = Clock()
    unscraped = fleet_on_view(unscraped_clock)
    for moment in (0.0, 10.0, 15.0):
        unscraped_clock.now = moment
        unscraped.advance()
    same = by_pod(unscraped, "vllm:request_success", finished_reason="stop")
    assert scraped == same, "no second counted twice, and scrapes between ticks change nothing"
    assert scraped["inf2-a"] >= at_14
