"""How busy the machine was while the demo tests ran: the 1-minute load average, sampled.

The flagship demo used to roll back about once in seven runs when the machine was busy. The demo
tests run four demos at a time, each with its own control plane, Prometheus, fleet and operator,
beside the other pytest worker's trials: on two cores that is a load average several times the
core count, so a decision which flips with the machine's load fails here rather than in front of
a user. (Until the demos ran concurrently a CPU hog on one core made the machine busy; with them
it only took a core the demos need.) Every demo's line says what load it ran under.
"""

from __future__ import annotations

import os
import statistics
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

SAMPLE_SECONDS = 2.0


@dataclass
class Load:
    """The 1-minute load averages sampled while the demos ran."""

    samples: list[float] = field(default_factory=list)

    def summary(self, since: int = 0) -> str:
        """The load averages sampled from sample ``since`` on."""
        samples = self.samples[since:]
        if not samples:
            return "no load sample taken"
        return (
            f"{os.cpu_count()} cores; 1-minute load average over "
            f"{len(samples)} samples: min {min(samples):.2f}, mean "
            f"{statistics.fmean(samples):.2f}, max {max(samples):.2f}"
        )


def one_minute_load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


@contextmanager
def sampled_load() -> Iterator[Load]:
    """The 1-minute load average, sampled every 2 s for the duration."""
    load = Load()
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            load.samples.append(one_minute_load())
            stop.wait(SAMPLE_SECONDS)

    sampler = threading.Thread(target=sample, name="loadavg", daemon=True)
    sampler.start()
    try:
        yield load
    finally:
        stop.set()
        sampler.join()
