"""A step begun by a tick counts from when its weight was written: a busy cluster's tick takes
seconds between its observation and its writes, and the step's windows must not hold the
previous share's requests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from acceltrial.api.status import TrialStatus
from acceltrial.engine.ticks import DeployCandidate, SetWeight, TickResult
from acceltrial.handlers.lifecycle import counted_from_the_write


def test_a_step_begun_this_tick_counts_from_its_weight_write() -> None:
    began = datetime.now(UTC) - timedelta(seconds=3)  # the tick's reads took 3 s
    status = TrialStatus(phase="Progressing", step=2, step_started_at=began)
    counted = counted_from_the_write(TickResult(status, (SetWeight(25),)), began)
    started = counted.status.step_started_at
    assert started is not None
    assert started >= began + timedelta(seconds=3)


def test_a_tick_that_began_no_step_keeps_the_clock() -> None:
    began = datetime.now(UTC) - timedelta(seconds=3)
    earlier = began - timedelta(seconds=10)
    running = TrialStatus(phase="Progressing", step=2, step_started_at=earlier)
    # The weight written again (kept against drift) does not restart the step.
    kept = counted_from_the_write(TickResult(running, (SetWeight(25),)), began)
    assert kept.status.step_started_at == earlier
    deployed = TrialStatus(phase="Progressing", step=0, step_started_at=began)
    waiting = counted_from_the_write(TickResult(deployed, (DeployCandidate(),)), began)
    assert waiting.status.step_started_at == began, "no weight written: nothing began"
