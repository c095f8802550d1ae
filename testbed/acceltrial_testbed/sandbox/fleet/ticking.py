"""Running a simulation step at a steady tick on a background thread, for the fleet."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

LOG = logging.getLogger(__name__)


class Ticking:
    """Calls ``step`` now and then every ``tick_seconds`` until stopped. A step that cannot
    reach the API server (it is going away) is skipped: the fleet keeps its last state."""

    def __init__(self, step: Callable[[], None], name: str) -> None:
        self._step = step
        self._name = name
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, tick_seconds: float) -> None:
        self._step()
        self._thread = threading.Thread(
            target=self._run, args=(tick_seconds,), name=self._name, daemon=True
        )
        self._thread.start()

    def _run(self, tick_seconds: float) -> None:
        while not self._stop.wait(tick_seconds):
            try:
                self._step()
            except OSError as error:
                LOG.debug("%s could not read the cluster: %s", self._name, error)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
