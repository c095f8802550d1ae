"""The metrics port: what the analysis needs from a metrics backend, and how a plan is run on it.

A backend answers instant and range queries with series; :func:`collect` runs an analysis plan
against any backend and turns each answer into the engine's :class:`Reading`, errors included, so
the engine can judge a failed query as inconclusive instead of crashing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from acceltrial.engine.analysis import PART_LABEL, MeasurementWindow, PlannedQuery, Reading
from acceltrial.engine.queries import Variant


@dataclass(frozen=True)
class Series:
    """One time series of a query result: its labels and ``(timestamp, value)`` samples."""

    labels: Mapping[str, str]
    samples: tuple[tuple[float, float], ...]


class MetricsError(Exception):
    """A query could not be answered; the message says why, for a person.

    ``temporary`` tells a failure that asking again may cure (no connection, a timeout, 429,
    5xx, a truncated answer) from a refusal it cannot (a rejected query, no permission)."""

    temporary = True


class MetricsSource(Protocol):
    """A metrics backend that answers PromQL."""

    def instant(self, query: str, at: datetime) -> list[Series]:
        """The value of ``query`` at ``at``: one sample per series."""
        ...

    def range(
        self, query: str, start: datetime, end: datetime, step_seconds: float
    ) -> list[Series]:
        """The values of ``query`` from ``start`` to ``end`` every ``step_seconds``."""
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
    """The readings of one measurement, and how many queries it took."""

    readings: dict[tuple[str, Variant], Reading] = field(default_factory=dict)
    queries: int = 0


def collect(
    planned: Sequence[PlannedQuery],
    source: MetricsSource,
    window: MeasurementWindow,
    retry: Retry | None = None,
) -> Collection:
    """Run every planned query and keep its reading; a temporary failure is asked again."""
    collection = Collection()
    for query in planned:
        reading, _ = _ask(query, source, window, retry or Retry())
        collection.queries += 1
        collection.readings[(query.criterion, query.variant)] = reading
    return collection


def _ask(
    query: PlannedQuery, source: MetricsSource, window: MeasurementWindow, retry: Retry
) -> tuple[Reading, int]:
    """One query's reading and how many times it was asked."""
    start, end = window.for_variant(query.variant)
    delays = retry.delays()
    for asked in range(1, len(delays) + 2):
        try:
            if query.mode == "range":
                series = source.range(query.promql, start, end, window.resolution_seconds)
            else:
                series = source.instant(query.promql, end)
        except MetricsError as error:
            if not error.temporary or asked > len(delays):
                kind = "temporary" if error.temporary else "permanent"
                tries = f" (asked {asked} times)" if asked > 1 else ""
                return Reading(error=f"{error} [{kind}]{tries}"), asked
            retry.sleep(delays[asked - 1])
        else:
            return to_reading(series, query), asked
    raise AssertionError("unreachable: the last attempt returns")


def to_reading(series: Sequence[Series], query: PlannedQuery) -> Reading:
    """A query's series as a Reading: values, series count and, if asked, the request count."""
    if query.split_by is not None:
        parts = tuple((s.labels.get(query.split_by, ""), tuple(s.samples)) for s in series)
        return Reading(series=len(series), parts=parts)
    requests: float | None = None
    if query.with_requests:
        counted = [s for s in series if s.labels.get(PART_LABEL) == "requests"]
        series = [s for s in series if s.labels.get(PART_LABEL) != "requests"]
        if len(counted) == 1 and counted[0].samples:
            requests = counted[0].samples[-1][1]
    if query.mode == "range":
        values = tuple(v for _, v in series[0].samples) if len(series) == 1 else ()
    else:
        values = tuple(s.samples[-1][1] for s in series if s.samples)
    return Reading(values=values, series=len(series), requests=requests)
