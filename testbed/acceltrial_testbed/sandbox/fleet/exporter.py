"""The fleet itself: per-pod counters that grow with the traffic each pod serves, exported as the
real servers and exporters export them.

Every ``tick_seconds`` the fleet reads the cluster (pods, Services, the HTTPRoute: followed by
watches, ``watching``; a reader can be given), splits the
total request rate, and sets each Ready pod's rates from what its variant's model serves at that
load. Between ticks each pod draws its requests at those rates (``draws``: Poisson arrivals, and
each request's latency, tokens and outcome, from streams seeded by ``FleetSpec.seed``), and its
counters count them, so a quiet window can be empty and a p99 of three requests is noisy, as in
production. A scrape first serves the time since the last tick at the current rates and
stamps every sample with that moment, so counters are as current as a real server's however late
a busy machine runs the tick (stale counters read 12 req/s as 21 over a short ``rate()`` window).
The fleet itself is the model servers' collector (``servers`` says in which shape);
:meth:`Fleet.node_exporters` gives one collector per node for the accelerator exporters
(``accelerators``), each to be served and scraped as its own target.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from acceltrial.engine.candidate import VARIANT_LABEL
from acceltrial.engine.metrics import Variant
from acceltrial_testbed.sandbox.access import Access, as_access
from acceltrial_testbed.sandbox.fleet.accelerators import (
    ExporterOptions,
    Node,
    NodeExporter,
    Occupant,
)
from acceltrial_testbed.sandbox.fleet.counters import PodCounters
from acceltrial_testbed.sandbox.fleet.draws import Arrivals, Drawn, PodDraws, stream
from acceltrial_testbed.sandbox.fleet.gateway import (
    route_status,
    status_changed,
    write_route_status,
)
from acceltrial_testbed.sandbox.fleet.model import ServingProfile, serve, utilization
from acceltrial_testbed.sandbox.fleet.servers import (
    DEFAULT_VLLM_VERSION,
    ServedPod,
    Server,
    VllmShape,
    families,
)
from acceltrial_testbed.sandbox.fleet.serving import HistogramRows
from acceltrial_testbed.sandbox.fleet.ticking import Ticking
from acceltrial_testbed.sandbox.fleet.traffic import (
    ClusterView,
    Entry,
    Manifest,
    read_nodes,
    ready,
    resolved_rules,
    routed,
)
from acceltrial_testbed.sandbox.fleet.trial_requests import TRIAL_STREAM, TrialAnswer, TrialLoad
from acceltrial_testbed.sandbox.fleet.watching import WatchedCollections, watched_reader

TTFT_SHARE = 0.1
"""Share of a request's latency spent before the first token (prefill)."""
VARIANT_STREAMS: Mapping[Variant, int] = {"baseline": 0, "candidate": 1}
GATEWAY_STREAM = 2
SEED_BELOW = 2**32
"""A seed drawn when none is given is below this (short enough to print and type)."""


@dataclass(frozen=True)
class Regression:
    """A change to one variant's serving once a condition holds."""

    variant: Variant
    from_weight: int | None = None
    """Active while the variant gets at least this percentage of the requests."""
    after_seconds: float | None = None
    """Active from this long after the variant first served a request."""
    latency_factor: float = 1.0
    error_ratio: float | None = None


@dataclass(frozen=True)
class FleetSpec:
    """What the fleet simulates."""

    entry: Entry
    rps: float
    prompt_tokens: int
    generated_tokens: int
    profiles: Mapping[Variant, ServingProfile]
    regressions: Sequence[Regression] = ()
    model_name: str = "model"
    server: Server = "vllm"
    vllm_versions: Mapping[Variant, str] = field(
        default_factory=lambda: {
            "baseline": DEFAULT_VLLM_VERSION,
            "candidate": DEFAULT_VLLM_VERSION,
        }
    )
    """The vLLM release each variant runs: which version-dependent series it exports."""
    gpu_exporter: ExporterOptions = field(
        default_factory=lambda: ExporterOptions(kubernetes_labels=True)
    )
    """dcgm-exporter as its Helm chart installs it: Kubernetes mapping on, honorLabels false."""
    neuron_exporter: ExporterOptions = field(
        default_factory=lambda: ExporterOptions(kubernetes_labels=False)
    )
    """neuron-monitor as its sample DaemonSet runs it: no --enable-k8s-info."""
    seed: int | None = None
    """Seeds every random draw: the same seed and the same history of rates give the same
    requests. None draws a seed (:attr:`Fleet.seed` says which)."""


