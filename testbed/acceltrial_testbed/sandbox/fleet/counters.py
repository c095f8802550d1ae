"""What one simulated model-server pod has served so far: the cumulative counts and histograms
every exporter shape is rendered from, in the units the real servers count in."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from acceltrial.engine.metrics import Variant
from acceltrial_testbed.sandbox.fleet.model import ReplicaRates

# Fine buckets (10% apart) so histogram_quantile() lands within a few percent of the truth;
# real vLLM and TGI buckets are coarser, which only widens that error.
BUCKETS = tuple(round(0.001 * 1.1**i, 6) for i in range(124))
TOKEN_BUCKETS = tuple(float(2**i) for i in range(17))
"""Token-count histograms (TGI's generated tokens and input length): 1 to 65536."""


@dataclass
class Histogram:
    bounds: tuple[float, ...] = BUCKETS
    buckets: list[float] = field(default_factory=list)
    count: float = 0.0
    total: float = 0.0

    def __post_init__(self) -> None:
        if not self.buckets:
            self.buckets = [0.0] * len(self.bounds)

    def observe(self, requests: float, cdf: Callable[[float], float], mean: float) -> None:
        """Add ``requests`` observations distributed as ``cdf`` with the given mean."""
        for i, bound in enumerate(self.bounds):
            self.buckets[i] += requests * cdf(bound)
        self.count += requests
        self.total += requests * mean

    def observe_exactly(self, requests: float, value: float) -> None:
        """Add ``requests`` observations that are all ``value``."""
        self.observe(requests, lambda bound: 1.0 if value <= bound else 0.0, value)


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
