"""The operator's own load generator for the capacity sweep: closed-loop clients of a variant's
OpenAI-compatible API, one stair at a time (engine/capacity_sweep.py plans the stairs).

Each stair starts ``concurrency`` clients together; each sends its next completion request as
soon as the last one is answered, until the stair's time is up. The first quarter of the stair
is warm-up (every client starts at once, so the first answers come together): only requests
that begin in the rest count, each followed to its answer. The goodput is the share of them
that succeeded times the rate they began at. The
requests are synthetic, shaped like production's: a prompt of about ``prompt_tokens`` tokens and
``max_tokens`` generated (``ignore_eos``, as vLLM's own benchmark asks, so every answer is as
long as production's mean). When the SLO limits time to first token or inter-token latency,
answers are streamed (``stream: true``, as production clients read them) and each request's
first token and mean gap between the others are timed.

Why the operator's own client and not a Job: the sweep is a few dozen concurrent requests at
most for one LLM pod; it needs no image, no extra RBAC and no log parsing, and it reaches the
variant's Service the way the quality check does (``ACCELTRIAL_MODEL_URL``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from acceltrial.engine.capacity_sweep import Bounds, Slo, Stair, SweepOutcome, next_stair
from acceltrial.providers.quality.openai import AnswerError, Generated, OpenAiClient, Unreachable

WARM_UP_SHARE = 0.25
"""Share of a stair before requests count."""
PROMPT_WORD = "hello "
"""A word the usual tokenizers read as one token: a prompt of N tokens is N of them."""


@dataclass(frozen=True)
class LoadShape:
    """The requests the sweep sends: mean prompt and generated tokens."""

    prompt_tokens: int
    generated_tokens: int
    stream: bool = False
    """Streamed answers (``stream: true``), to time the first token and the gaps between the
    others: asked when the SLO limits them."""

    @property
    def prompt(self) -> str:
        return (PROMPT_WORD * max(1, self.prompt_tokens)).strip()


@dataclass
class _Finished:
    """Requests that finished in a stair's measured span."""

    latencies: list[float] = field(default_factory=list)
    first_tokens: list[float] = field(default_factory=list)
    token_gaps: list[float] = field(default_factory=list)
    failed: int = 0
    tokens: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, seconds: float, answer: Generated) -> None:
        self.latencies.append(seconds)
        self.tokens += answer.tokens
        if answer.first_token_seconds is not None:
            self.first_tokens.append(answer.first_token_seconds)
        if answer.token_gap_seconds is not None:
            self.token_gaps.append(answer.token_gap_seconds)


def run_stair(
    client: OpenAiClient,
    shape: LoadShape,
    concurrency: int,
    seconds: float,
    *,
    clock: Callable[[], float] = time.monotonic,
    wall: Callable[[], float] = time.time,
    stop: threading.Event | None = None,
) -> Stair:
    """``concurrency`` closed-loop clients for ``seconds``; the stair as measured."""
    start, began = clock(), wall() + seconds * WARM_UP_SHARE
    counted_from, end = start + seconds * WARM_UP_SHARE, start + seconds
    finished = _Finished()

    def one_client() -> None:
        while clock() < end and not (stop is not None and stop.is_set()):
            sent = clock()
            try:
                answer = client.generate(shape.prompt, shape.generated_tokens, shape.stream)
            except AnswerError:
                answer = None
            done = clock()
            # Counted by when it began: a request still running when the stair ends is a slow
            # one, and leaving it out would make the stair look faster than it was.
            if not counted_from <= sent < end:
                continue
            with finished.lock:
                if answer is not None:
                    finished.add(done - sent, answer)
                else:
                    finished.failed += 1

    clients = [threading.Thread(target=one_client, daemon=True, name=f"load-{i}")
               for i in range(concurrency)]  # fmt: skip
    for thread in clients:
        thread.start()
    for thread in clients:
        thread.join()
    return _stair(concurrency, end - counted_from, finished, began)


def _stair(concurrency: int, seconds: float, finished: _Finished, began: float) -> Stair:
    latencies = np.asarray(finished.latencies, dtype=float)
    p50 = p99 = None
    if latencies.size:
        p50, p99 = (float(v) for v in np.quantile(latencies, [0.5, 0.99]))
    # The rate requests began in the measured span: what the server was really asked, however
    # long the clients took between requests (on a busy machine the concurrency over the mean
    # latency, Little's law, read 31 requests/s from a pod that serves 20).
    count = latencies.size + finished.failed
    throughput = count / seconds if count and seconds > 0 else None
    return Stair(
        concurrency=concurrency,
        seconds=seconds,
        succeeded=int(latencies.size),
        failed=finished.failed,
        generated_tokens=finished.tokens,
        latency_p50=p50,
        latency_p99=p99,
        ttft_p99=_p99(finished.first_tokens),
        itl_p99=_p99(finished.token_gaps),
        began=began,
        throughput=throughput,
    )


def _p99(values: list[float]) -> float | None:
    """The 99th percentile (a request's inter-token latency is its mean gap: the p99 is over
    requests, not over every gap as vLLM's histogram counts them)."""
    return float(np.quantile(np.asarray(values, dtype=float), 0.99)) if values else None


def sweep(
    client: OpenAiClient,
    shape: LoadShape,
    slo: Slo,
    bounds: Bounds,
    *,
    pods: int = 1,
    clock: Callable[[], float] = time.monotonic,
    stop: threading.Event | None = None,
) -> SweepOutcome:
    """Stairs as engine/capacity_sweep.py plans them, until it says stop; a problem instead
    when the first request cannot reach the variant at all (asked alone first, as the quality
    check does, so an unreachable Service costs one request, not a stair)."""
    began = clock()
    try:
        client.generate(shape.prompt, 1)
    except Unreachable as error:
        return SweepOutcome(problem=str(error), pods=pods)
    except AnswerError:
        pass  # a failing server is what the stairs measure
    stairs: list[Stair] = []
    while True:
        planned = next_stair(stairs, slo, bounds, clock() - began)
        if stop is not None and stop.is_set():
            return SweepOutcome(tuple(stairs), "maxDuration", "stopped", pods, clock() - began,
                                problem="the sweep was stopped")  # fmt: skip
        if planned.concurrency is None:
            assert planned.stopped_because is not None  # a plan without a stair says why
            return SweepOutcome(
                tuple(stairs), planned.stopped_because, planned.why, pods, clock() - began
            )
        stairs.append(
            run_stair(
                client, shape, planned.concurrency, bounds.stair_seconds, clock=clock, stop=stop
            )
        )
