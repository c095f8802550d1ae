"""What one simulated model-server pod has served so far: the cumulative counts and histograms
every exporter shape is rendered from, in the units the real servers count in, counting the
requests drawn for it (``draws``)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from acceltrial.engine.metrics import Variant
from acceltrial_testbed.sandbox.fleet.draws import PodDraws, RecentLoad
from acceltrial_testbed.sandbox.fleet.model import ReplicaRates, ServingProfile
from acceltrial_testbed.sandbox.fleet.trial_requests import TrialLoad

Floats = NDArray[np.float64]

# Fine buckets (10% apart) so histogram_quantile() lands within a few percent of the truth;
# real vLLM and TGI buckets are coarser, which only widens that error.
BUCKETS = tuple(round(0.001 * 1.1**i, 6) for i in range(124))
TOKEN_BUCKETS = tuple(float(2**i) for i in range(17))
"""Token-count histograms (TGI's generated tokens and input length): 1 to 65536."""


@dataclass
class Histogram:
    bounds: tuple[float, ...] = BUCKETS
    buckets: Floats = field(default_factory=lambda: np.zeros(0))
    """Cumulative: observations at or below each bound (a NumPy array)."""
    count: float = 0.0
    total: float = 0.0

    def __post_init__(self) -> None:
        if len(self.buckets) != len(self.bounds):
            self.buckets = np.zeros(len(self.bounds))

    def observe(self, values: Floats, weights: Floats | None = None) -> None:
        """Add one observation of each value (``weights[i]`` observations of ``values[i]``)."""
        if len(values) == 0:
            return
        counts = np.ones(len(values)) if weights is None else weights
        where = np.searchsorted(self.bounds, values, side="left")
        per_bucket = np.bincount(where, weights=counts, minlength=len(self.bounds) + 1)
        added = np.cumsum(per_bucket[: len(self.bounds)])
        self.buckets = self.buckets + added
        self.count += float(counts.sum())
        self.total += float((values * counts).sum())


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
    """The model's expected rates at what the pod is offered now."""
    profile: ServingProfile | None = None
    """The variant's profile now (regressions applied)."""
    draws: PodDraws | None = None
    """The pod's random streams: its arrivals and each request's latency, tokens, outcome."""
    recent: RecentLoad = field(default_factory=RecentLoad)
    """What it admitted lately: its accelerator's utilization and gauges follow it."""
    utilization: float = 0.0
    """Its accelerator's utilization (0..1), from the load it admitted lately."""
    running: float = 0.0
    """Requests being served, from the load it admitted lately (Little's law)."""
    waiting: float = 0.0
    """Requests waiting to be scheduled, likewise."""
    user_share: float = 1.0
    """The share of what it is offered now that users sent (the rest: mirrored copies, whose
    answers the gateway discards)."""
    user_requests: float = 0.0
    """Requests from users it has answered (succeeded or failed), copies not counted."""
    trial: TrialLoad | None = None
    """The trial's own requests to it (the capacity sweep), answered over HTTP."""

    @property
    def failed(self) -> float:
        return self.errored + self.refused
