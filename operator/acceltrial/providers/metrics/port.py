"""The metrics port: what the analysis needs from a metrics source, and how its requests are run.

A source answers :class:`~acceltrial.engine.metrics.MetricRequest` objects for variants over a
window with :class:`~acceltrial.engine.analysis.Reading` objects; how it asks its backend (PromQL
for Prometheus, in ``prometheus/``) is its own business. :func:`collect` runs every request of a
measurement and files each answer, errors included, so the engine judges a failed read as
inconclusive instead of crashing; a temporary failure is asked again.

A measurement's requests are put to the source together, as few times as the windows allow: the
preset's readings of one window are one backend query however many criteria and cost inputs
need them (a measurement's cost is then its windows, not its criteria). A user's own query is
asked apart from the rest, so a query the backend refuses fails only its own criterion.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Protocol

from acceltrial.engine.analysis import MeasurementWindow, Reading
from acceltrial.engine.metrics import MetricRequest, OwnQuery, Variant, VariantTarget


class MetricsError(Exception):
    """A read could not be answered; the message says why, for a person.

    ``temporary`` tells a failure that asking again may cure (no connection, a timeout, 429,
    5xx, a truncated answer) from a refusal it cannot (a rejected query, no permission)."""

    temporary = True


class RequestError(ValueError):
    """A request cannot be put to the source at all for this target (a placeholder it does not
    know, a name that is not safe to put in a query): nothing was asked."""


@dataclass(frozen=True)
class Ask:
    """One request put to a source: what to read, and for whose pods."""

    request: MetricRequest
    target: VariantTarget


class MetricsSource(Protocol):
    """A metrics backend that answers the analysis' requests."""

    def read_together(
        self, asks: Sequence[Ask], start: datetime, end: datetime, resolution_seconds: float
    ) -> list[Reading]:
        """The readings of ``asks``, in their order, all of one kind (each at ``end``, or each
        from ``start`` to ``end`` every ``resolution_seconds``: ``MetricRequest.spans_window``),
        asked of the backend as one question where it can. Raises MetricsError when the backend
        fails (every reading of the question fails with it), RequestError when a request cannot
        be put to it."""
        ...

    def describe(self, request: MetricRequest, target: VariantTarget) -> str:
        """The request as this source asks it alone (the rendered query), for messages to a
        person. Raises RequestError as :meth:`read_together` would."""
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


MAX_ASKS_PER_QUESTION = 32
"""Readings asked of the backend in one question at most: a bound on one query's size."""


@dataclass
class Collection:
    """The readings of one measurement, and how many backend questions they took."""

    readings: dict[tuple[str, Variant], Reading] = field(default_factory=dict)
    queries: int = 0


@dataclass(frozen=True)
class _Pending:
    ask: Ask
    described: str
    filed_under: list[tuple[str, Variant]]


def collect(
    requests: Sequence[MetricRequest],
    source: MetricsSource,
    targets: Mapping[Variant, VariantTarget],
    window: MeasurementWindow,
    retry: Retry | None = None,
) -> Collection:
    """Run every request and file its reading; a temporary failure is asked again. Requests
    that differ only in what they are filed under (a criterion and a cost input reading the
    same p99, one of them also counting its requests) are read once, and readings over the
    same window are asked together (see the module's docstring). Raises RequestError (before
    anything is asked) when a request cannot be put to the source."""
    counting = {
        replace(r, criterion="", requests=None): r for r in requests if r.requests is not None
    }
    distinct: dict[tuple[MetricRequest, str], _Pending] = {}
    for filed in requests:
        # A reading that also counts its requests answers the same reading without them.
        request = counting.get(replace(filed, criterion=""), filed)
        target = targets[request.variant]
        described = source.describe(request, target)
        key = (replace(request, criterion=""), described)
        if key not in distinct:
            distinct[key] = _Pending(Ask(request, target), described, [])
        distinct[key].filed_under.append((filed.criterion, filed.variant))
    collection = Collection()
    for (start, end), question in _questions(distinct.values(), window):
        span = MeasurementWindow(start, end, window.resolution_seconds)
        readings = _ask(question, source, span, retry or Retry())
        collection.queries += 1
        for pending, reading in zip(question, readings, strict=True):
            for filed_under in pending.filed_under:
                collection.readings[filed_under] = reading
    for earlier in window.baseline_earlier:
        _reach_back(collection, requests, source, targets, window.baseline_at(earlier), retry=retry)
    return collection


def _reach_back(
    collection: Collection,
    requests: Sequence[MetricRequest],
    source: MetricsSource,
    targets: Mapping[Variant, VariantTarget],
    earlier: MeasurementWindow,
    *,
    retry: Retry | None,
) -> None:
    """Ask the baseline's empty readings again at an earlier end; keep what now has data."""
    empty = {
        key
        for key, reading in collection.readings.items()
        if key[1] == "baseline" and reading.error is None and not reading.values
    }
    again = [r for r in requests if (r.criterion, r.variant) in empty]
    if not again:
        return
    found = collect(again, source, targets, earlier, retry)
    collection.queries += found.queries
    collection.readings.update({k: r for k, r in found.readings.items() if r.values})


def _questions(
    pending: Iterable[_Pending], window: MeasurementWindow
) -> list[tuple[tuple[datetime, datetime], list[_Pending]]]:
    """The pending readings grouped into backend questions: one kind (instant or range), one
    window, one family (the preset's metrics, or one own query), at most
    ``MAX_ASKS_PER_QUESTION`` each."""
    grouped: dict[tuple[bool, tuple[datetime, datetime], Hashable], list[_Pending]] = {}
    for one in pending:
        request = one.ask.request
        key = (request.spans_window, window.for_variant(request.variant), _family(request))
        grouped.setdefault(key, []).append(one)
    return [
        (span, group[i : i + MAX_ASKS_PER_QUESTION])
        for (_, span, _), group in grouped.items()
        for i in range(0, len(group), MAX_ASKS_PER_QUESTION)
    ]


def _family(request: MetricRequest) -> Hashable:
    """What a request may be asked with: a user's own query only with its other variant."""
    own = [m for m in (request.measure, request.requests) if isinstance(m, OwnQuery)]
    return ("own", request.measure, request.requests) if own else "preset"


def _ask(
    question: Sequence[_Pending],
    source: MetricsSource,
    span: MeasurementWindow,
    retry: Retry,
) -> list[Reading]:
    """One question's readings over ``span``, asked again after a temporary failure; a failure
    that stays is every reading's error."""
    asks = [p.ask for p in question]
    delays = retry.delays()
    for asked in range(1, len(delays) + 2):
        try:
            return source.read_together(asks, span.start, span.end, span.resolution_seconds)
        except MetricsError as error:
            if not error.temporary or asked > len(delays):
                kind = "temporary" if error.temporary else "permanent"
                tries = f" (asked {asked} times)" if asked > 1 else ""
                said = f"{error} [{kind}]{tries}"
                return [Reading(error=said, asked=p.described) for p in question]
            retry.sleep(delays[asked - 1])
    raise AssertionError("unreachable: the last attempt returns")
