"""Requests of the trial's own (the capacity sweep's load) as one simulated pod answers them: a
replica that serves ``concurrency`` requests at once (fleet/model.py: its continuous batch, from
Little's law at its capacity), each for a service time drawn from the profile's log-normal, and
queues the rest first come, first served. So a closed-loop load at rising concurrency sees what
a server shows: throughput grows until the batch is full, then flattens at the profile's
capacity while latency grows with the queue. A request that would wait longer than
:data:`QUEUE_SERVICES` mean service times is refused at once (503, as an overloaded server's
admission control does); an admitted one fails with the profile's error ratio (500).

The queue is kept as the time each batch slot frees up, so no thread waits for another: the
answer's delay is known when the request arrives. The sweep runs before any user reaches the
pod, so its slots are the sweep's alone. The pod's trial requests of the last
:data:`ARRIVAL_WINDOW` seconds also join what the fleet's next tick offers it, so its metrics
(and its accelerator's utilization) show the load, apart from its users' requests.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from acceltrial_testbed.sandbox.fleet.model import ServingProfile

ARRIVAL_WINDOW = 1.0
"""Seconds over which the trial's requests to a pod make its rate."""
TRIAL_STREAM = 7
"""The pod's random stream of its trial requests (after its user draws' streams)."""
QUEUE_SERVICES = 2.0
"""A request that would wait longer than this many mean service times is refused."""


@dataclass(frozen=True)
class TrialAnswer:
    """How a pod answers one trial request: an HTTP status and after how long."""

    status: int
    """200 answered, 500 failed, 503 refused (the queue is full)."""
    seconds: float
    waited: float = 0.0
    """Of ``seconds``, the time it queued for a batch slot (before its first token)."""


class TrialLoad:
    """One pod's trial requests: their recent arrivals, its batch slots, each one's answer."""

    def __init__(self, rng: np.random.Generator) -> None:
        self._rng = rng
        self._arrivals: deque[float] = deque()
        self._free_at: list[float] = []

    def rate(self, now: float) -> float:
        """Trial requests per second that arrived over the last window."""
        while self._arrivals and self._arrivals[0] <= now - ARRIVAL_WINDOW:
            self._arrivals.popleft()
        return len(self._arrivals) / ARRIVAL_WINDOW

    def answer(self, profile: ServingProfile, now: float) -> TrialAnswer:
        """One request arriving ``now``."""
        self._arrivals.append(now)
        if len(self._free_at) != profile.concurrency:
            self._free_at = [now] * profile.concurrency
        slot = min(range(len(self._free_at)), key=self._free_at.__getitem__)
        begins = max(now, self._free_at[slot])
        mean_service = profile.mean_service * profile.latency_factor
        if begins - now > QUEUE_SERVICES * mean_service:
            return TrialAnswer(503, 0.0)
        draw = float(self._rng.standard_normal())
        service = profile.p50 * profile.latency_factor * math.exp(profile.sigma * draw)
        self._free_at[slot] = begins + service
        failed = float(self._rng.random()) < profile.error_ratio
        return TrialAnswer(500 if failed else 200, begins + service - now, begins - now)
