"""The cost model: what each variant costs per useful result, observed and projected.

Pure arithmetic on plain numbers the caller measured (throughput, utilization) and resolved
(prices, accelerators per pod and per instance). No I/O. A figure that cannot be computed from
what was given (a missing measurement, zero throughput, zero utilization) is None, never NaN or 0.

The formulas, per variant:

- instance share of a pod = accelerators per pod / accelerators per instance (2 of 2 NeuronCores
  on inf2.8xlarge is 1, 1 of 2 is 0.5; GPUs count the same way). It assumes the rest of a shared
  instance is used by other pods, as the scheduler packs them.
- cost per replica-hour = instance price per hour x instance share; cost per hour = replicas x that.
- observed cost per 1M tokens = cost per hour / (tokens/s x 3600) x 1e6, and per 1k requests the
  same with successful requests/s and 1e3: what the traffic the variant actually served cost.
- projected (all production traffic on this variant, at ``economics.targetUtilization``):
  capacity per replica = observed throughput per replica / observed utilization;
  replicas needed = ceil(production throughput / (capacity per replica x target utilization)),
  taking the larger of the token and the request figure when both are known;
  projected cost per hour = replicas needed x cost per replica-hour; projected cost per unit =
  projected cost per hour / production throughput in that unit.
- production throughput = the sum of both variants' observed throughput (they share the traffic),
  unless the caller gives it.
- monthly cost = cost per hour x 730 h. Savings (baseline's - candidate's) are given twice: at
  today's replicas (the pods serving each variant in the window) and at the projected replicas;
  payback months = (engineerHours x hourlyRate + other) / savings, None when savings <= 0.
- the rounding's uncertainty: replicas needed scale with the measured utilization, so the
  projection is also made for a utilization :data:`UTILIZATION_BAND` (5 points) below and above
  the measured one (within 0..1). When that moves a count (the candidate needs 1.00 replicas:
  5 points more make it 2), the projected savings are a range, lowest (fewest baseline replicas
  against most candidate replicas) to highest, not one figure.

At a 5% step the candidate is mostly idle, so its observed cost per token is high; the projection
says what it would cost busy. Gate on the projection only at steps with enough load
(``fromWeight``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from acceltrial.api.spec import EconomicsSpec, MigrationCost
from acceltrial.api.status import EconomicsStatus, VariantEconomics

HOURS_PER_MONTH = 730.0
SECONDS_PER_HOUR = 3600.0
TOKENS_UNIT = 1_000_000.0
REQUESTS_UNIT = 1_000.0
# ceil(2.0000000000004) must be 2: the division behind it is not exact in floating point.
_CEIL_TOLERANCE = 1e-9
UTILIZATION_BAND = 0.05
"""How far a measured utilization is taken to be off (5 percentage points either way): exporters
read it coarsely (DCGM as the whole-percent share of time a kernel ran, neuron-monitor per
sampling period), and the window it is averaged over is one ``analysis.interval``."""


@dataclass(frozen=True)
class Throughput:
    """Useful work per second: successful requests and generated tokens, None if not measured."""

    requests_per_second: float | None = None
    tokens_per_second: float | None = None


@dataclass(frozen=True)
class VariantInput:
    """What the cost model needs to know about one variant."""

    replicas: int
    """Pods serving the variant during the measurement."""
    price_per_instance_hour: float | None
    """Price of one instance hour in USD, discounts applied; None if unknown."""
    accelerators_per_pod: float | None
    """NeuronCores, Neuron devices or GPUs each pod requests."""
    accelerators_per_instance: float | None
    """The same resource's count on one instance."""
    observed: Throughput
    """What the variant served over the measurement window."""
    utilization: float | None
    """Measured accelerator utilization, 0..1."""
    measured_capacity: Throughput | None = None
    """What one replica carries at the SLO, measured by a load sweep (spec.capacityTest): the
    projection uses it instead of throughput over utilization, which it keeps as a cross-check."""