@dataclass(frozen=True)
class VariantTraffic:
    """What one variant serves right now."""

    pods: int
    offered_rps: float
    """Requests per second it is offered, mirrored copies included."""
    succeeded_rps: float
    p99: float | None
    user_rps: float = 0.0
    """Requests per second from users (what the gateway answers them with)."""
    user_requests: float = 0.0
    """Requests from users it has answered since the fleet started."""


@dataclass(frozen=True)
class FleetSnapshot:
    variants: Mapping[Variant, VariantTraffic]

    @property
    def candidate_percent(self) -> float:
        total = sum(v.user_rps for v in self.variants.values())
        return 100 * self.variants["candidate"].user_rps / total if total else 0.0

    @property
    def mirrored_rps(self) -> float:
        """Copies of requests per second the candidate gets (a shadow step)."""
        candidate = self.variants["candidate"]
        return candidate.offered_rps - candidate.user_rps


class Fleet(Collector):
    """The simulated servers of one namespace; a prometheus_client collector."""

    def __init__(
        self,
        cluster: Access | str,
        spec: FleetSpec,
        *,
        clock: Callable[[], float] = time.monotonic,
        reader: Callable[[Access, Entry], ClusterView] | None = None,
        node_reader: Callable[[Access], Sequence[Manifest]] = read_nodes,
        wall_clock: Callable[[], float] = time.time,
        status_writer: Callable[[Access, Manifest, list[Manifest]], None] = write_route_status,
    ) -> None:
        self.access = as_access(cluster)
        self.api_url = self.access.url
        self.spec = spec
        self._clock = clock
        self._wall_clock = wall_clock
        self._watched: WatchedCollections | None = None
        if reader is None:  # the cluster as a gateway follows it: by watches
            self._watched = WatchedCollections(self.access)
            reader = watched_reader(self._watched)
        self._read = reader
        self._read_nodes = node_reader
        self._write_status = status_writer
        self.gateway_answered: dict[int, float] = {}
        """Requests the gateway answered itself, by HTTP status (500: a backend it may not or
        cannot use; 503: a backend with no Ready endpoints)."""
        self._gateway_errors: dict[int, float] = {}
        self.seed = spec.seed if spec.seed is not None else secrets.randbelow(SEED_BELOW)
        """The seed of every draw (``spec.seed``, or drawn when it is None)."""
        self._gateway_arrivals: dict[int, Arrivals] = {}
        self._joined: dict[Variant, int] = {"baseline": 0, "candidate": 0}
        """Pods of each variant seen so far: a new pod's streams are the next ones."""
        self._pods: dict[str, PodCounters] = {}
        self._first_served: dict[Variant, float] = {}
        self._user_requests: dict[Variant, float] = {"baseline": 0.0, "candidate": 0.0}
        """Users' requests answered by pods no longer Ready."""
        self._last: float | None = None
        self._lock = threading.Lock()
        self._ticking = Ticking(self.advance, "fleet")

    # -- simulation ------------------------------------------------------------------------

    def advance(self) -> None:
        """Serve the time since the last call at the rates so far, then re-read the cluster and
        set each pod's rates from what it is offered now."""
        view = self._read(self.access, self.spec.entry)
        self._report_route_status(view)
        answered = routed(view, self.spec.entry, self.spec.rps)
        offered, mirrored = answered.offered, answered.mirrored
        now = self._clock()
        with self._lock:
            self._serve_until(now)
            self._gateway_errors = answered.errors
            self._sync_pods(view)
            shares = self._shares(offered)
            for name, pod in self._pods.items():
                pod.profile = self._profile(pod.variant, shares[pod.variant], now)
                users, copies = offered.get(name, 0.0), mirrored.get(name, 0.0)
                # The trial's own requests (a capacity sweep) load it too, never as users'.
                total = users + copies + (pod.trial.rate(now) if pod.trial else 0.0)
                pod.rates = serve(pod.profile, total)
                pod.user_share = users / total if total > 0 else 1.0
                if pod.rates.offered > 0:
                    self._first_served.setdefault(pod.variant, now)
                _set_gauges(pod, now)

    def _report_route_status(self, view: ClusterView) -> None:
        """Write the route's status conditions as the gateway sees the route now."""
        if view.route is None or "metadata" not in view.route:
            return
        parents = route_status(view.route, resolved_rules(view, self.spec.entry))
        if status_changed(view.route, parents):
            self._write_status(self.access, view.route, parents)

    def _serve_until(self, now: float) -> None:
        """Advance every pod's counters at its current rates up to ``now``."""
        elapsed = 0.0 if self._last is None else max(0.0, now - self._last)
        self._last = now
        for status, rps in self._gateway_errors.items():
            arrivals = self._gateway_arrivals.setdefault(
                status, Arrivals(stream(self.seed, GATEWAY_STREAM, status))
            )
            answered = arrivals.count(rps * elapsed)
            self.gateway_answered[status] = self.gateway_answered.get(status, 0.0) + answered
        tokens = (self.spec.prompt_tokens, self.spec.generated_tokens)
        for pod in self._pods.values():
            if pod.rates is not None and pod.draws is not None:
                drawn = pod.draws.serve(pod.rates, elapsed, pod.user_share, tokens)
                _count(pod, drawn)
                pod.recent.add(now, elapsed, drawn.admitted)
                _set_gauges(pod, now)

    def _sync_pods(self, view: ClusterView) -> None:
        current = {p["metadata"]["name"]: p for p in view.pods if ready(p)}
        for gone in set(self._pods) - set(current):
            leaving = self._pods.pop(gone)
            self._user_requests[leaving.variant] += leaving.user_requests
        for name, pod in sorted(current.items()):
            if name not in self._pods:
                labels = pod["metadata"].get("labels") or {}
                variant: Variant = (
                    "candidate" if labels.get(VARIANT_LABEL) == "candidate" else "baseline"
                )
                containers = pod.get("spec", {}).get("containers") or [{}]
                self._pods[name] = PodCounters(
                    namespace=self.spec.entry.namespace,
                    variant=variant,
                    accelerator=_accelerator(pod),
                    node=pod.get("spec", {}).get("nodeName"),
                    container=containers[0].get("name", "server"),
                    draws=PodDraws(self.seed, VARIANT_STREAMS[variant], self._joined[variant]),
                    trial=TrialLoad(
                        stream(self.seed, VARIANT_STREAMS[variant], self._joined[variant],
                               TRIAL_STREAM)
                    ),
                )  # fmt: skip
                self._joined[variant] += 1

    def _shares(self, offered: Mapping[str, float]) -> dict[Variant, float]:
        total = sum(offered.values())
        shares: dict[Variant, float] = {"baseline": 0.0, "candidate": 0.0}
        for name, pod in self._pods.items():
            shares[pod.variant] += 100 * offered.get(name, 0.0) / total if total else 0.0
        return shares

    def _profile(self, variant: Variant, percent: float, now: float) -> ServingProfile:
        profile = self.spec.profiles[variant]
        for regression in self.spec.regressions:
            if regression.variant == variant and self._active(regression, percent, now):
                profile = replace(
                    profile,
                    latency_factor=profile.latency_factor * regression.latency_factor,
                    error_ratio=(
                        profile.error_ratio
                        if regression.error_ratio is None
                        else regression.error_ratio
                    ),
                )
        return profile

    def _active(self, regression: Regression, percent: float, now: float) -> bool:
        if regression.from_weight is not None and percent + 1e-9 < regression.from_weight:
            return False
        if regression.after_seconds is not None:
            first = self._first_served.get(regression.variant)
            return first is not None and now - first >= regression.after_seconds
        return True

    def serve_trial_request(self, pod: str) -> TrialAnswer | None:
        """How ``pod`` answers one of the trial's own requests now (fleet/trial_requests.py);
        None when the fleet does not serve it (yet)."""
        with self._lock:
            counters = self._pods.get(pod)
            if counters is None or counters.profile is None or counters.trial is None:
                return None
            return counters.trial.answer(counters.profile, self._clock())

    def pods(self, variant: Variant) -> list[str]:
        """Names of the Ready pods serving as ``variant``."""
        with self._lock:
            return [name for name, pod in self._pods.items() if pod.variant == variant]

    def snapshot(self) -> FleetSnapshot:
        """Per variant: pods, offered and served requests per second, the modelled p99."""
        with self._lock:
            result: dict[Variant, VariantTraffic] = {}
            for variant in ("baseline", "candidate"):
                pods = [p for p in self._pods.values() if p.variant == variant and p.rates]
                rates = [p.rates for p in pods if p.rates]
                busy = [r for r in rates if r.succeeded > 0]
                result[variant] = VariantTraffic(
                    pods=len(rates),
                    offered_rps=sum(r.offered for r in rates),
                    succeeded_rps=sum(r.succeeded for r in rates),
                    p99=max((r.latency_quantile(0.99) for r in busy), default=None),
                    user_rps=sum(p.rates.offered * p.user_share for p in pods if p.rates),
                    user_requests=self._user_requests[variant]
                    + sum(p.user_requests for p in self._pods.values() if p.variant == variant),
                )
            return FleetSnapshot(result)

    # -- running ---------------------------------------------------------------------------

    def start(self, tick_seconds: float = 0.25) -> Fleet:
        self._ticking.start(tick_seconds)
        return self

    def stop(self) -> None:
        self._ticking.stop()
        if self._watched is not None:
            self._watched.stop()

    # -- exporting -------------------------------------------------------------------------

    def collect(self) -> Iterator[Metric]:
        """The model servers' metrics, as ``spec.server`` at each variant's release exports them."""
        versions = self.spec.vllm_versions
        with self._lock:
            self._serve_until(self._clock())
            served = [
                ServedPod(name, pod, VllmShape.of(versions[pod.variant]))
                for name, pod in sorted(self._pods.items())
            ]
            rendered = list(families(self.spec.server, served, self.spec.model_name))
            stamp = self._wall_clock()
        for family in rendered:
            if isinstance(family, HistogramRows):
                family.timestamp = stamp
            else:
                family.samples = [sample._replace(timestamp=stamp) for sample in family.samples]
        yield from rendered

    def node_exporters(self) -> list[NodeExporter]:
        """One collector per accelerator exporter pod: dcgm-exporter on every GPU node,
        neuron-monitor on every Neuron node (the cluster's nodes as they are now)."""
        options = {"dcgm": self.spec.gpu_exporter, "neuron": self.spec.neuron_exporter}
        nodes = sorted(
            (Node.of(manifest) for manifest in self._read_nodes(self.access)),
            key=lambda node: node.name,
        )
        return [
            NodeExporter(exporter, node, options[exporter], self.occupants)
            for node in nodes
            for exporter in node.exporters()
        ]

    def occupants(self, node: str) -> list[Occupant]:
        """The fleet's Ready pods on ``node`` and their accelerators' utilization."""
        with self._lock:
            return [
                Occupant(
                    namespace=pod.namespace,
                    pod=name,
                    container=pod.container,
                    exporter=pod.accelerator[0],
                    units=pod.accelerator[1],
                    utilization=pod.utilization,
                )
                for name, pod in sorted(self._pods.items())
                if pod.node == node
            ]


