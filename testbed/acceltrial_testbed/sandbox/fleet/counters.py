"""What one simulated model-server pod has served so far: the cumulative counts and histograms
every exporter shape is rendered from, in the units the real servers count in."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray
from scipy import special  # type: ignore[import-untyped]

from acceltrial.engine.metrics import Variant
from acceltrial_testbed.sandbox.fleet.model import ReplicaRates

# Fine buckets (10% apart) so histogram_quantile() lands within a few percent of the truth;
# real vLLM and TGI buckets are coarser, which only widens that error.
BUCKETS = tuple(round(0.001 * 1.1**i, 6) for i in range(124))
TOKEN_BUCKETS = tuple(float(2**i) for i in range(17))
"""Token-count histograms (TGI's generated tokens and input length): 1 to 65536."""
Floats = NDArray[np.float64]


@functools.cache
def _log_bounds(bounds: tuple[float, ...]) -> Floats:
    logs: Floats = np.log(np.asarray(bounds, dtype=np.float64))
    return logs


@dataclass
class Histogram:
    bounds: tuple[float, ...] = BUCKETS
    buckets: Floats = field(default_factory=lambda: np.zeros(0))
    """Cumulative counts at each bound (a NumPy array: every fleet tick adds to all of them)."""
    count: float = 0.0
    total: float = 0.0

    def __post_init__(self) -> None:
        if len(self.buckets) != len(self.bounds):
            self.buckets = np.zeros(len(self.bounds))

    def observe_lognormal(self, requests: float, median: float, sigma: float, mean: float) -> None:
        """Add ``requests`` observations log-normal with ``median`` and ``sigma`` (the log's
        standard deviation) and the given mean: all bounds at once, as a fleet of dozens of
        pods ticked four times a second needs."""
        below = special.ndtr((_log_bounds(self.bounds) - math.log(median)) / sigma)
        self._add(requests, below, mean)

    def observe_exponential(self, requests: float, mean: float) -> None:
        """Add ``requests`` observations exponential with ``mean`` (all 0 when it is 0)."""
        bounds = np.asarray(self.bounds)
        below = np.ones(len(bounds)) if mean <= 0 else -np.expm1(-bounds / mean)
        self._add(requests, below, max(0.0, mean))

    def _add(self, requests: float, below: Floats, mean: float) -> None:
        self.buckets = self.buckets + requests * below
        self.count += requests
        self.total += requests * mean

    def observe_exactly(self, requests: float, value: float) -> None:
        """Add ``requests`` observations that are all ``value``."""
        self._add(requests, (value <= np.asarray(self.bounds)).astype(np.float64), value)


@dataclass
class PodCounters:
    """One Ready pod of the fleet: where it runs, what it holds and what it has served."""

    namespace: str
    variant: Variant
    accelerator: tuple[str, int]
    """Which exporter reports its accelerator (dcgm or neuron) and how many units it holds."""
    node: str | None = None
    container: str = "server"
    e2e: Histogram = field(default_factory=Histogram)
    ttft: Histogram = field(default_factory=Histogram)
    itl: Histogram = field(default_factory=Histogram)
    queue: Histogram = field(default_factory=Histogram)
    time_per_token: Histogram = field(default_factory=Histogram)
    """One sample per request: its mean time per generated token (TGI's histogram)."""
    generated_per_request: Histogram = field(default_factory=lambda: Histogram(TOKEN_BUCKETS))
    prompt_per_request: Histogram = field(default_factory=lambda: Histogram(TOKEN_BUCKETS))
    succeeded: float = 0.0
    errored: float = 0.0
    """Admitted requests that failed (a 5xx from the server, TGI's err="generation")."""
    refused: float = 0.0
    """Requests beyond capacity turned away (a 5xx, TGI's err="overloaded")."""
    started: float = 0.0
    """Requests that began: finished ones plus those in flight (TGI counts at the start)."""
    prompt_tokens: float = 0.0
    generated_tokens: float = 0.0
    rates: ReplicaRates | None = None
    user_share: float = 1.0
    """The share of what it is offered now that users sent (the rest: mirrored copies, whose
    answers the gateway discards)."""
    user_requests: float = 0.0
    """Requests from users it has answered (succeeded or failed), copies not counted."""

    @property
    def failed(self) -> float:
        return self.errored + self.refused
