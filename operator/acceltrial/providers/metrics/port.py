"""The metrics port: what the analysis needs from a metrics source, and how its requests are run.

A source answers one :class:`~acceltrial.engine.metrics.MetricRequest` for one variant over a
window with a :class:`~acceltrial.engine.analysis.Reading`; how it asks its backend (PromQL for
Prometheus, in ``prometheus/``) is its own business. :func:`collect` runs every request of a
measurement and files each answer, errors included, so the engine judges a failed read as
inconclusive instead of crashing; a temporary failure is asked again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Protocol

from acceltrial.engine.analysis import MeasurementWindow, Reading
from acceltrial.engine.metrics import MetricRequest, Variant, VariantTarget


class MetricsError(Exception):
    """A read could not be answered; the message says why, for a person.

    ``temporary`` tells a failure that asking again may cure (no connection, a timeout, 429,
    5xx, a truncated answer) from a refusal it cannot (a rejected query, no permission)."""

    temporary = True


class RequestError(ValueError):
    """A request cannot be put to the source at all for this target (a placeholder it does not
    know, a name that is not safe to put in a query): nothing was asked."""


class MetricsSource(Protocol):
    """A metrics backend that answers the analysis' requests."""

    def read(
        self,
        request: MetricRequest,
        target: VariantTarget,
        start: datetime,
        end: datetime,
        resolution_seconds: float,
    ) -> Reading:
        """The reading of ``request`` for ``target``: at ``end`` (instant), or from ``start``
        to ``end`` every ``resolution_seconds`` (range, counters). Raises MetricsError when the
        backend fails, RequestError when the request cannot be put to it."""
        ...

    def describe(self, request: MetricRequest, target: VariantTarget) -> str:
        """The request as this source asks it (the rendered query), for messages to a person.
        Raises RequestError as :meth:`read` would."""
        ...


@dataclass(frozen=True)
class Retry:
    """How a query that failed for a temporary reason is asked again within one measurement:
    ``attempts`` in all, waiting ``first_delay`` seconds, doubled each time. What still fails
    becomes an errored reading, which counts toward ``consecutiveErrorLimit``."""

    attempts: int = 3
    first_delay: float = 0.25
    sleep: Callable[[float], None] = time.sleep

    def delays(self) -> list[float]:
        return [self.first_delay * 2**n for n in range(max(0, self.attempts - 1))]


NO_RETRY = Retry(attempts=1)


@dataclass
class Collection:
    """The readings of one measurement, and how many reads it took."""

    readings: dict[tuple[str, Variant], Reading] = field(default_factory=dict)
    queries: int = 0


def collect(
    requests: Sequence[MetricRequest],
    source: MetricsSource,
    targets: Mapping[Variant, VariantTarget],
    window: MeasurementWindow,
    retry: Retry | None = None,
) -> Collection:
    """Run every request and file its reading; a temporary failure is asked again. Requests
    that differ only in what they are filed under (a criterion and a cost input reading the
    same p99) are asked once. Raises RequestError (before anything is asked) when a request
    cannot be put to the source."""
    asked_as = [source.describe(r, targets[r.variant]) for r in requests]
    collection = Collection()
    answered: dict[tuple[MetricRequest, str], Reading] = {}
    for request, described in zip(requests, asked_as, strict=True):
        same = (replace(request, criterion=""), described)
        if same not in answered:
            target = targets[request.variant]
            answered[same] = _ask(
                request, source, target, window, retry or Retry(), asked_as=described
            )
            collection.queries += 1
        collection.readings[(request.criterion, request.variant)] = answered[same]
    return collection


def _ask(
    request: MetricRequest,
    source: MetricsSource,
    target: VariantTarget,
    window: MeasurementWindow,
    retry: Retry,
    *,
    asked_as: str,
) -> Reading:
    """One request's reading, asked again after a temporary failure."""
    start, end = window.for_variant(request.variant)
    delays = retry.delays()
    for asked in range(1, len(delays) + 2):
        try:
            return source.read(request, target, start, end, window.resolution_seconds)
        except MetricsError as error:
            if not error.temporary or asked > len(delays):
                kind = "temporary" if error.temporary else "permanent"
                tries = f" (asked {asked} times)" if asked > 1 else ""
                return Reading(error=f"{error} [{kind}]{tries}", asked=asked_as)
            retry.sleep(delays[asked - 1])
    raise AssertionError("unreachable: the last attempt returns")
