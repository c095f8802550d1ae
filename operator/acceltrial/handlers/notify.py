"""Delivering a trial's notifications (``spec.notifications``) once a tick's status is written:
the events its transition made (engine/notifications.py), each sent to the receivers that want
it (providers/notifications), in order per receiver, by a background thread per receiver.

Delivery never blocks a tick nor changes a decision: a tick only queues. A receiver's thread
tries each event ``ATTEMPTS`` times with doubling waits (a 5xx, a timeout, no connection), gives
up on a refusal (4xx, an unreadable Secret) and goes on to the next event, so a receiver that
answers 500 or hangs delays only its own later events. Each outcome is counted
(``acceltrial_notifications_total{provider,result}``) and logged without the URL. When the
operator stops, :func:`flush` waits a bounded time for what is queued (kopf's cleanup), so a
decision taken just before a SIGTERM is still told.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from acceltrial.api.spec import TrialSpec
from acceltrial.api.spec.common import SecretKeyRef
from acceltrial.api.spec.notifications import Notification
from acceltrial.engine.candidate import TrialRef
from acceltrial.engine.notifications import Transition, events_between, payload, wanted
from acceltrial.handlers import secrets
from acceltrial.handlers.metrics import NOTIFICATIONS
from acceltrial.kube.gateway import Kube
from acceltrial.providers.notifications.port import DeliveryError, Receiver
from acceltrial.providers.notifications.registry import receiver_for

LOG = logging.getLogger(__name__)
ATTEMPTS = 4
BACKOFF_SECONDS = 1.0
"""Wait before the second try; doubled before each next (1, 2, 4 s: a receiver down for a few
seconds still gets the event, one down for good costs its thread about 30 s an event)."""
IDLE_SECONDS = 60.0
"""A receiver's thread ends after this long without an event (a new one starts it again)."""
FLUSH_SECONDS = 20.0
"""How long the operator waits at exit for queued notifications."""


@dataclass(frozen=True)
class Delivery:
    """One event for one receiver."""

    where: str
    """``namespace/trial notification-name``, for logs (never the URL)."""
    kind: str
    """The receiver's kind, for the metrics; ``unknown`` when it could not be built."""
    receiver: Callable[[], Receiver]
    """Builds the receiver (reading its Secret) in the delivery thread, not in the tick."""
    body: Mapping[str, Any]


@dataclass
class Deliveries:
    """The delivery threads, one per receiver (keyed by trial and notification name)."""

    sleep: Callable[[float], None] = time.sleep
    backoff: float = BACKOFF_SECONDS
    idle: float = IDLE_SECONDS
    _queues: dict[str, queue.Queue[Delivery]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _pending: int = 0
    _idle: threading.Condition = field(default_factory=threading.Condition)

    def submit(self, key: str, delivery: Delivery) -> None:
        with self._idle:
            self._pending += 1
        with self._lock:  # put under the lock: a thread leaving idle removes its queue under it
            waiting = self._queues.get(key)
            if waiting is None:
                waiting = self._queues[key] = queue.Queue()
                name = f"notify-{key}"[:60]
                thread = threading.Thread(
                    target=self._serve, args=(key, waiting), name=name, daemon=True
                )
                thread.start()
            waiting.put(delivery)

    def flush(self, timeout: float = FLUSH_SECONDS) -> bool:
        """Wait until every queued delivery is done, at most ``timeout`` seconds; True if so."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)

    def _serve(self, key: str, waiting: queue.Queue[Delivery]) -> None:
        """Deliver ``key``'s events in order; end after ``idle`` seconds without one, so an
        ended trial's receivers hold no thread."""
        while True:
            try:
                delivery = waiting.get(timeout=self.idle)
            except queue.Empty:
                with self._lock:
                    if waiting.empty():
                        del self._queues[key]
                        return
                continue
            try:
                self._deliver(delivery)
            finally:
                with self._idle:
                    self._pending -= 1
                    self._idle.notify_all()

    def _deliver(self, delivery: Delivery) -> None:
        event = delivery.body.get("event")
        for attempt in range(ATTEMPTS):
            try:
                delivery.receiver().deliver(delivery.body)
            except DeliveryError as error:
                last = attempt == ATTEMPTS - 1 or not error.temporary
                if last:
                    result = "failed" if error.temporary else "refused"
                    NOTIFICATIONS.labels(delivery.kind, result).inc()
                    LOG.warning("notification %s (%s) %s: %s", delivery.where, event, result, error)
                    return
                self.sleep(self.backoff * 2**attempt)
            else:
                NOTIFICATIONS.labels(delivery.kind, "delivered").inc()
                LOG.info("notification %s (%s) delivered", delivery.where, event)
                return


DELIVERIES = Deliveries()
"""The operator's deliveries (flushed by the cleanup handler in handlers/startup.py)."""


def notify(
    kube: Kube, trial: TrialRef, spec: TrialSpec, moved: Transition, to: Deliveries = DELIVERIES
) -> int:
    """Queue the events ``moved`` made for the receivers that want them; how many were queued."""
    queued = 0
    for event in events_between(moved.before, moved.after):
        body = payload(event, trial, spec, moved)
        for notification in spec.notifications or []:
            if wanted(notification, event):
                key = f"{trial.uid}/{notification.name}"
                to.submit(key, _delivery(kube, trial, notification, body))
                queued += 1
    return queued


def _delivery(
    kube: Kube, trial: TrialRef, notification: Notification, body: Mapping[str, Any]
) -> Delivery:
    kind = next(k for k in ("webhook", "slack", "sns") if getattr(notification, k) is not None)

    def receiver() -> Receiver:
        return receiver_for(notification, lambda ref: readable_secret(kube, trial.namespace, ref))

    return Delivery(f"{trial.namespace}/{trial.name} {notification.name}", kind, receiver, body)


def readable_secret(kube: Kube, namespace: str, ref: SecretKeyRef) -> str:
    """A notification URL from a Secret that opted in (handlers/secrets.py); DeliveryError
    naming what is missing."""
    try:
        return secrets.readable_secret(kube, namespace, ref.name, ref.key).strip()
    except secrets.SecretProblem as problem:
        raise DeliveryError(str(problem), temporary=problem.temporary) from None
