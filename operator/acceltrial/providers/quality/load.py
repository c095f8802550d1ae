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
from http.client import HTTPException

import numpy as np

from acceltrial.engine.capacity_sweep import Bounds, Slo, Stair, SweepOutcome, next_stair
from acceltrial.providers.quality.openai import AnswerError, Generated, OpenAiClient, Unreachable

WARM_UP_SHARE = 0.25
"""Share of a stair before requests may count."""
WARM_UP_REQUESTS = 1
"""Requests every client has had answered before the stair's requests count. Every client
starts at once onto an empty queue; until the queue has filled, requests are answered faster
than the server can keep up with, and a pod of 20 requests/s read 24 to 33."""
MIN_CYCLES = 3
"""A stair's measured span holds at least this many mean latencies: it lasts longer than
``stairDuration`` when its requests are slow (within the sweep's bound)."""
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
    answered: list[float] = field(default_factory=list)
    """The latency of every answer, counted or not (how long the stair must last)."""
    cycles: list[float] = field(default_factory=list)
    """Each request's latency plus the time its client took before sending it (all requests,
    failed ones too)."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, seconds: float, answer: Generated) -> None:
        self.latencies.append(seconds)
        self.tokens += answer.tokens
        if answer.first_token_seconds is not None:
            self.first_tokens.append(answer.first_token_seconds)
        if answer.token_gap_seconds is not None:
            self.token_gaps.append(answer.token_gap_seconds)


@dataclass
class _Warming:
    """When a stair's requests start to count: once every client has had
    :data:`WARM_UP_REQUESTS` answered, and not before its warm-up share."""

    earliest: float
    answered: list[int]
    since: float | None = None

    def note(self, client: int, now: float) -> None:
        """Client ``client`` had one more request answered at ``now``."""
        self.answered[client] += 1
        ready = min(self.answered) >= WARM_UP_REQUESTS and now >= self.earliest
        if self.since is None and ready:
            self.since = now


def run_stair(
    client: OpenAiClient,
    shape: LoadShape,
    concurrency: int,
    seconds: float,
    *,
    longest: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    wall: Callable[[], float] = time.time,
    stop: threading.Event | None = None,
) -> Stair:
    """``concurrency`` closed-loop clients; the stair as measured: the requests that began once
    its queue had filled (:class:`_Warming`), over the rest of ``seconds`` or longer while that
    span holds fewer than :data:`MIN_CYCLES` mean latencies (``longest`` in all, at most)."""
    start, started_wall = clock(), wall()
    cap = start + max(seconds, longest if longest is not None else seconds)
    warming = _Warming(start + seconds * WARM_UP_SHARE, [0] * concurrency)
    finished = _Finished()

    def end() -> float:
        with finished.lock:
            since, answered = warming.since, finished.answered
            mean = sum(answered) / len(answered) if answered else 0.0
        if since is None:
            return cap
        measured = max(seconds * (1 - WARM_UP_SHARE), MIN_CYCLES * mean)
        return min(cap, since + measured)

    def one_client(index: int) -> None:
        done = start
        while clock() < end() and not (stop is not None and stop.is_set()):
            sent = clock()
            gap = sent - done
            with finished.lock:
                counted = warming.since is not None and sent >= warming.since
            try:
                answer = client.generate(shape.prompt, shape.generated_tokens, shape.stream)
            except (AnswerError, OSError, HTTPException):
                answer = None  # a connection reset mid-answer under load is a failed request
            done = clock()
            with finished.lock:
                finished.answered.append(done - sent)
                warming.note(index, done)
                # Counted by when it began: a request still running when the stair ends is a
                # slow one, and leaving it out would make the stair look faster than it was.
                if not counted:
                    continue
                finished.cycles.append(gap + done - sent)
                if answer is not None:
                    finished.add(done - sent, answer)
                else:
                    finished.failed += 1

    clients = [threading.Thread(target=one_client, args=(i,), daemon=True, name=f"load-{i}")
               for i in range(concurrency)]  # fmt: skip
    for thread in clients:
        thread.start()
    for thread in clients:
        thread.join()
    since = warming.since if warming.since is not None else clock()
    return _stair(concurrency, max(0.0, end() - since), finished, started_wall + since - start)


def _stair(concurrency: int, seconds: float, finished: _Finished, began: float) -> Stair:
    latencies = np.asarray(finished.latencies, dtype=float)
    p50 = p99 = None
    if latencies.size:
        p50, p99 = (float(v) for v in np.quantile(latencies, [0.5, 0.99]))
    # The interactive response time law: N closed-loop clients, each taking R (the latency) plus
    # Z (its own time between requests) per request, ask X = N / (R + Z). Z is measured: on a
    # busy machine the clients pause, and N / R (Little's law) read 31 requests/s from a pod
    # that serves 20. Counting the requests that began in the span instead depends on where
    # the span cuts the clients' waves: 19 for a pod of 16 with 64 clients of 3.4 s each in a
    # 3.75 s span.
    cycles = finished.cycles
    throughput = concurrency / (sum(cycles) / len(cycles)) if cycles and sum(cycles) > 0 else None
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
                client,
                shape,
                planned.concurrency,
                bounds.stair_seconds,
                longest=bounds.max_seconds - (clock() - began),
                clock=clock,
                stop=stop,
            )
        )