@dataclass(frozen=True)
class VariantCost:
    """The cost figures of one variant; each None when it cannot be computed."""

    instance_share: float | None
    cost_per_replica_hour: float | None
    cost_per_hour: float | None
    observed_per_million_tokens: float | None
    observed_per_thousand_requests: float | None
    capacity_per_replica: Throughput
    """Throughput one replica carries: measured by the sweep, or else the utilization
    projection's (throughput at 100% utilization)."""
    replicas: int
    """Pods serving the variant in the window: today's replicas."""
    replicas_needed: float | None
    """Replicas all production traffic needs at the target utilization, before rounding up."""
    projected_replicas: int | None
    projected_replicas_range: tuple[int, int] | None
    """The projected replicas with the utilization :data:`UTILIZATION_BAND` lower and higher."""
    projected_cost_per_hour: float | None
    projected_per_million_tokens: float | None
    projected_per_thousand_requests: float | None
    projected_monthly_cost: float | None
    utilization: float | None
    unit_per_million_tokens: float | None = None
    """Cost per 1M tokens of capacity at the target utilization: ``replicasNeeded`` unrounded.
    What cost criteria judge, so a whole replica's rounding cannot flip them."""
    unit_per_thousand_requests: float | None = None
    projected_capacity_per_replica: Throughput | None = None
    """The utilization projection's capacity, when a measured one was used instead."""


@dataclass(frozen=True)
class Comparison:
    """Both variants' costs, the production traffic they were projected to, and the payoff."""

    baseline: VariantCost
    candidate: VariantCost
    production: Throughput
    target_utilization: float
    monthly_savings: float | None
    """At the projected replicas."""
    migration_cost: float | None
    payback_months: float | None
    current_monthly_savings: float | None = None
    """At today's replicas: the pods serving each variant in the window."""
    savings_range: tuple[float, float] | None = None
    """The lowest and highest savings at the projected replicas within the utilization band."""


def _positive(value: float | None) -> float | None:
    """``value`` if it is a finite number above zero, else None."""
    if value is None or not math.isfinite(value) or value <= 0:
        return None
    return value


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or numerator < 0 or not math.isfinite(numerator):
        return None
    divisor = _positive(denominator)
    if divisor is None:
        return None
    ratio = numerator / divisor
    return ratio if math.isfinite(ratio) else None  # a near-zero divisor overflows


def instance_share(per_pod: float | None, per_instance: float | None) -> float | None:
    """The share of an instance one pod takes; None if unknown or more than one instance."""
    # _positive again: a tiny share divided can underflow to 0.0, and a share of 0 is no figure
    share = _positive(_ratio(_positive(per_pod), per_instance))
    if share is None or share > 1:
        return None
    return share


def cost_per_unit(
    cost_per_hour: float | None, per_second: float | None, unit: float
) -> float | None:
    """USD per ``unit`` items when ``per_second`` items cost ``cost_per_hour``."""
    per_hour = _positive(per_second)
    if cost_per_hour is None or per_hour is None:
        return None
    return _positive(cost_per_hour / (per_hour * SECONDS_PER_HOUR) * unit)


def capacity_per_replica(
    observed: float | None, replicas: int, utilization: float | None
) -> float | None:
    """Throughput one replica would give fully used: per-replica throughput / utilization."""
    per_replica = _ratio(_positive(observed), replicas)
    busy = _positive(utilization)
    if busy is None or busy > 1:
        return None  # utilization outside (0, 1] is a broken measurement, not a capacity
    return _ratio(per_replica, busy)


def replicas_fraction(
    production: float | None, capacity: float | None, target_utilization: float
) -> float | None:
    """production / (capacity x target utilization), not rounded; None without both numbers."""
    usable = None if capacity is None else capacity * target_utilization
    return _ratio(_positive(production), usable)


def rounded_up(needed: float) -> int:
    """Whole replicas that carry ``needed``: at least one."""
    return max(1, math.ceil(needed - _CEIL_TOLERANCE))


def replicas_needed(
    production: float | None, capacity: float | None, target_utilization: float
) -> int | None:
    """ceil(production / (capacity x target utilization)); None without both numbers."""
    needed = replicas_fraction(production, capacity, target_utilization)
    return None if needed is None else rounded_up(needed)


def replica_range(
    needed: float | None, utilization: float | None, band: float = UTILIZATION_BAND
) -> tuple[int, int] | None:
    """The replicas the projection gives for a utilization ``band`` below and above the measured
    one (kept within 0..1): the replicas needed scale with it, as capacity = throughput /
    utilization. None without both numbers."""
    busy = _positive(utilization)
    if needed is None or busy is None or busy > 1:
        return None
    fewest = _ratio(needed * max(busy - band, 0.0), busy)
    most = _ratio(needed * min(busy + band, 1.0), busy)
    if fewest is None or most is None:
        return None  # a near-zero utilization overflows: no range, as no capacity
    return rounded_up(fewest), rounded_up(most)


def migration_total(cost: MigrationCost | None) -> float | None:
    """engineerHours x hourlyRate + other, or None when no migration cost is given."""
    if cost is None:
        return None
    return cost.engineer_hours * cost.hourly_rate + cost.other


