"""The analysis' requests asked of Prometheus: each rendered to PromQL, its series made a Reading.

It owns what the engine does not know: the preset metrics' PromQL and the label shapes of real
exporters (presets.py), the placeholders of the user's own queries, ``label_replace`` to carry a
value and its request count in one query, and which label splits raw counters into the engine's
parts (a histogram bound, a status class).

Readings asked together are one query: each part's series get its index in the label
``acceltrial_ask`` (``label_replace``) and the parts are joined with ``or`` (the distinct label
keeps every series of every part), then the answer is split by that label. Prometheus evaluates
the same expressions, in one request instead of one each.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from acceltrial.engine.analysis import Reading
from acceltrial.engine.metrics import Measure, MetricRequest, OwnQuery, VariantTarget
from acceltrial.providers.metrics.port import Ask, RequestError
from acceltrial.providers.metrics.prometheus.client import PrometheusClient, Series
from acceltrial.providers.metrics.prometheus.presets import (
    COUNTER_LABELS,
    COUNTER_QUERIES,
    preset_template,
    render,
    utilization_over_window,
)

PART_LABEL = "acceltrial_part"  # tells the value and the request count apart in one query
ASK_LABEL = "acceltrial_ask"  # tells readings asked together apart in one query


class PrometheusReader:
    """A :class:`~acceltrial.providers.metrics.port.MetricsSource` on a Prometheus HTTP API,
    for one trial's ``analysis`` (its preset, and the interval its rates span)."""

    def __init__(self, client: PrometheusClient, preset: str, interval: str) -> None:
        self.client, self.preset, self.interval = client, preset, interval

    def describe(self, request: MetricRequest, target: VariantTarget) -> str:
        return promql(request, target, self.preset, self.interval)

    def read_together(
        self, asks: Sequence[Ask], start: datetime, end: datetime, resolution_seconds: float
    ) -> list[Reading]:
        queries = [self.describe(a.request, a.target) for a in asks]
        if len(asks) == 1:
            series = self._query(queries[0], asks[0].request, start, end, resolution_seconds)
            return [to_reading(series, asks[0].request, asked=queries[0], since=start)]
        answer = self._query(together(queries), asks[0].request, start, end, resolution_seconds)
        parts = split_answer(answer, len(asks))
        return [
            to_reading(part, ask.request, asked=query, since=start)
            for part, ask, query in zip(parts, asks, queries, strict=True)
        ]

    def read(
        self,
        request: MetricRequest,
        target: VariantTarget,
        start: datetime,
        end: datetime,
        resolution_seconds: float,
    ) -> Reading:
        """One request's reading, asked alone."""
        return self.read_together([Ask(request, target)], start, end, resolution_seconds)[0]

    def _query(
        self,
        query: str,
        request: MetricRequest,
        start: datetime,
        end: datetime,
        resolution_seconds: float,
    ) -> list[Series]:
        if request.spans_window:
            return self.client.range(query, start, end, resolution_seconds)
        return self.client.instant(query, end)


def together(queries: Sequence[str]) -> str:
    """One query answering every one of ``queries``, each series labelled with its index."""
    return " or ".join(_labelled(query, ASK_LABEL, str(n)) for n, query in enumerate(queries))


def split_answer(series: Sequence[Series], parts: int) -> list[list[Series]]:
    """The answer of :func:`together` split back by query, the index label taken off."""
    split: list[list[Series]] = [[] for _ in range(parts)]
    for one in series:
        index = one.labels.get(ASK_LABEL, "")
        if index.isdigit() and int(index) < parts:
            labels = {k: v for k, v in one.labels.items() if k != ASK_LABEL}
            split[int(index)].append(Series(labels, one.samples))
    return split


def promql(request: MetricRequest, target: VariantTarget, preset: str, interval: str) -> str:
    """The PromQL of ``request`` for ``target``; RequestError when it cannot be rendered."""
    if request.counters is not None:
        if preset not in COUNTER_QUERIES:
            raise RequestError(f"preset {preset!r} has no raw counters")
        return render(COUNTER_QUERIES[preset][request.counters], target, interval)
    value = render(_template(request.measure, target, preset, request.averaged), target, interval)
    if request.requests is None:
        return value
    count = render(_template(request.requests, target, preset), target, interval)
    return _with_request_count(value, count)


def _template(measure: Measure, target: VariantTarget, preset: str, averaged: bool = False) -> str:
    if isinstance(measure, OwnQuery):
        return measure.text
    if averaged:
        return utilization_over_window(target.accelerator)
    return preset_template(preset, measure.name, target.accelerator)


def _with_request_count(value_query: str, requests_query: str) -> str:
    value = _labelled(value_query, PART_LABEL, "value")
    return f"{value} or {_labelled(requests_query, PART_LABEL, 'requests')}"


def _labelled(query: str, label: str, value: str) -> str:
    return f'label_replace(({query}), "{label}", "{value}", "", "")'


def to_reading(
    series: Sequence[Series],
    request: MetricRequest,
    asked: str = "",
    since: datetime | None = None,
) -> Reading:
    """A query's series as a Reading: values, series count and, if asked, the request count;
    raw counters as parts, one per value of the label that splits them, with the start of
    their range (``since``)."""
    if request.counters is not None:
        split_by = COUNTER_LABELS[request.counters]
        parts = tuple((s.labels.get(split_by, ""), tuple(s.samples)) for s in series)
        began = since.timestamp() if since is not None else None
        return Reading(series=len(series), parts=parts, asked=asked, since=began)
    requests: float | None = None
    if request.requests is not None:
        counted = [s for s in series if s.labels.get(PART_LABEL) == "requests"]
        series = [s for s in series if s.labels.get(PART_LABEL) != "requests"]
        if len(counted) == 1 and counted[0].samples:
            requests = counted[0].samples[-1][1]
    if request.mode == "range":
        values = tuple(v for _, v in series[0].samples) if len(series) == 1 else ()
    else:
        values = tuple(s.samples[-1][1] for s in series if s.samples)
    return Reading(values=values, series=len(series), requests=requests, asked=asked)
