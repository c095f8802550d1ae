"""The cost side of a measurement: which queries feed the cost model, and its inputs from them.

Pure. Every measurement also asks, per variant, for the successful request rate, the generated
token rate and the accelerator utilization (the preset's queries), so ``status.economics`` is kept
current and cost criteria (``cost_per_million_tokens``, ``cost_per_thousand_requests``) can be
judged. What the caller resolved from prices and the pod specs comes in as
:class:`VariantResources`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from acceltrial.api.spec import AnalysisSpec, EconomicsSpec
from acceltrial.engine.analysis import PlannedQuery, Reading
from acceltrial.engine.economics import Comparison, Throughput, VariantInput, compare
from acceltrial.engine.queries import Variant, VariantTarget, preset_template, render

COST_INPUT_PREFIX = "economics:"
"""Planned queries of the cost model and the report are named like this, never like a criterion."""
_INPUTS = ("request_rate", "token_rate", "accelerator_utilization")
OBSERVED_METRICS = (*_INPUTS, "latency_mean", "latency_p50", "latency_p99", "error_ratio")
"""What every measurement records per variant, for the report."""
_VARIANTS: tuple[Variant, ...] = ("baseline", "candidate")


@dataclass(frozen=True)
class VariantResources:
    """What one variant's pods cost and take, as resolved by the caller."""

    price_per_instance_hour: float | None
    price_source: str
    """Where the price comes from, or why it is unknown."""
    accelerators_per_pod: float | None
    accelerators_per_instance: float | None


@dataclass(frozen=True)
class CostFigures:
    """The cost comparison of one measurement and, in words, what kept any figure empty."""

    comparison: Comparison
    missing: str


def plan_cost_inputs(
    analysis: AnalysisSpec, targets: Mapping[Variant, VariantTarget]
) -> list[PlannedQuery]:
    """Instant queries for each variant's request rate, token rate, utilization, latency (mean,
    p50, p99) and error ratio: the cost model's inputs and the report's side-by-side figures."""
    planned = []
    for metric in OBSERVED_METRICS:
        for variant in _VARIANTS:
            target = targets[variant]
            template = preset_template(analysis.preset, metric, target.accelerator)
            promql = render(template, target, analysis.interval)
            planned.append(
                PlannedQuery(f"{COST_INPUT_PREFIX}{metric}", variant, promql, "instant", False)
            )
    return planned


def cost_figures(
    readings: Mapping[tuple[str, Variant], Reading],
    targets: Mapping[Variant, VariantTarget],
    resources: Mapping[Variant, VariantResources],
    economics: EconomicsSpec,
    production_from: Literal["both", "candidate"] = "both",
) -> CostFigures:
    """Both variants' cost figures from this measurement's readings.

    All production traffic is what both variants served, or, during the bake (when the
    baseline's readings come from before it), what the candidate alone serves.
    """
    inputs: dict[Variant, VariantInput] = {}
    gaps: list[str] = []
    for variant in _VARIANTS:
        values = {m: _value(readings.get((COST_INPUT_PREFIX + m, variant))) for m in _INPUTS}
        held = resources[variant]
        inputs[variant] = VariantInput(
            replicas=len(targets[variant].pods),
            price_per_instance_hour=held.price_per_instance_hour,
            accelerators_per_pod=held.accelerators_per_pod,
            accelerators_per_instance=held.accelerators_per_instance,
            observed=Throughput(values["request_rate"], values["token_rate"]),
            utilization=values["accelerator_utilization"],
        )
        gaps += _gaps(variant, held, values)
    production = inputs["candidate"].observed if production_from == "candidate" else None
    comparison = compare(inputs["baseline"], inputs["candidate"], economics, production)
    return CostFigures(comparison, "; ".join(gaps) or "every input was measured")


def observed_values(
    readings: Mapping[tuple[str, Variant], Reading],
) -> dict[Variant, dict[str, float | None]]:
    """Each variant's observed figures (None where not measured)."""
    return {
        variant: {
            m: _value(readings.get((COST_INPUT_PREFIX + m, variant))) for m in OBSERVED_METRICS
        }
        for variant in _VARIANTS
    }


def _value(reading: Reading | None) -> float | None:
    if reading is None or reading.error is not None or reading.series != 1:
        return None
    value = reading.values[0] if reading.values else math.nan
    return value if math.isfinite(value) else None


def _gaps(variant: str, held: VariantResources, values: Mapping[str, float | None]) -> list[str]:
    gaps = []
    if held.price_per_instance_hour is None:
        gaps.append(f"the {variant}'s instance price is unknown ({held.price_source})")
    if held.accelerators_per_pod is None or held.accelerators_per_instance is None:
        gaps.append(f"the {variant}'s accelerators per pod or per instance are unknown")
    if not values["request_rate"] and not values["token_rate"]:
        gaps.append(f"the {variant} served no measured traffic")
    if not values["accelerator_utilization"]:
        gaps.append(f"the {variant}'s accelerator utilization was not measured")
    return gaps
