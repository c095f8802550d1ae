"""The capacity sweeps under way in the operator (handlers/capacity_test.py): one per trial, in
the background; the tick that finds one finished takes its outcome; a cancelled one sends no
further request."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from acceltrial.engine.capacity_sweep import SweepOutcome
from acceltrial.handlers.capacity_test import Sweeps


def eventually(check: Callable[[], SweepOutcome | None], timeout: float) -> SweepOutcome:
    deadline = time.monotonic() + timeout
    while (found := check()) is None:
        assert time.monotonic() < deadline, "never finished"
        time.sleep(0.01)
    return found


def test_a_sweep_runs_in_the_background_and_its_outcome_is_taken_once() -> None:
    sweeps, release = Sweeps(), threading.Event()
    started: list[str] = []

    def sweep(stop: threading.Event) -> SweepOutcome:
        started.append("sweep")
        release.wait(5)
        return SweepOutcome(why="done")

    assert sweeps.poll("trial-a", sweep) is None, "started"
    assert sweeps.poll("trial-a", sweep) is None, "still running: not started again"
    release.set()
    outcome = eventually(lambda: sweeps.poll("trial-a", sweep), timeout=5)
    assert outcome.why == "done"
    assert started == ["sweep"]


def test_a_cancelled_sweep_is_told_to_stop_and_a_failing_one_says_why() -> None:
    sweeps, stopped = Sweeps(), threading.Event()

    def sweep(stop: threading.Event) -> SweepOutcome:
        stopped.set() if stop.wait(5) else None
        return SweepOutcome()

    sweeps.poll("trial-b", sweep)
    sweeps.cancel("trial-b")
    assert stopped.wait(5)

    def broken(_stop: threading.Event) -> SweepOutcome:
        raise OSError("no route to host")

    sweeps.poll("trial-c", broken)
    outcome = eventually(lambda: sweeps.poll("trial-c", broken), timeout=5)
    assert outcome.problem == "the sweep stopped: OSError: no route to host"
