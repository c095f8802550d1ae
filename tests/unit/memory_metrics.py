"""A metrics source in memory: the second adapter of the metrics port, for the unit tests.

It answers each request from readings set per measure (a preset metric's name, or an own query's
text) and variant, and remembers what it was asked and over which window. It knows no PromQL:
that a whole measurement runs on it shows the engine asks for metrics in the domain's terms.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from acceltrial.engine.analysis import Reading
from acceltrial.engine.metrics import Measure, MetricRequest, OwnQuery, Variant, VariantTarget
from acceltrial.providers.metrics.port import Ask, MetricsError


def measure_name(measure: Measure) -> str:
    return measure.text if isinstance(measure, OwnQuery) else measure.name


@dataclass(frozen=True)
class Asked:
    request: MetricRequest
    target: VariantTarget
    start: datetime
    end: datetime


@dataclass
class MemorySource:
    """Readings by (measure, variant); a missing one reads as an empty answer (no series)."""

    readings: Mapping[tuple[str, Variant], Reading] = field(default_factory=dict)
    failing: Mapping[str, MetricsError] = field(default_factory=dict)
    """Measures whose reads raise this error."""
    asked: list[Asked] = field(default_factory=list)

    def describe(self, request: MetricRequest, target: VariantTarget) -> str:
        return f"{measure_name(request.measure)} of {target.variant}"

    questions: int = 0
    """How many times it was asked (a batch of reads is one question, as a backend's query)."""

    def read_together(
        self, asks: Sequence[Ask], start: datetime, end: datetime, resolution_seconds: float
    ) -> list[Reading]:
        self.questions += 1
        self.asked += [Asked(a.request, a.target, start, end) for a in asks]
        for ask in asks:  # one question: a failing read fails every reading asked with it
            name = measure_name(ask.request.measure)
            if name in self.failing:
                raise self.failing[name]
        return [self._reading(a.request, a.target) for a in asks]

    def _reading(self, request: MetricRequest, target: VariantTarget) -> Reading:
        found = self.readings.get((measure_name(request.measure), request.variant), Reading())
        return Reading(
            values=found.values,
            series=found.series,
            requests=found.requests,
            parts=found.parts,
            asked=self.describe(request, target),
        )

    def windows(self, name: str) -> dict[Variant, tuple[datetime, datetime]]:
        return {
            a.request.variant: (a.start, a.end)
            for a in self.asked
            if measure_name(a.request.measure) == name
        }
