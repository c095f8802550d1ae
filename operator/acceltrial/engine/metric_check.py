"""Do the criteria's queries answer? Planned before any traffic moves (preflight, for the
baseline) and by ``acceltrial check`` (for both variants), and each answer put in words.

Flagger and Argo Rollouts users meet "no values found" in the middle of a rollout; a query that
cannot be judged is found here instead, with the criterion, the rendered query and what came
back. Pure: the caller runs the planned queries through the metrics port.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from acceltrial.api.spec import AnalysisSpec, Criterion
from acceltrial.engine.analysis import PlannedQuery, Reading
from acceltrial.engine.queries import Variant, VariantTarget, preset_template, render

# What the cost model needs of a variant to price one unit and project it.
_COST_INPUTS = {
    "cost_per_million_tokens": ("token_rate", "accelerator_utilization"),
    "cost_per_thousand_requests": ("request_rate", "accelerator_utilization"),
}


@dataclass(frozen=True)
class Answer:
    """What one planned query gave: a value to judge, or why there is none."""

    query: PlannedQuery
    value: float | None
    said: str

    @property
    def usable(self) -> bool:
        return self.value is not None


def plan_check(
    analysis: AnalysisSpec, targets: Mapping[Variant, VariantTarget], variants: Iterable[Variant]
) -> list[PlannedQuery]:
    """One instant query per criterion and variant (per cost input for cost criteria)."""
    planned = []
    for criterion in analysis.criteria:
        for variant in variants:
            target = targets[variant]
            for name, template in _templates(analysis, criterion, target):
                promql = render(template, target, analysis.interval)
                planned.append(PlannedQuery(name, variant, promql, "instant", False))
    return planned


def _templates(
    analysis: AnalysisSpec, criterion: Criterion, target: VariantTarget
) -> list[tuple[str, str]]:
    if criterion.metric in _COST_INPUTS:
        return [
            (f"{criterion.name} ({metric} for the cost model)",
             preset_template(analysis.preset, metric, target.accelerator))
            for metric in _COST_INPUTS[criterion.metric]
        ]  # fmt: skip
    if criterion.query is not None:
        return [(criterion.name, criterion.query)]
    assert criterion.metric is not None  # the API requires metric or query
    return [
        (criterion.name, preset_template(analysis.preset, criterion.metric, target.accelerator))
    ]


def answer(query: PlannedQuery, reading: Reading | None) -> Answer:
    """The reading of one query, judged as the analysis would: one finite value, or why not."""
    why = _why_unusable(reading)
    if why is not None:
        return Answer(query, None, why)
    assert reading is not None
    return Answer(query, reading.values[0], f"{reading.values[0]:.6g}")


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
    planned: Iterable[PlannedQuery], readings: Mapping[tuple[str, Variant], Reading]
) -> list[Answer]:
    return [answer(q, readings.get((q.criterion, q.variant))) for q in planned]


def unjudgeable(found: Iterable[Answer]) -> list[str]:
    """One sentence per query that could not be judged, naming criterion, variant and query."""
    return [
        f"criterion {a.query.criterion}: the {a.query.variant}'s query gives no usable value, "
        f"{a.said}: {a.query.promql}"
        for a in found
        if not a.usable
    ]
