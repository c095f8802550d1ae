"""The cost side of a measurement: which readings feed the cost model, its inputs from them, and
whether the window they come from is sound enough to judge cost on.

Pure. Every measurement also asks, per variant, for the successful request rate, the generated
token rate and the accelerator utilization averaged over the same window (the preset's metrics),
so ``status.economics`` is kept current and cost criteria (``cost_per_million_tokens``,
``cost_per_thousand_requests``) can be judged. What the caller resolved from prices and the pod
specs comes in as :class:`VariantResources`.

A projection rounds replicas up, so a few percent of throughput read wrong can move a variant by a
whole replica and its cost by a third. Cost is therefore judged only on sound windows
(:func:`window_problem`): one that begins within an ``analysis.interval`` of a weight change (its
first scrapes may predate the change taking effect), or holds fewer scrapes of the request counter
than the criterion's ``minSamples`` (default 2, what a rate needs) or fewer requests than its
``minRequests``, makes the criterion Inconclusive, never Fail. During the bake the baseline serves
nothing; relative cost criteria then compare the candidate with the median of the baseline's
projected cost over the sound step measurements (:class:`BaselineCostFromSteps`, kept in
``status.economics``), not with a baseline re-measured in an older window.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from acceltrial.api.spec import AnalysisSpec, Criterion, EconomicsSpec
from acceltrial.api.status import BaselineCostFromSteps, EconomicsStatus
from acceltrial.engine.analysis import Judgement, Reading, judge_cost
from acceltrial.engine.economics import (
    Comparison,
    Throughput,
    VariantCost,
    VariantInput,
    compare,
    cost_criterion_values,
    to_status,
)
from acceltrial.engine.evidence import MEAN_NEED
from acceltrial.engine.metrics import (
    COST_METRICS,
    REQUESTS_METRIC,
    SCRAPES_METRIC,
    UTILIZATION_METRIC,
    MetricRequest,
    PresetMetric,
    Variant,
    VariantTarget,
    offers,
)

COST_INPUT_PREFIX = "economics:"
"""Readings of the cost model and the report are filed like this, never like a criterion."""
_INPUTS = ("request_rate", "token_rate", UTILIZATION_METRIC)
OBSERVED_METRICS = (*_INPUTS, "latency_mean", "latency_p50", "latency_p99", "error_ratio")
"""What every measurement records per variant, for the report."""
_EVIDENCE = (SCRAPES_METRIC, REQUESTS_METRIC)
"""How much each variant's window holds: scrapes of its request counter, requests served."""
MIN_SCRAPES = 2
"""Scrapes a cost criterion needs per variant unless it sets minSamples: a rate needs two."""
BASELINE_FIGURES_KEPT = 32
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
class CostWindow:
    """The span a measurement's cost inputs cover, and the weight change it must not straddle."""

    end: datetime
    """When the measurement is taken; every rate covers the ``seconds`` before it."""
    seconds: float
    """The rate window: ``analysis.interval``."""
    weight: int
    weight_set_at: datetime | None
    """When the current weight was set (``status.stepStartedAt``), if known."""
    baking: bool = False
    """At 100% after promotion: the baseline serves nothing."""

    @property
    def start(self) -> datetime:
        return self.end - timedelta(seconds=self.seconds)


@dataclass(frozen=True)
class CostFigures:
    """The cost comparison of one measurement and, in words, what kept any figure empty."""

    comparison: Comparison
    missing: str


def plan_cost_inputs(analysis: AnalysisSpec) -> list[MetricRequest]:
    """Instant reads of each variant's request rate, token rate, utilization (averaged over the
    window, as the rates are), latency (mean, p50, p99) and error ratio (the cost model's inputs
    and the report's side-by-side figures), and of the scrapes and requests its window holds
    (whether the figures can be judged). A preset without server metrics (custom) reads only
    utilization: the other figures stay unknown."""
    return [
        MetricRequest(
            f"{COST_INPUT_PREFIX}{metric}",
            variant,
            PresetMetric(metric),
            averaged=metric == UTILIZATION_METRIC,
        )
        for metric in (*OBSERVED_METRICS, *_EVIDENCE)
        if offers(analysis.preset, metric)
        for variant in _VARIANTS
    ]


