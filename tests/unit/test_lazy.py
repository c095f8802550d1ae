"""A snapshot's lazily read objects: read once per instance, and one trial's read never waits
for another's (functools.cached_property on Python 3.11 holds one lock for every instance)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from acceltrial.handlers.lazy import lazy


class Snapshot:
    def __init__(self, name: str, gate: threading.Event | None = None) -> None:
        self.name, self.gate, self.reads = name, gate, 0

    @lazy
    def pods(self) -> str:
        """The pods, read from the API server (here: after a gate opens)."""
        self.reads += 1
        if self.gate is not None:
            self.gate.wait(timeout=10)
        return f"pods of {self.name}"


def test_read_once_per_instance() -> None:
    first, second = Snapshot("a"), Snapshot("b")
    assert (first.pods, first.pods, second.pods) == ("pods of a", "pods of a", "pods of b")
    assert (first.reads, second.reads) == (1, 1)
    assert Snapshot.pods.__doc__ == "The pods, read from the API server (here: after a gate opens)."


def test_one_trials_slow_read_does_not_hold_up_another_trials() -> None:
    gate = threading.Event()
    slow = Snapshot("slow", gate)
    with ThreadPoolExecutor(max_workers=2) as pool:
        waiting = pool.submit(lambda: slow.pods)
        while slow.reads == 0:  # the slow read has begun
            threading.Event().wait(0.01)
        other = pool.submit(lambda: Snapshot("fast").pods)
        assert other.result(timeout=5) == "pods of fast", "waited for the other trial's read"
        gate.set()
        assert waiting.result(timeout=5) == "pods of slow"