def _accelerator(pod: Manifest) -> tuple[str, int]:
    wanted: dict[str, Any] = {}
    for container in pod.get("spec", {}).get("containers") or []:
        resources = container.get("resources") or {}
        wanted |= resources.get("requests") or {}
        wanted |= resources.get("limits") or {}
    for resource, exporter in (
        ("aws.amazon.com/neuroncore", "neuron"),
        ("aws.amazon.com/neuron", "neuron"),
        ("nvidia.com/gpu", "dcgm"),
    ):
        amount = str(wanted.get(resource, ""))
        if amount.isdigit() and int(amount) > 0:
            units = int(amount) * (2 if resource == "aws.amazon.com/neuron" else 1)
            return exporter, units
    return "none", 0


def _count(pod: PodCounters, drawn: Drawn) -> None:
    """Add the requests drawn for ``pod`` to its counters and histograms."""
    pod.user_requests += drawn.users
    pod.succeeded += drawn.succeeded
    pod.errored += drawn.errored
    pod.refused += drawn.refused
    pod.prompt_tokens += float(drawn.prompt.sum())
    pod.generated_tokens += float(drawn.generated.sum())
    pod.e2e.observe(drawn.latency)
    pod.ttft.observe(drawn.latency * TTFT_SHARE)
    # A request's inter-token latency: what follows its first token, over its tokens; it
    # contributes one sample per generated token to vLLM's histogram, one to TGI's mean.
    per_token = drawn.latency * (1 - TTFT_SHARE) / drawn.generated
    pod.itl.observe(per_token, drawn.generated)
    pod.time_per_token.observe(per_token)
    pod.queue.observe(drawn.queue)
    pod.generated_per_request.observe(drawn.generated)
    pod.prompt_per_request.observe(drawn.prompt)


def _set_gauges(pod: PodCounters, now: float) -> None:
    """Utilization, running and waiting from the load ``pod`` admitted lately (the model's
    expected load until it has served any time)."""
    if pod.rates is None or pod.profile is None:
        return
    lately = pod.recent.rate(now)
    admitted = pod.rates.offered - pod.rates.refused if lately is None else lately
    pod.utilization = utilization(pod.profile, admitted)
    pod.running = admitted * (pod.rates.mean_latency - pod.rates.mean_wait)
    pod.waiting = admitted * pod.rates.mean_wait
    # TGI counts a request when it starts: the finished ones and those in flight.
    in_flight = round(pod.running + pod.waiting)
    pod.started = max(pod.started, pod.succeeded + pod.failed + in_flight)