def cost_figures(
    readings: Mapping[tuple[str, Variant], Reading],
    targets: Mapping[Variant, VariantTarget],
    resources: Mapping[Variant, VariantResources],
    economics: EconomicsSpec,
    production_from: Literal["both", "candidate", "baseline"] = "both",
    *,
    measured: Mapping[Variant, Throughput] | None = None,
) -> CostFigures:
    """Both variants' cost figures from this measurement's readings.

    All production traffic is what both variants served, or, during the bake (when the
    baseline's readings come from before it), what the candidate alone serves, or, while
    requests are only mirrored to the candidate, what the baseline alone serves.
    """
    inputs: dict[Variant, VariantInput] = {}
    gaps: list[str] = []
    for variant in _VARIANTS:
        values = {m: _value(readings.get((COST_INPUT_PREFIX + m, variant))) for m in _INPUTS}
        held = resources[variant]
        inputs[variant] = VariantInput(
            # Pods that served the traffic, for both variants alike: a pod still starting or
            # already terminating carries none, so counting it would halve the capacity.
            replicas=targets[variant].replicas,
            price_per_instance_hour=held.price_per_instance_hour,
            accelerators_per_pod=held.accelerators_per_pod,
            accelerators_per_instance=held.accelerators_per_instance,
            observed=Throughput(values["request_rate"], values["token_rate"]),
            utilization=values["accelerator_utilization"],
            measured_capacity=(measured or {}).get(variant),
        )
        gaps += _gaps(variant, held, values)
    production = None if production_from == "both" else inputs[production_from].observed
    comparison = compare(inputs["baseline"], inputs["candidate"], economics, production)
    return CostFigures(comparison, "; ".join(gaps) or "every input was measured")


def window_problem(
    readings: Mapping[tuple[str, Variant], Reading],
    window: CostWindow,
    variants: Sequence[Variant],
    min_scrapes: int = MIN_SCRAPES,
    min_requests: float | None = None,
) -> str | None:
    """Why this window is no sound evidence of the ``variants``' cost, or None when it is."""
    if window.weight_set_at is not None:
        settled = window.weight_set_at + timedelta(seconds=window.seconds)
        if window.start < settled:
            after = (window.start - window.weight_set_at).total_seconds()
            return (
                f"it begins {after:.1f}s after the weight was set to {window.weight}%, less than "
                f"one analysis.interval ({window.seconds:g}s), so it may hold scrapes from before "
                "the change"
            )
    for variant in variants:
        scrapes = _evidence(readings, SCRAPES_METRIC, variant)
        if scrapes is None or scrapes < min_scrapes:
            held = "no scrapes" if scrapes is None else f"{scrapes:.0f} scrape(s)"
            return (
                f"the {variant}'s window holds {held} of its request counter, fewer than the "
                f"{min_scrapes} the criterion needs (minSamples)"
            )
        requests = _evidence(readings, REQUESTS_METRIC, variant)
        if min_requests is not None and (requests is None or requests < min_requests):
            served = "an unknown number of" if requests is None else f"{requests:.0f}"
            return (
                f"the {variant} served {served} requests in the window, fewer than "
                f"minRequests {min_requests:g}"
            )
    return None


def requests_served(
    readings: Mapping[tuple[str, Variant], Reading], variant: Variant
) -> float | None:
    """The requests ``variant`` served in the window, as the cost inputs counted them."""
    served = _evidence(readings, REQUESTS_METRIC, variant)
    return None if served is None else max(0.0, served)


def _evidence(
    readings: Mapping[tuple[str, Variant], Reading], metric: str, variant: Variant
) -> float | None:
    return _value(readings.get((COST_INPUT_PREFIX + metric, variant)))


