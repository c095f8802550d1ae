"""A busy machine for the demo tests: a CPU hog on one core, and the load average sampled meanwhile.

The flagship demo used to roll back about once in seven runs when the machine was busy; these
tests run the scenarios under a hog they start themselves, so that a decision which flips with
the machine's load fails here rather than in front of a user.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

SAMPLE_SECONDS = 2.0


@dataclass
class Load:
    """The hog's pinned core and the 1-minute load averages sampled while it ran."""

    core: int
    samples: list[float] = field(default_factory=list)

    def summary(self, since: int = 0) -> str:
        """The hog and the load averages sampled from sample ``since`` on."""
        samples = self.samples[since:]
        if not samples:
            return f"CPU hog on core {self.core}; no load sample taken"
        return (
            f"CPU hog on core {self.core} of {os.cpu_count()}; 1-minute load average over "
            f"{len(samples)} samples: min {min(samples):.2f}, mean "
            f"{statistics.fmean(samples):.2f}, max {max(samples):.2f}"
        )


def one_minute_load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


@contextmanager
def cpu_hog() -> Iterator[Load]:
    """A busy loop pinned to one core for the duration, with the load sampled every 2 s."""
    core = min(os.sched_getaffinity(0))
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    os.sched_setaffinity(hog.pid, {core})
    load = Load(core)
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
        hog.kill()
        hog.wait()
