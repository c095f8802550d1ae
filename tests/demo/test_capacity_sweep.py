"""The capacity sweep against the simulated fleet, over HTTP: the operator's load generator
(providers/quality/load.py) driving the fleet's model server, whose pod answers each request as
its model does at the load the sweep puts on it (fleet/trial_requests.py). The sweep must find
what the profile says one pod carries."""

from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from acceltrial.engine.capacity_sweep import Bounds, Slo, SweepOutcome
from acceltrial.providers.quality.load import LoadShape, sweep
from acceltrial.providers.quality.openai import OpenAiClient
from acceltrial_testbed.sandbox.fleet.exporter import Fleet, FleetSpec
from acceltrial_testbed.sandbox.fleet.language_model import Outputs
from acceltrial_testbed.sandbox.fleet.model import ServingProfile
from acceltrial_testbed.sandbox.fleet.model_server import ModelServers, model_endpoint
from acceltrial_testbed.sandbox.fleet.traffic import ClusterView, Entry

pytestmark = pytest.mark.slow

CANDIDATE_POD = "llama3-inf2-candidate-0"
VIEW = ClusterView(
    route=None,
    services={},
    pods=[{
        "metadata": {"name": CANDIDATE_POD, "labels": {"acceltrial.dev/variant": "candidate"}},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }],
)  # fmt: skip
SHAPE = LoadShape(prompt_tokens=8, generated_tokens=4)
SLO = Slo(error_ratio=0.01)
BOUNDS = Bounds(start=1, max_concurrency=128, stair_seconds=4, max_seconds=60)


def swept(
    profile: ServingProfile, seed: int, slo: Slo = SLO, shape: LoadShape = SHAPE
) -> SweepOutcome:
    """A sweep of one candidate pod with ``profile``, behind Service ``llama3-inf2-candidate``."""
    spec = FleetSpec(
        entry=Entry("ml", route="llama3"), rps=0, prompt_tokens=8, generated_tokens=4,
        profiles={"baseline": profile, "candidate": profile}, seed=seed,
    )  # fmt: skip
    reader: Any = lambda _access, _entry: VIEW  # noqa: E731
    fleet = Fleet("http://unused", spec, reader=reader).start(tick_seconds=0.2)
    servers = ModelServers(
        "http://unused",
        {"baseline": Outputs(), "candidate": Outputs()},
        trial_serving=lambda namespace: fleet if namespace == "ml" else None,
        backing_reader=lambda _namespace, _service: ("candidate", [CANDIDATE_POD]),
    )
    with contextlib.ExitStack() as stack:
        stack.callback(fleet.stop)
        url = stack.enter_context(model_endpoint(servers))
        client = OpenAiClient(f"{url}/ml/llama3-inf2-candidate", timeout=10)
        return sweep(client, shape, slo, BOUNDS)


PROFILES = [
    # Narrow latencies (p99 within 1.4 times p50): a stair's 60 or so requests then tell the
    # rate they finish at within a few percent, so the test is of the sweep, not of noise.
    ServingProfile(p50=0.25, p99=0.35, capacity_rps=16),  # 4 at once: 15.7 requests/s
    ServingProfile(p50=0.4, p99=0.5, capacity_rps=20),  # 8 at once: 19.8 requests/s
    ServingProfile(p50=0.15, p99=0.2, capacity_rps=40),  # 6 at once: 39.7 requests/s
]


def test_the_sweep_finds_what_one_pod_carries_within_a_tenth() -> None:
    """Three profiles swept side by side, each its own pod and server: the best goodput
    within the SLO lands within 10% of the profile's capacity, in under a minute."""
    with ThreadPoolExecutor(len(PROFILES)) as pool:
        runs = list(pool.map(swept, PROFILES, range(len(PROFILES))))
    for profile, run in zip(PROFILES, runs, strict=True):
        best = max((s.goodput for s in run.stairs if s.error_ratio is not None
                    and s.error_ratio <= 0.01), default=0.0)  # fmt: skip
        said = [(s.concurrency, round(s.goodput, 1), s.failed) for s in run.stairs]
        assert best == pytest.approx(profile.capacity_rps, rel=0.1), (run.stopped_because, said)
        assert run.stopped_because in ("errors", "flat", "slo"), run.why
        assert sum(s.seconds for s in run.stairs) / 0.75 < 60


def test_a_time_to_first_token_slo_is_timed_on_streamed_answers_and_stops_the_sweep() -> None:
    """A TTFT limit of 0.3 s on a pod that answers in about 0.4 s, 8 requests at once: its
    first tokens come in about 0.04 s until its batch is full; then requests queue, and the
    queue comes before the first token. The sweep streams its answers and stops on the SLO."""
    streamed = LoadShape(prompt_tokens=8, generated_tokens=8, stream=True)
    ttft = Slo(ttft_p99=0.3, error_ratio=0.01)
    run = swept(PROFILES[1], 5, ttft, streamed)
    said = [(s.concurrency, s.ttft_p99, s.itl_p99) for s in run.stairs]
    assert run.stopped_because == "slo", (run.why, said)
    assert "TTFT p99" in run.why
    first = run.stairs[0]
    assert first.ttft_p99 is not None
    assert first.itl_p99 is not None
    assert first.latency_p99 is not None
    assert first.ttft_p99 < 0.3 * first.latency_p99, "alone, the first token is the prefill"
    assert first.itl_p99 < first.latency_p99 / 4, "the other 7 tokens share the rest"