def judge_cost_criterion(
    criterion: Criterion,
    readings: Mapping[tuple[str, Variant], Reading],
    costs: CostFigures,
    window: CostWindow,
    from_steps: BaselineCostFromSteps | None,
) -> Judgement:
    """Judge a cost criterion: Inconclusive on an unsound window (with why), and during the bake
    a relative one against the baseline's median cost from the steps."""
    assert criterion.metric in COST_METRICS
    against_steps = window.baking and criterion.relative is not None
    variants: tuple[Variant, ...] = (
        ("candidate",) if against_steps or criterion.absolute is not None else _VARIANTS
    )
    # Too few requests make the window thin, not unsound: weighed after (engine/weighing.py).
    problem = window_problem(readings, window, variants, criterion.min_samples or MIN_SCRAPES)
    if problem is not None:
        return Judgement(criterion.name, "Inconclusive", f"not judged on this window: {problem}")
    baseline, candidate = cost_criterion_values(costs.comparison, criterion.metric)
    if not against_steps:
        return judge_cost(criterion, baseline, candidate, costs.missing)
    established = _figures(from_steps, criterion.metric)
    if not established:
        # Thin, not inconclusive: a quiet service's steps may hold no window of 30 of the
        # baseline's requests; the promotion compares every window's figures pooled.
        return Judgement(
            criterion.name,
            "Inconclusive",
            "thin: the baseline serves nothing during the bake and no step window held the "
            f"{MEAN_NEED} of its requests a unit cost needs alone; judged on every window "
            "pooled at the promotion",
            candidate=candidate,
            thin=True,
        )
    seen = [*_figures(from_steps, criterion.metric, "candidate"), *_present_value(candidate)]
    typical = statistics.median(seen) if seen else None
    judged = judge_cost(criterion, statistics.median(established), typical, costs.missing)
    said = (
        f"{judged.reason} (the medians over the candidate's {len(seen)} sound measurements and "
        f"the baseline's {len(established)} step measurements)"
    )
    return Judgement(
        judged.criterion,
        judged.verdict,
        said,
        baseline=judged.baseline,
        candidate=judged.candidate,
        ratio=judged.ratio,
        baseline_samples=len(established) if judged.baseline is not None else 0,
        candidate_samples=judged.candidate_samples,
    )


def economics_status(
    costs: CostFigures,
    readings: Mapping[tuple[str, Variant], Reading],
    window: CostWindow,
    from_steps: BaselineCostFromSteps | None,
) -> EconomicsStatus:
    """``status.economics`` after this measurement: its figures, and the baseline's figures from
    the steps with this one added when it is a sound step measurement."""
    kept = from_steps or BaselineCostFromSteps()
    if not window.baking and _keepable(readings, window, _VARIANTS, "baseline"):
        kept = _with_figures(kept, _BASELINE_FIGURES, costs.comparison.baseline)
    if _keepable(readings, window, ("candidate",), "candidate"):
        kept = _with_figures(kept, _CANDIDATE_FIGURES, costs.comparison.candidate)
    status = to_status(costs.comparison)
    empty = not (
        kept.projected_cost_per_million_tokens
        or kept.projected_cost_per_thousand_requests
        or kept.candidate_cost_per_million_tokens
        or kept.candidate_cost_per_thousand_requests
    )
    return status.model_copy(update={"baseline_from_steps": None if empty else kept})


def _keepable(
    readings: Mapping[tuple[str, Variant], Reading],
    window: CostWindow,
    sound_for: Sequence[Variant],
    variant: Variant,
) -> bool:
    """Whether ``variant``'s unit costs of this window join the medians the bake compares: a
    window sound for ``sound_for`` and holding at least the requests a mean needs of the
    variant's. A 5% step's window of three
    requests reads a near-idle accelerator's utilization, and its unit cost twice the truth or
    half of it: kept, such figures moved the flagship's bake median from 0.56 to 0.91 times the
    baseline's (a fleet drawing requests at random)."""
    if window_problem(readings, window, sound_for) is not None:
        return False
    served = requests_served(readings, variant)
    return served is not None and served >= MEAN_NEED


_BASELINE_FIGURES = ("projected_cost_per_million_tokens", "projected_cost_per_thousand_requests")
_CANDIDATE_FIGURES = ("candidate_cost_per_million_tokens", "candidate_cost_per_thousand_requests")


def _with_figures(
    kept: BaselineCostFromSteps, fields: tuple[str, str], cost: VariantCost
) -> BaselineCostFromSteps:
    """``kept`` with ``cost``'s unit costs (per 1M tokens, per 1k requests) appended to
    ``fields``."""
    tokens, requests = fields
    return kept.model_copy(
        update={
            tokens: _appended(getattr(kept, tokens), cost.unit_per_million_tokens),
            requests: _appended(getattr(kept, requests), cost.unit_per_thousand_requests),
        }
    )


def _appended(figures: list[float], figure: float | None) -> list[float]:
    if figure is None:
        return figures
    return [*figures, figure][-BASELINE_FIGURES_KEPT:]


def _figures(
    from_steps: BaselineCostFromSteps | None, metric: str, variant: Variant = "baseline"
) -> list[float]:
    if from_steps is None:
        return []
    if variant == "candidate":
        if metric == "cost_per_million_tokens":
            return from_steps.candidate_cost_per_million_tokens
        return from_steps.candidate_cost_per_thousand_requests
    if metric == "cost_per_million_tokens":
        return from_steps.projected_cost_per_million_tokens
    return from_steps.projected_cost_per_thousand_requests


def _present_value(value: float | None) -> list[float]:
    return [] if value is None else [value]


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
