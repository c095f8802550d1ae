"""Do the criteria's queries answer? Planned before any traffic moves (preflight, for the
baseline) and by ``acceltrial check`` (for both variants), and each answer put in words.

Flagger and Argo Rollouts users meet "no values found" in the middle of a rollout; a query that
cannot be judged is found here instead, with the criterion, the rendered query and what came
back. Pure: the caller runs the planned requests through the metrics port.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from acceltrial.api.spec import AnalysisSpec, Criterion
from acceltrial.engine.analysis import Reading, measure
from acceltrial.engine.metrics import (
    UTILIZATION_METRIC,
    Measure,
    MetricRequest,
    PresetMetric,
    Variant,
)

# What the cost model needs of a variant to price one unit and project it.
_COST_INPUTS = {
    "cost_per_million_tokens": ("token_rate", UTILIZATION_METRIC),
    "cost_per_thousand_requests": ("request_rate", UTILIZATION_METRIC),
}


@dataclass(frozen=True)
class Answer:
    """What one planned request gave: a value to judge, or why there is none, and the query the
    source ran (for the person reading it)."""

    request: MetricRequest
    value: float | None
    said: str
    asked: str = ""

    @property
    def usable(self) -> bool:
        return self.value is not None


def plan_check(analysis: AnalysisSpec, variants: Iterable[Variant]) -> list[MetricRequest]:
    """One instant read per criterion and variant (per cost input for cost criteria)."""
    return [
        MetricRequest(name, variant, what)
        for criterion in analysis.criteria
        for variant in variants
        for name, what in _measures(criterion)
    ]


def _measures(criterion: Criterion) -> list[tuple[str, Measure]]:
    if criterion.metric in _COST_INPUTS:
        return [
            (f"{criterion.name} ({metric} for the cost model)", PresetMetric(metric))
            for metric in _COST_INPUTS[criterion.metric]
        ]
    return [(criterion.name, measure(criterion))]


def answer(request: MetricRequest, reading: Reading | None) -> Answer:
    """The reading of one request, judged as the analysis would: one finite value, or why not."""
    asked = reading.asked if reading is not None else ""
    why = _why_unusable(reading)
    if why is not None:
        return Answer(request, None, why, asked)
    assert reading is not None
    return Answer(request, reading.values[0], f"{reading.values[0]:.6g}", asked)


def _why_unusable(reading: Reading | None) -> str | None:
    if reading is None:
        return "it was not run"
    if reading.error is not None:
        return f"the query failed: {reading.error}"
    if reading.series == 0 or not reading.values:
        return "it returned nothing (an empty result)"
    if reading.series > 1:
        return f"it returned {reading.series} series where one was expected"
    value = reading.values[0]
    if math.isfinite(value):
        return None
    return (
        "it returned NaN (no traffic in the window?)"
        if math.isnan(value)
        else (f"it returned {value:+}")
    )


def answers(
    planned: Iterable[MetricRequest], readings: Mapping[tuple[str, Variant], Reading]
) -> list[Answer]:
    return [answer(r, readings.get((r.criterion, r.variant))) for r in planned]


def unjudgeable(found: Iterable[Answer]) -> list[str]:
    """One sentence per query that could not be judged, naming criterion, variant and query."""
    return [
        f"criterion {a.request.criterion}: the {a.request.variant}'s query gives no usable "
        f"value, {a.said}: {a.asked}"
        for a in found
        if not a.usable
    ]