def payback_months(migration: float | None, monthly_savings: float | None) -> float | None:
    """Months of savings that repay the migration; None when nothing is saved."""
    if migration is None or monthly_savings is None or monthly_savings <= 0:
        return None
    return migration / monthly_savings


def production_throughput(baseline: Throughput, candidate: Throughput) -> Throughput:
    """All traffic: the two variants' observed throughput added, per unit measured on both."""

    def total(first: float | None, second: float | None) -> float | None:
        if first is None or second is None:
            return None
        return _positive(first + second)

    return Throughput(
        total(baseline.requests_per_second, candidate.requests_per_second),
        total(baseline.tokens_per_second, candidate.tokens_per_second),
    )


def _times(first: float | None, second: float | None) -> float | None:
    # A product that under- or overflows (absurd prices) is not a figure: None, never 0 or inf.
    return None if first is None or second is None else _positive(first * second)


def _capacity(variant: VariantInput) -> Throughput:
    """The replica's capacity: measured, or projected from utilization."""
    measured = variant.measured_capacity
    if measured is not None and (measured.requests_per_second or measured.tokens_per_second):
        return measured
    return _projected_capacity(variant)


def _projected_capacity(variant: VariantInput) -> Throughput:
    observed = variant.observed
    return Throughput(
        capacity_per_replica(observed.requests_per_second, variant.replicas, variant.utilization),
        capacity_per_replica(observed.tokens_per_second, variant.replicas, variant.utilization),
    )


def fleet_need(production: Throughput, capacity: Throughput, target: float) -> float | None:
    """Replicas all production traffic needs, not rounded: the larger of the request and token
    needs."""
    needed = [
        n
        for n in (
            replicas_fraction(production.requests_per_second, capacity.requests_per_second, target),
            replicas_fraction(production.tokens_per_second, capacity.tokens_per_second, target),
        )
        if n is not None
    ]
    return max(needed) if needed else None


def variant_cost(variant: VariantInput, production: Throughput, target: float) -> VariantCost:
    """Observed and projected cost figures of one variant."""
    share = instance_share(variant.accelerators_per_pod, variant.accelerators_per_instance)
    per_replica_hour = _times(_positive(variant.price_per_instance_hour), share)
    cost_per_hour = _times(
        float(variant.replicas) if variant.replicas > 0 else None, per_replica_hour
    )
    capacity = _capacity(variant)
    projected = _projected_capacity(variant)
    needed = fleet_need(production, capacity, target)
    # The utilization band says how far a projection from utilization may be off; a measured
    # capacity has no such band.
    band = replica_range(needed, variant.utilization) if capacity == projected else None
    projected_replicas = None if needed is None else rounded_up(needed)
    projected_per_hour = _times(
        None if projected_replicas is None else float(projected_replicas), per_replica_hour
    )
    unit_per_hour = _times(needed, per_replica_hour)
    observed = variant.observed
    return VariantCost(
        instance_share=share,
        cost_per_replica_hour=per_replica_hour,
        cost_per_hour=cost_per_hour,
        observed_per_million_tokens=cost_per_unit(
            cost_per_hour, observed.tokens_per_second, TOKENS_UNIT
        ),
        observed_per_thousand_requests=cost_per_unit(
            cost_per_hour, observed.requests_per_second, REQUESTS_UNIT
        ),
        capacity_per_replica=capacity,
        replicas=variant.replicas,
        replicas_needed=needed,
        projected_replicas=projected_replicas,
        projected_replicas_range=band,
        projected_cost_per_hour=projected_per_hour,
        projected_per_million_tokens=cost_per_unit(
            projected_per_hour, production.tokens_per_second, TOKENS_UNIT
        ),
        projected_per_thousand_requests=cost_per_unit(
            projected_per_hour, production.requests_per_second, REQUESTS_UNIT
        ),
        projected_monthly_cost=_times(projected_per_hour, HOURS_PER_MONTH),
        utilization=_positive(variant.utilization),
        unit_per_million_tokens=cost_per_unit(
            unit_per_hour, production.tokens_per_second, TOKENS_UNIT
        ),
        unit_per_thousand_requests=cost_per_unit(
            unit_per_hour, production.requests_per_second, REQUESTS_UNIT
        ),
        projected_capacity_per_replica=None if capacity == projected else projected,
    )


