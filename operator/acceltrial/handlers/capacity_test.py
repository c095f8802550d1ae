"""The capacity sweep as one trial's world runs it: the candidate's Service reached through the
``ACCELTRIAL_MODEL_URL`` template (as the quality check reaches it), the sweep run by
providers/quality/load.py in the background, since it lasts up to
``spec.capacityTest.maxDuration``, longer than a tick may. One sweep per trial; the tick that
finds it finished takes its outcome. Decides nothing: engine/capacity_gate.py judges it.

An operator restarted mid-sweep starts it again on its next tick (``status.capacityTest`` is
only written once a sweep finished).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from acceltrial.engine.capacity_gate import sweep_settings
from acceltrial.engine.capacity_sweep import SweepOutcome
from acceltrial.handlers.config import config_from_env
from acceltrial.handlers.snapshot import TickSnapshot
from acceltrial.providers.quality.load import LoadShape, sweep
from acceltrial.providers.quality.openai import OpenAiClient
from acceltrial.providers.quality.services import service_port, service_url

TIMEOUT_SECONDS = 60.0
"""Per request: a long answer under a full batch and a queue takes seconds, not minutes."""
PARALLEL_SWEEPS = 4
"""Trials whose sweeps run at once; more wait for a free slot."""


class Sweeps:
    """The sweeps under way, by trial uid."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(PARALLEL_SWEEPS, thread_name_prefix="capacity-sweep")
        self._running: dict[str, tuple[Future[SweepOutcome], threading.Event]] = {}
        self._lock = threading.Lock()

    def poll(
        self, key: str, start: Callable[[threading.Event], SweepOutcome]
    ) -> SweepOutcome | None:
        """The finished sweep of ``key`` (taken: the next poll starts another), or None after
        starting it or while it runs. ``start`` stops early once its event is set."""
        with self._lock:
            running = self._running.get(key)
            if running is None:
                stop = threading.Event()
                self._running[key] = (self._pool.submit(start, stop), stop)
                return None
            future, _ = running
            if not future.done():
                return None
            del self._running[key]
        try:
            return future.result()
        except Exception as error:
            return SweepOutcome(problem=f"the sweep stopped: {type(error).__name__}: {error}")

    def cancel(self, key: str) -> None:
        """Stop ``key``'s sweep, if one runs (the trial ended, moved on or was deleted): its
        clients send no further request."""
        with self._lock:
            running = self._running.pop(key, None)
        if running is not None:
            running[1].set()


SWEEPS = Sweeps()


def candidate_sweep(snapshot: TickSnapshot, pods: int) -> Callable[[threading.Event], SweepOutcome]:
    """The sweep of the candidate's ``pods`` (its Available replicas), to run in the
    background."""
    settings = snapshot.spec.capacity_test
    assert settings is not None  # only swept when the spec asks for it
    service = snapshot.baseline_service
    pods = max(1, pods)
    if service is None:
        missing = f"Service {snapshot.baseline_service_name} not found"
        return lambda _stop: SweepOutcome(problem=missing, pods=pods)
    # The candidate's Service copies the baseline's ports.
    template = config_from_env().model_url
    url = service_url(template, snapshot.candidate_name, snapshot.namespace, service_port(service))
    client = OpenAiClient(url, settings.model, TIMEOUT_SECONDS)
    # Streamed only when the SLO limits the first token or the gaps between tokens.
    streamed = settings.slo.ttft_p99 is not None or settings.slo.itl_p99 is not None
    requests = settings.requests
    shape = LoadShape(requests.prompt_tokens, requests.generated_tokens, streamed)
    slo, bounds = sweep_settings(settings)
    return lambda stop: sweep(client, shape, slo, bounds, pods=pods, stop=stop)
