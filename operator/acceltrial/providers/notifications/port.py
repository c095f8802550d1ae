"""The notification port: deliver one event's JSON to one receiver. Receivers are built from
``spec.notifications[]`` by :func:`acceltrial.providers.notifications.registry.receiver_for`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol


class DeliveryError(Exception):
    """The receiver did not take the event; ``temporary`` when asking again may help (a 5xx,
    a timeout, no connection), not for a refusal (4xx) or a bad address."""

    def __init__(self, message: str, temporary: bool = True) -> None:
        super().__init__(message)
        self.temporary = temporary


class Receiver(Protocol):
    """One configured receiver of a trial's events."""

    kind: str
    """``webhook``, ``slack`` or ``sns``: the operator's metrics count deliveries by it."""

    def deliver(self, body: Mapping[str, Any]) -> None:
        """Deliver one event's payload; DeliveryError when it was not taken."""
        ...
