"""The fleet draws its requests as production sends them: Poisson arrivals, each request with a
latency, tokens and an outcome drawn from its variant's profile, from streams a seed fixes.

Counts are checked against a Poisson bound: a count N of mean m = rate x seconds lies within
m +- 4 sqrt(m) (its standard deviation is sqrt(m); outside with probability below 1e-4). With
the seeds fixed every test is deterministic; the bound says how far the seed could move it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from acceltrial_testbed.sandbox.fleet.counters import Histogram
from acceltrial_testbed.sandbox.fleet.draws import PodDraws, RecentLoad
from acceltrial_testbed.sandbox.fleet.exporter import Fleet, FleetSpec
from acceltrial_testbed.sandbox.fleet.model import ServingProfile, serve
from acceltrial_testbed.sandbox.fleet.traffic import ClusterView, Entry

PROFILE = ServingProfile(p50=1.0, p99=3.0, capacity_rps=10, error_ratio=0.02)
QUIET = ServingProfile(p50=1.0, p99=3.0, capacity_rps=1000)
"""Far from capacity at the rates below: latency is the profile's, no queueing."""


def pod(name: str, variant: str, node: str) -> dict[str, Any]:
    labels = {"acceltrial.dev/variant": "candidate"} if variant else {"app": "llama"}
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"nodeName": node, "containers": [{"name": "vllm"}]},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }


VIEW = ClusterView(
    pods=[pod("gpu-a", "", "gpu-node"), pod("inf2-a", "candidate", "inf2-node")],
    services={
        "gpu": {"metadata": {"name": "gpu"}, "spec": {"selector": {"app": "llama"}}},
        "inf2": {"metadata": {"name": "inf2"},
                 "spec": {"selector": {"acceltrial.dev/variant": "candidate"}}},
    },
    route={"spec": {"rules": [{"backendRefs": [{"name": "gpu", "weight": 90},
                                               {"name": "inf2", "weight": 10}]}]}},
)  # fmt: skip
"""One baseline pod and one candidate pod; the candidate gets 10% of the requests."""


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def fleet(rps: float, seed: int | None, profile: ServingProfile = PROFILE) -> tuple[Fleet, Clock]:
    clock = Clock()
    spec = FleetSpec(
        entry=Entry("ml", route="llama3"),
        rps=rps,
        prompt_tokens=100,
        generated_tokens=50,
        profiles={"baseline": profile, "candidate": profile},
        seed=seed,
    )
    made = Fleet("http://unused", spec, clock=clock, reader=lambda *_: VIEW)
    made.advance()
    return made, clock


def candidate_requests(made: Fleet) -> float:
    """Users' requests the candidate has answered (succeeded or failed), as the fleet counts."""
    return made.snapshot().variants["candidate"].user_requests


def ticks(made: Fleet, clock: Clock, count: int, seconds: float) -> list[float]:
    """The candidate's requests so far after each of ``count`` ticks ``seconds`` apart."""
    seen = []
    for _ in range(count):
        clock.now += seconds
        made.advance()
        seen.append(candidate_requests(made))
    return seen


def within_poisson(count: float, expected: float) -> bool:
    return abs(count - expected) <= 4 * math.sqrt(expected)


def test_counts_over_many_ticks_match_the_rate_and_vary_as_poisson_counts() -> None:
    made, clock = fleet(rps=50, seed=11)  # the candidate: 5 req/s
    totals = ticks(made, clock, count=400, seconds=0.25)
    assert within_poisson(totals[-1], 400 * 0.25 * 5)
    per_tick = np.diff([0.0, *totals])
    assert set(per_tick) <= {float(n) for n in range(40)}, "whole requests"
    # A Poisson count's variance equals its mean (index of dispersion 1); expected values
    # would give 0. Over 400 ticks the index's standard error is about sqrt(2/399) = 0.07.
    dispersion = per_tick.var(ddof=1) / per_tick.mean()
    assert 0.7 < dispersion < 1.3


def test_at_a_low_rate_many_windows_are_empty() -> None:
    made, clock = fleet(rps=1.0, seed=12)  # the candidate: 0.1 req/s
    per_second = np.diff([0.0, *ticks(made, clock, count=300, seconds=1.0)])
    empty = float(np.mean(per_second == 0))
    # P(no request in a second) = exp(-0.1) = 0.90; 300 windows: standard error 0.017.
    assert empty == pytest.approx(math.exp(-0.1), abs=0.07)
    assert per_second.max() >= 1, "and some are not"


def quantile(hist: Histogram, q: float) -> float:
    """The quantile as Prometheus' histogram_quantile() interpolates it within a bucket."""
    rank = q * hist.count
    previous_bound, previous_count = 0.0, 0.0
    for bound, count in zip(hist.bounds, hist.buckets, strict=True):
        if count >= rank:
            return previous_bound + (bound - previous_bound) * (rank - previous_count) / (
                count - previous_count
            )
        previous_bound, previous_count = bound, count
    raise AssertionError("beyond the last bucket")


