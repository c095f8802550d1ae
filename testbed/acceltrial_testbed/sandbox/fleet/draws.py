"""The requests one simulated pod serves, drawn at random as production sends them.

Requests arrive as a Poisson process at the rate the pod is offered. Each request then gets:

- an outcome: refused when the replica is beyond capacity (with the share the model refuses),
  otherwise failed with the profile's ``error_ratio``, otherwise answered;
- a latency from the log-normal the model gives at the current load (median and sigma), so the
  profile's p50 and p99 at low load are the distribution's median and 99th percentile;
- a queue wait, exponential with the model's mean wait;
- prompt and generated token counts, gamma-distributed around the fleet's means (coefficient of
  variation 1/2, at least one generated token);
- whether it came from a user or is a mirrored copy (with the pod's user share).

Every kind of draw has its own random stream, and arrivals are drawn on the pod's cumulative
offered load (a time change of a unit-rate Poisson process), so the requests depend only on the
seed and the history of the rates, not on how often the fleet is ticked or scraped between them.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from acceltrial_testbed.sandbox.fleet.model import ReplicaRates

TOKEN_SHAPE = 4.0
"""Gamma shape of the token counts: coefficient of variation 1/sqrt(4) = 0.5."""
_CHUNK = 256
Floats = NDArray[np.float64]


def stream(seed: int, *key: int) -> np.random.Generator:
    """The generator for one purpose, identified by ``key`` under the fleet's ``seed``."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=key))


class Arrivals:
    """A Poisson process on cumulative load: ``count(load)`` is how many requests arrive while
    ``load`` more requests are expected (rate x seconds)."""

    def __init__(self, rng: np.random.Generator) -> None:
        self._rng = rng
        self._load = 0.0
        self._upcoming: Floats = np.cumsum(rng.standard_exponential(_CHUNK))
        self._next = 0

    def count(self, load: float) -> int:
        self._load += max(0.0, load)
        arrived = 0
        while True:
            found = int(np.searchsorted(self._upcoming, self._load, side="right"))
            arrived += found - self._next
            self._next = found
            if found < len(self._upcoming):
                return arrived
            last = self._upcoming[-1]
            self._upcoming = last + np.cumsum(self._rng.standard_exponential(_CHUNK))
            self._next = 0


@dataclass(frozen=True)
class Drawn:
    """The requests that arrived at one pod in one interval."""

    latency: Floats
    """End-to-end seconds of each answered request."""
    queue: Floats
    """Seconds each answered request waited before it was scheduled."""
    prompt: Floats
    """Prompt tokens of each answered request."""
    generated: Floats
    """Generated tokens of each answered request."""
    errored: int
    """Admitted requests that failed."""
    refused: int
    """Requests turned away beyond capacity."""
    users: int
    """Requests (answered, failed or refused) that came from users, not mirrored copies."""

    @property
    def succeeded(self) -> int:
        return len(self.latency)

    @property
    def admitted(self) -> int:
        return self.succeeded + self.errored


class PodDraws:
    """The random streams of one pod (``key`` tells it from every other pod of the fleet)."""

    def __init__(self, seed: int, *key: int) -> None:
        self.arrivals = Arrivals(stream(seed, *key, 0))
        self._outcome = stream(seed, *key, 1)
        self._latency = stream(seed, *key, 2)
        self._queue = stream(seed, *key, 3)
        self._prompt = stream(seed, *key, 4)
        self._generated = stream(seed, *key, 5)
        self._user = stream(seed, *key, 6)

    def serve(
        self,
        rates: ReplicaRates,
        seconds: float,
        user_share: float,
        tokens: tuple[int, int],
    ) -> Drawn:
        """The requests arriving in ``seconds`` at ``rates``; ``tokens`` are the mean prompt
        and generated tokens of a request."""
        arrived = self.arrivals.count(rates.offered * seconds)
        outcome = self._outcome.random(arrived)
        refused_share = rates.refused / rates.offered if rates.offered > 0 else 0.0
        failed_share = rates.failed / rates.offered if rates.offered > 0 else 0.0
        answered = outcome >= failed_share
        refused = int(np.count_nonzero(outcome < refused_share))
        log_latency = self._latency.standard_normal(arrived) * rates.sigma
        latency = rates.latency_median * np.exp(log_latency[answered])
        queue = rates.mean_wait * self._queue.standard_exponential(arrived)[answered]
        prompt_mean, generated_mean = tokens
        prompt = _tokens(self._prompt, arrived, prompt_mean, least=0)[answered]
        generated = _tokens(self._generated, arrived, generated_mean, least=1)[answered]
        from_users = self._user.random(arrived) < user_share
        return Drawn(
            latency=latency,
            queue=queue,
            prompt=prompt,
            generated=generated,
            errored=arrived - refused - int(np.count_nonzero(answered)),
            refused=refused,
            users=int(np.count_nonzero(from_users)),
        )


def _tokens(rng: np.random.Generator, size: int, mean: float, least: int) -> Floats:
    drawn = rng.standard_gamma(TOKEN_SHAPE, size) * (mean / TOKEN_SHAPE)
    counts: Floats = np.maximum(np.rint(drawn), least)
    return counts


class RecentLoad:
    """Requests a pod admitted over the last ``window`` seconds: the load its accelerator and
    its running and waiting gauges follow. An interval reaching back past the window counts in
    proportion to its part inside it."""

    def __init__(self, window: float = 1.0) -> None:
        self.window = window
        self._served: deque[tuple[float, float, int]] = deque()
        self._since: float | None = None

    def add(self, now: float, seconds: float, admitted: int) -> None:
        if self._since is None:
            self._since = now - seconds
        if seconds > 0:
            self._served.append((now - seconds, now, admitted))
        while self._served and self._served[0][1] <= now - self.window:
            self._served.popleft()

    def rate(self, now: float) -> float | None:
        """Admitted requests per second lately; None before any time has been served. The
        window ends where the draws do, not at ``now``: on a busy machine the last draw may lag
        a scrape by a fraction of a second, and the time not drawn yet is no idle time (a
        candidate's utilization read 16% low so, beyond its noise)."""
        if self._since is None:
            return None
        drawn_to = min(now, self._served[-1][1]) if self._served else now
        start = max(self._since, drawn_to - self.window)
        if drawn_to - start <= 0:
            return None
        inside = sum(
            count * (min(end, drawn_to) - max(begin, start)) / (end - begin)
            for begin, end, count in self._served
            if end > start
        )
        return inside / (drawn_to - start)