def compare(
    baseline: VariantInput,
    candidate: VariantInput,
    economics: EconomicsSpec,
    production: Throughput | None = None,
) -> Comparison:
    """Both variants' costs at the traffic they served and projected to all of it."""
    traffic = production or production_throughput(baseline.observed, candidate.observed)
    target = economics.target_utilization
    base = variant_cost(baseline, traffic, target)
    cand = variant_cost(candidate, traffic, target)
    savings = _difference(base.projected_monthly_cost, cand.projected_monthly_cost)
    migration = migration_total(economics.migration_cost)
    return Comparison(
        baseline=base,
        candidate=cand,
        production=traffic,
        target_utilization=target,
        monthly_savings=savings,
        migration_cost=migration,
        payback_months=payback_months(migration, savings),
        current_monthly_savings=_difference(
            _times(base.cost_per_hour, HOURS_PER_MONTH), _times(cand.cost_per_hour, HOURS_PER_MONTH)
        ),
        savings_range=savings_range(base, cand),
    )


def _difference(first: float | None, second: float | None) -> float | None:
    return None if first is None or second is None else first - second


def savings_range(baseline: VariantCost, candidate: VariantCost) -> tuple[float, float] | None:
    """Monthly savings at the projected replicas, lowest to highest within the utilization band:
    the baseline's fewest against the candidate's most, and its most against the fewest."""
    base_hour, cand_hour = baseline.cost_per_replica_hour, candidate.cost_per_replica_hour
    base_range, cand_range = baseline.projected_replicas_range, candidate.projected_replicas_range
    if base_hour is None or cand_hour is None or base_range is None or cand_range is None:
        return None
    lowest = base_range[0] * base_hour - cand_range[1] * cand_hour
    highest = base_range[1] * base_hour - cand_range[0] * cand_hour
    return lowest * HOURS_PER_MONTH, highest * HOURS_PER_MONTH


def cost_criterion_values(comparison: Comparison, metric: str) -> tuple[float | None, float | None]:
    """(baseline, candidate) values of a cost criterion: the cost per unit of capacity at the
    target utilization (the replicas needed, unrounded).

    Criteria gate on the projection, since the observed cost of a variant at a small share says
    more about its idleness than about its price; ``fromWeight`` keeps them to steps with load.
    Unrounded, since a fleet's whole-replica rounding is a fact of its size, not of the
    accelerator: a candidate needing 1.00 replicas reads 1.96x the baseline's cost on a
    window's noise once rounded (the savings state the rounding, with its range).
    """
    if metric == "cost_per_million_tokens":
        return (
            comparison.baseline.unit_per_million_tokens,
            comparison.candidate.unit_per_million_tokens,
        )
    if metric == "cost_per_thousand_requests":
        return (
            comparison.baseline.unit_per_thousand_requests,
            comparison.candidate.unit_per_thousand_requests,
        )
    raise ValueError(f"{metric} is not a cost metric")


def variant_status(cost: VariantCost) -> VariantEconomics:
    """One variant's figures in the shape of ``status.economics``."""
    return VariantEconomics(
        cost_per_hour=cost.cost_per_hour,
        observed_cost_per_million_tokens=cost.observed_per_million_tokens,
        observed_cost_per_thousand_requests=cost.observed_per_thousand_requests,
        projected_cost_per_million_tokens=cost.projected_per_million_tokens,
        projected_cost_per_thousand_requests=cost.projected_per_thousand_requests,
        unit_cost_per_million_tokens=cost.unit_per_million_tokens,
        unit_cost_per_thousand_requests=cost.unit_per_thousand_requests,
        utilization=cost.utilization,
        projected_replicas=cost.projected_replicas,
        replicas=cost.replicas,
        cost_per_replica_hour=cost.cost_per_replica_hour,
        replicas_needed=cost.replicas_needed,
        projected_replicas_low=cost.projected_replicas_range[0]
        if cost.projected_replicas_range
        else None,
        projected_replicas_high=cost.projected_replicas_range[1]
        if cost.projected_replicas_range
        else None,
        capacity_rps_per_replica=cost.capacity_per_replica.requests_per_second,
        utilization_capacity_rps_per_replica=(
            cost.projected_capacity_per_replica.requests_per_second
            if cost.projected_capacity_per_replica
            else None
        ),
    )


def to_status(comparison: Comparison) -> EconomicsStatus:
    """The comparison as ``status.economics``; the full figures belong in the report."""
    return EconomicsStatus(
        baseline=variant_status(comparison.baseline),
        candidate=variant_status(comparison.candidate),
        projected_monthly_savings=comparison.monthly_savings,
        payback_months=comparison.payback_months,
        current_monthly_savings=comparison.current_monthly_savings,
        projected_monthly_savings_low=comparison.savings_range[0]
        if comparison.savings_range
        else None,
        projected_monthly_savings_high=comparison.savings_range[1]
        if comparison.savings_range
        else None,
    )
