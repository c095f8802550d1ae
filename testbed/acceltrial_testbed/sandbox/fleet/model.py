"""How one replica of a model server serves a given request rate. Pure arithmetic.

A replica serves ``concurrency`` requests at once (continuous batching), each taking a service
time drawn from a log-normal fitted to the profile's p50 and p99 at low load. Requests beyond its
concurrency wait, as in an M/M/c queue (Erlang C); latency is the service time scaled by
``1 + mean wait / mean service``, which keeps the log-normal shape. Requests offered beyond
capacity are refused with a 5xx, as an overloaded server's admission control does.

These are the expected rates; ``draws`` draws the requests themselves around them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

Z_99 = NormalDist().inv_cdf(0.99)
SATURATION = 0.98
"""Load beyond which the queue is treated as full: latency stops growing, excess is refused."""


@dataclass(frozen=True)
class ServingProfile:
    """One variant's replica: latency at low load, capacity, errors and accelerator use."""

    p50: float
    p99: float
    capacity_rps: float
    error_ratio: float = 0.0
    utilization_idle: float = 0.0
    utilization_at_capacity: float = 0.95
    latency_factor: float = 1.0
    """A regression's slowdown on top of the profile."""

    @property
    def sigma(self) -> float:
        return math.log(self.p99 / self.p50) / Z_99

    @property
    def mean_service(self) -> float:
        return self.p50 * math.exp(self.sigma**2 / 2)

    @property
    def concurrency(self) -> int:
        """Requests served at once, from Little's law at capacity."""
        return max(1, round(self.capacity_rps * self.mean_service))


@dataclass(frozen=True)
class ReplicaRates:
    """Per-second rates and gauges of one replica at one offered load."""

    offered: float
    succeeded: float
    failed: float
    """Refused (beyond capacity) plus admitted requests that failed."""
    refused: float
    latency_median: float
    sigma: float
    mean_latency: float
    mean_wait: float
    utilization: float
    running: float
    waiting: float

    def latency_quantile(self, q: float) -> float:
        return math.exp(NormalDist(math.log(self.latency_median), self.sigma).inv_cdf(q))


def erlang_c(servers: int, load: float) -> float:
    """Probability that an arrival waits in an M/M/c queue with ``load`` Erlangs offered.

    From Erlang B's recurrence, B(k) = load B(k-1) / (k + load B(k-1)), then C = c B / (c -
    load (1 - B)): every term stays within 0..1. The sum of load^k / k! overflows past about
    700 Erlangs (a pod of 800 batch slots offered 600 requests/s), and made the fleet's
    gauges NaN."""
    if load <= 0:
        return 0.0
    if load >= servers:
        return 1.0
    blocked = 1.0
    for k in range(1, servers + 1):
        blocked = load * blocked / (k + load * blocked)
    return servers * blocked / (servers - load * (1 - blocked))


def serve(profile: ServingProfile, offered_rps: float) -> ReplicaRates:
    """The rates of one replica offered ``offered_rps`` requests per second."""
    offered = max(0.0, offered_rps)
    admitted = min(offered, profile.capacity_rps)
    service = profile.mean_service * profile.latency_factor
    servers = profile.concurrency
    load = min(admitted / profile.capacity_rps, SATURATION) * servers
    wait = erlang_c(servers, load) * service / (servers - load) if load > 0 else 0.0
    scale = 1 + wait / service
    succeeded = admitted * (1 - profile.error_ratio)
    return ReplicaRates(
        offered=offered,
        succeeded=succeeded,
        failed=offered - succeeded,
        refused=offered - admitted,
        latency_median=profile.p50 * profile.latency_factor * scale,
        sigma=profile.sigma,
        mean_latency=service * scale,
        mean_wait=wait,
        utilization=utilization(profile, admitted),
        running=admitted * service,
        waiting=admitted * wait,
    )


def utilization(profile: ServingProfile, admitted_rps: float) -> float:
    """The accelerator's utilization while the replica admits ``admitted_rps``: from idle with
    no load to ``utilization_at_capacity`` at capacity."""
    busy = min(1.0, max(0.0, admitted_rps) / profile.capacity_rps)
    span = profile.utilization_at_capacity - profile.utilization_idle
    return min(1.0, profile.utilization_idle + busy * span)