@pytest.mark.parametrize(("q", "profiled"), [(0.5, 1.0), (0.99, 3.0)])
def test_over_many_requests_the_latency_histogram_gives_the_profiles_quantiles(
    q: float, profiled: float
) -> None:
    draws = PodDraws(21, 1, 0)
    rates = serve(QUIET, 100)
    hist = Histogram()
    for _ in range(200):  # 200 s at 100 req/s: about 20 000 requests
        hist.observe(draws.serve(rates, 1.0, 1.0, (100, 50)).latency)
    assert within_poisson(hist.count, 20_000)
    # Buckets 10% apart; the sampling error of a p99 from 20 000 requests is about 2%.
    assert quantile(hist, q) == pytest.approx(profiled, rel=0.05)


def test_a_p99_of_a_few_requests_is_noisy() -> None:
    rates = serve(QUIET, 3)
    p99s = []
    for seed in range(40):
        latency = PodDraws(seed, 1, 0).serve(rates, 1.0, 1.0, (100, 50)).latency
        if len(latency):
            p99s.append(float(np.quantile(latency, 0.99)))
    assert max(p99s) / min(p99s) > 3, "a p99 of about three requests lands anywhere"
    assert np.mean(p99s) < 0.8 * 3.0, "and mostly below the tail: three requests rarely reach it"


def test_errors_are_drawn_with_the_profiles_probability() -> None:
    rates = serve(ServingProfile(p50=1.0, p99=3.0, capacity_rps=1000, error_ratio=0.02), 100)
    drawn = PodDraws(31, 1, 0).serve(rates, 100.0, 1.0, (100, 50))
    total = drawn.succeeded + drawn.errored
    assert within_poisson(total, 10_000)
    assert within_poisson(drawn.errored, 0.02 * total)
    assert drawn.refused == 0


def test_tokens_are_drawn_around_the_fleets_means() -> None:
    drawn = PodDraws(41, 1, 0).serve(serve(QUIET, 100), 100.0, 1.0, (100, 50))
    assert drawn.prompt.mean() == pytest.approx(100, rel=0.02)
    assert drawn.generated.mean() == pytest.approx(50, rel=0.02)
    assert drawn.generated.std() / drawn.generated.mean() == pytest.approx(0.5, rel=0.1)
    assert drawn.generated.min() >= 1


def exposition_after(seed: int, seconds: float = 30.0) -> dict[tuple[str, str], float]:
    made, clock = fleet(rps=20, seed=seed)
    clock.now = seconds
    made.advance()
    return {
        (s.name, str(sorted(s.labels.items()))): s.value
        for family in made.collect()
        for s in family.samples
    }


def test_the_same_seed_draws_the_same_requests_and_another_seed_others() -> None:
    first, again, other = exposition_after(5), exposition_after(5), exposition_after(6)
    assert first == again
    assert first != other


def test_without_a_seed_the_fleet_draws_one_and_says_which() -> None:
    unseeded, _ = fleet(rps=1, seed=None)
    assert 0 <= unseeded.seed < 2**32
    seeded, _ = fleet(rps=1, seed=unseeded.seed)
    assert seeded.seed == unseeded.seed


def test_utilization_follows_the_load_drawn() -> None:
    made, clock = fleet(rps=10, seed=51)  # the candidate: 1 req/s against 10 of capacity
    seen = []
    for _ in range(200):
        clock.now += 0.5
        made.advance()
        (occupant,) = made.occupants("inf2-node")
        seen.append(occupant.utilization)
    expected = serve(PROFILE, 1.0).utilization
    assert len(set(seen)) > 3, "not a constant: it follows the requests that came"
    assert min(seen) < expected < max(seen)
    # Over 100 s the mean follows 100 drawn requests: within 4 x sqrt(100) of them.
    assert np.mean(seen) == pytest.approx(expected, rel=0.4)


def test_a_scrape_after_a_late_draw_reads_the_load_not_idle_time() -> None:
    """On a busy machine the fleet's last draw may lag a scrape: 200 requests drawn over the
    second up to t = 10, read at t = 10.2. The load was 200 per second, not 200 in 1.2 s."""
    recent = RecentLoad(window=1.0)
    recent.add(9.0, 1.0, 0)
    recent.add(10.0, 1.0, 200)

    assert recent.rate(10.2) == pytest.approx(200.0)
    assert recent.rate(10.0) == pytest.approx(200.0)
    recent.add(10.5, 0.5, 0)
    assert recent.rate(10.5) == pytest.approx(100.0), "half the last second admitted nothing"
