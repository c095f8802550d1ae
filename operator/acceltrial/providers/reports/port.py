"""The reports port: load a trial's last report and save the new one."""

from __future__ import annotations

from typing import Protocol

from acceltrial.api.report import Report
from acceltrial.engine.candidate import TrialRef


class ReportChanged(Exception):
    """The stored report changed since this process loaded it (another writer): load it again
    and redo the update."""


class ReportStore(Protocol):
    """Somewhere a trial's report is kept between ticks and read by people."""

    def load(self, trial: TrialRef) -> Report | None:
        """The last saved report, or None (none yet, or unreadable)."""
        ...

    def save(self, trial: TrialRef, report: Report) -> None:
        """Keep ``report`` as the trial's current one; :class:`ReportChanged` when the stored
        one is no longer the one loaded."""
        ...
