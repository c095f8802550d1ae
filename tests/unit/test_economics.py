"""The cost model, with every number worked out by hand in the comments beside it.

Prices are the catalog's us-east-1 on-demand prices (2026-07-20): g5.xlarge $1.006/h (one A10G,
the GPU of g5.2xlarge, whose price the reference table lacks) and inf2.8xlarge $1.96786/h.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from acceltrial.api.spec import EconomicsSpec, MigrationCost
from acceltrial.engine.economics import (
    Throughput,
    VariantInput,
    capacity_per_replica,
    compare,
    cost_criterion_values,
    cost_per_unit,
    instance_share,
    payback_months,
    production_throughput,
    replicas_needed,
    to_status,
)

G5 = 1.006
INF2_8X = 1.96786
NAN = float("nan")

ECONOMICS = EconomicsSpec(
    target_utilization=0.7, migration_cost=MigrationCost(engineer_hours=80, hourly_rate=120)
)

# The 5% step: 20 req/s and 4000 generated tokens/s in all (200 tokens per request).
# Baseline: 8 pods, 1 GPU each on g5.xlarge (1 GPU), serving 95%, GPUs 80% busy.
BASELINE_AT_5 = VariantInput(
    replicas=8,
    price_per_instance_hour=G5,
    accelerators_per_pod=1,
    accelerators_per_instance=1,
    observed=Throughput(requests_per_second=19, tokens_per_second=3800),
    utilization=0.80,
)
# Candidate: 2 pods, 2 of the 2 NeuronCores of an inf2.8xlarge each, serving 5%, 5% busy.
CANDIDATE_AT_5 = VariantInput(
    replicas=2,
    price_per_instance_hour=INF2_8X,
    accelerators_per_pod=2,
    accelerators_per_instance=2,
    observed=Throughput(requests_per_second=1, tokens_per_second=200),
    utilization=0.05,
)


def test_low_traffic_observed_and_projected_cost_differ_widely() -> None:
    result = compare(BASELINE_AT_5, CANDIDATE_AT_5, ECONOMICS)
    cand = result.candidate
    assert result.production == Throughput(20, 4000)

    # 2 pods x a whole inf2.8xlarge = 2 x 1.96786 = $3.93572/h
    assert cand.instance_share == 1
    assert cand.cost_per_hour == pytest.approx(3.93572)
    # observed: 200 tok/s = 720,000 tok/h -> 3.93572 / 0.72 = $5.46628 per 1M tokens
    assert cand.observed_per_million_tokens == pytest.approx(5.466278, rel=1e-6)
    # 1 req/s = 3,600 req/h -> 3.93572 / 3.6 = $1.09326 per 1k requests
    assert cand.observed_per_thousand_requests == pytest.approx(1.093256, rel=1e-6)
    # capacity per replica: (200 / 2) / 0.05 = 2000 tok/s, (1 / 2) / 0.05 = 10 req/s
    assert cand.capacity_per_replica.tokens_per_second == pytest.approx(2000)
    assert cand.capacity_per_replica.requests_per_second == pytest.approx(10)
    # replicas for all traffic at 70%: ceil(4000 / 1400) = ceil(2.857) = 3 (20 / 7 likewise)
    assert cand.projected_replicas == 3
    # 3 x 1.96786 = $5.90358/h; 4000 tok/s = 14.4M tok/h -> 5.90358 / 14.4 = $0.40997 per 1M
    assert cand.projected_cost_per_hour == pytest.approx(5.90358)
    assert cand.projected_per_million_tokens == pytest.approx(0.409971, rel=1e-5)
    # 20 req/s = 72,000 req/h -> 5.90358 / 72 = $0.081994 per 1k requests
    assert cand.projected_per_thousand_requests == pytest.approx(0.0819942, rel=1e-5)
    # $5.47 observed against $0.41 projected: more than 13 times apart.
    assert cand.observed_per_million_tokens is not None
    assert cand.projected_per_million_tokens is not None
    assert cand.observed_per_million_tokens / cand.projected_per_million_tokens > 13


def test_baseline_figures_at_the_same_step() -> None:
    base = compare(BASELINE_AT_5, CANDIDATE_AT_5, ECONOMICS).baseline
    # 8 x 1.006 = $8.048/h; 3800 tok/s = 13.68M tok/h -> $0.58830 per 1M observed
    assert base.cost_per_hour == pytest.approx(8.048)
    assert base.observed_per_million_tokens == pytest.approx(0.588304, rel=1e-5)
    # 19 req/s = 68,400 req/h -> 8.048 / 68.4 = $0.117661 per 1k observed
    assert base.observed_per_thousand_requests == pytest.approx(0.117661, rel=1e-5)
    # capacity (3800 / 8) / 0.8 = 593.75 tok/s; at 70%: 415.625; ceil(4000 / 415.625) = ceil(9.62)
    assert base.capacity_per_replica.tokens_per_second == pytest.approx(593.75)
    assert base.projected_replicas == 10
    # 10 x 1.006 = $10.06/h -> 10.06 / 14.4 = $0.69861 per 1M, 10.06 / 72 = $0.13972 per 1k
    assert base.projected_cost_per_hour == pytest.approx(10.06)
    assert base.projected_per_million_tokens == pytest.approx(0.698611, rel=1e-5)
    assert base.projected_per_thousand_requests == pytest.approx(0.139722, rel=1e-5)


def test_monthly_savings_and_payback() -> None:
    result = compare(BASELINE_AT_5, CANDIDATE_AT_5, ECONOMICS)
    # 730 h: baseline 10.06 x 730 = $7343.80, candidate 5.90358 x 730 = $4309.6134
    assert result.baseline.projected_monthly_cost == pytest.approx(7343.80)
    assert result.candidate.projected_monthly_cost == pytest.approx(4309.6134)
    assert result.monthly_savings == pytest.approx(3034.1866)
    # 80 h x $120 = $9600; 9600 / 3034.1866 = 3.164 months
    assert result.migration_cost == 9600
    assert result.payback_months == pytest.approx(3.16394, rel=1e-5)


def test_at_half_the_traffic_observed_and_projected_are_close() -> None:
    # The 50% step, same 4000 tok/s: each variant serves 2000 tok/s (10 req/s).
    baseline = VariantInput(8, G5, 1, 1, Throughput(10, 2000), utilization=0.40)
    candidate = VariantInput(2, INF2_8X, 2, 2, Throughput(10, 2000), utilization=0.50)
    cand = compare(baseline, candidate, ECONOMICS).candidate
    # observed: 3.93572 / 7.2 = $0.546628 per 1M
    assert cand.observed_per_million_tokens == pytest.approx(0.546628, rel=1e-5)
    # capacity (2000 / 2) / 0.5 = 2000 tok/s; ceil(4000 / 1400) = 3 -> $0.409971 per 1M, as at 5%
    assert cand.projected_replicas == 3
    assert cand.projected_per_million_tokens == pytest.approx(0.409971, rel=1e-5)


def test_one_of_two_neuron_cores_is_half_an_instance() -> None:
    candidate = VariantInput(4, INF2_8X, 1, 2, Throughput(1, 200), utilization=0.05)
    cand = compare(BASELINE_AT_5, candidate, ECONOMICS).candidate
    # 4 pods x 0.5 x 1.96786 = $3.93572/h, the same as 2 whole instances
    assert cand.instance_share == 0.5
    assert cand.cost_per_replica_hour == pytest.approx(0.98393)
    assert cand.cost_per_hour == pytest.approx(3.93572)
    # capacity (200 / 4) / 0.05 = 1000 tok/s; ceil(4000 / 700) = ceil(5.71) = 6 half instances
    assert cand.projected_replicas == 6
    assert cand.projected_cost_per_hour == pytest.approx(5.90358)


def test_gpu_pods_share_by_gpu_count() -> None:
    # 1 GPU of a 4-GPU g5.12xlarge ($5.672/h) is a quarter: $1.418 per pod-hour
    assert instance_share(1, 4) == 0.25
    baseline = VariantInput(2, 5.672, 1, 4, Throughput(1, 100), utilization=0.5)
    assert compare(baseline, CANDIDATE_AT_5, ECONOMICS).baseline.cost_per_hour == pytest.approx(
        2.836
    )


def test_no_payback_when_the_candidate_costs_more() -> None:
    # Baseline GPUs idle enough that 1 g5.xlarge carries everything; the candidate needs 3 inf2.
    baseline = VariantInput(1, G5, 1, 1, Throughput(19, 3800), utilization=0.10)
    result = compare(baseline, CANDIDATE_AT_5, ECONOMICS)
    # capacity 3800 / 0.1 = 38000 tok/s -> ceil(4000 / 26600) = 1 replica, $734.38 a month
    assert result.baseline.projected_replicas == 1
    assert result.monthly_savings == pytest.approx(734.38 - 4309.6134)
    assert result.payback_months is None


def test_no_migration_cost_means_no_payback_figure() -> None:
    result = compare(BASELINE_AT_5, CANDIDATE_AT_5, EconomicsSpec())
    assert result.monthly_savings is not None
    assert result.monthly_savings > 0
    assert result.migration_cost is None
    assert result.payback_months is None


def test_target_utilization_changes_the_projection() -> None:
    # at 90%: ceil(4000 / (2000 x 0.9)) = ceil(2.22) = 3; at 100%: ceil(4000 / 2000) = 2
    at_90 = compare(BASELINE_AT_5, CANDIDATE_AT_5, EconomicsSpec(target_utilization=0.9))
    at_100 = compare(BASELINE_AT_5, CANDIDATE_AT_5, EconomicsSpec(target_utilization=1.0))
    assert at_90.candidate.projected_replicas == 3
    assert at_100.candidate.projected_replicas == 2


def test_production_traffic_can_be_given() -> None:
    result = compare(BASELINE_AT_5, CANDIDATE_AT_5, ECONOMICS, production=Throughput(40, 8000))
    # ceil(8000 / 1400) = ceil(5.71) = 6 inf2.8xlarge
    assert result.candidate.projected_replicas == 6


def test_rounding_up_is_not_fooled_by_floating_point() -> None:
    # 3 tok/s per replica at 35% -> 3 / 0.35 = 8.571 capacity; x 0.7 = 6; 6 / 6 is exactly 1,
    # which floating point computes as 1.0000000000000002.
    capacity = capacity_per_replica(3, 1, 0.35)
    assert capacity is not None
    assert 6 / (capacity * 0.7) > 1
    assert replicas_needed(6, capacity, 0.7) == 1


def test_requests_and_tokens_both_bound_the_fleet() -> None:
    # tokens alone need ceil(4000 / 1400) = 3; requests at 0.1 req/s per replica and 5% busy give
    # capacity 2 req/s, x 0.7 = 1.4 -> ceil(20 / 1.4) = 15: the fleet must carry both.
    candidate = VariantInput(2, INF2_8X, 2, 2, Throughput(0.2, 200), utilization=0.05)
    result = compare(BASELINE_AT_5, candidate, ECONOMICS, production=Throughput(20, 4000))
    assert result.candidate.projected_replicas == 15


@pytest.mark.parametrize(
    ("change", "none_fields"),
    [
        (
            {"utilization": None},
            {"projected_replicas", "projected_per_million_tokens", "projected_monthly_cost"},
        ),
        ({"utilization": 0.0}, {"projected_replicas", "projected_per_thousand_requests"}),
        ({"utilization": 1.5}, {"projected_replicas"}),
        ({"utilization": NAN}, {"projected_replicas", "utilization"}),
        (
            {"price_per_instance_hour": None},
            {"cost_per_hour", "observed_per_million_tokens", "projected_cost_per_hour"},
        ),
        ({"accelerators_per_pod": None}, {"instance_share", "cost_per_hour"}),
        ({"accelerators_per_instance": 0}, {"instance_share", "cost_per_hour"}),
        ({"accelerators_per_pod": 4}, {"instance_share", "cost_per_hour"}),  # more than one node
        ({"replicas": 0}, {"cost_per_hour", "projected_replicas"}),
        (
            {"observed": Throughput(0, 0)},
            {"observed_per_million_tokens", "observed_per_thousand_requests", "projected_replicas"},
        ),
        ({"observed": Throughput(1, None)}, {"observed_per_million_tokens"}),
        ({"observed": Throughput(NAN, 200)}, {"observed_per_thousand_requests"}),
    ],
)
def test_a_figure_that_cannot_be_computed_is_none(
    change: dict[str, object], none_fields: set[str]
) -> None:
    candidate = VariantInput(**{**CANDIDATE_AT_5.__dict__, **change})  # type: ignore[arg-type]
    cost = compare(BASELINE_AT_5, candidate, ECONOMICS).candidate
    for name in none_fields:
        assert getattr(cost, name) is None, name
    for value in cost.__dict__.values():
        if isinstance(value, float):
            assert math.isfinite(value)
            assert value > 0


def test_missing_candidate_tokens_leave_production_tokens_unknown() -> None:
    production = production_throughput(Throughput(19, 3800), Throughput(1, None))
    assert production == Throughput(20, None)
    assert production_throughput(Throughput(0, 0), Throughput(0, 0)) == Throughput(None, None)


def test_savings_are_none_when_either_side_cannot_be_projected() -> None:
    candidate = VariantInput(**{**CANDIDATE_AT_5.__dict__, "utilization": None})
    result = compare(BASELINE_AT_5, candidate, ECONOMICS)
    assert result.monthly_savings is None
    assert result.payback_months is None


@pytest.mark.parametrize(
    ("cost", "per_second", "expected"),
    [(3.6, 1.0, 1.0), (3.6, 0.0, None), (None, 1.0, None), (3.6, -1.0, None), (3.6, NAN, None)],
)
def test_cost_per_unit(cost: float | None, per_second: float, expected: float | None) -> None:
    # $3.60/h at 1 item/s = 3600 items/h -> $1 per 1000
    assert cost_per_unit(cost, per_second, 1000) == expected


def test_payback_months_guards() -> None:
    assert payback_months(1200, 100) == 12
    assert payback_months(0, 100) == 0
    assert payback_months(1200, 0) is None
    assert payback_months(1200, -5) is None
    assert payback_months(None, 100) is None


def test_to_status_carries_the_figures() -> None:
    status = to_status(compare(BASELINE_AT_5, CANDIDATE_AT_5, ECONOMICS))
    assert status.candidate is not None
    assert status.baseline is not None
    assert status.candidate.cost_per_hour == pytest.approx(3.93572)
    assert status.candidate.observed_cost_per_million_tokens == pytest.approx(5.466278, rel=1e-6)
    assert status.candidate.projected_cost_per_million_tokens == pytest.approx(0.409971, rel=1e-5)
    assert status.candidate.projected_cost_per_thousand_requests == pytest.approx(
        0.0819942, rel=1e-5
    )
    assert status.candidate.utilization == 0.05
    assert status.baseline.projected_cost_per_million_tokens == pytest.approx(0.698611, rel=1e-5)
    assert status.projected_monthly_savings == pytest.approx(3034.1866)
    assert status.payback_months == pytest.approx(3.16394, rel=1e-5)
    dumped = status.model_dump(by_alias=True, exclude_none=True)
    assert set(dumped) == {"baseline", "candidate", "projectedMonthlySavings", "paybackMonths",
                           "currentMonthlySavings", "projectedMonthlySavingsLow",
                           "projectedMonthlySavingsHigh"}  # fmt: skip
    # Today: 8 x 1.006 - 2 x 1.96786 = 4.11228/h x 730 = $3,001.96 a month.
    assert status.current_monthly_savings == pytest.approx(3001.9644)


def test_to_status_leaves_unknown_figures_out() -> None:
    candidate = VariantInput(**{**CANDIDATE_AT_5.__dict__, "price_per_instance_hour": None})
    status = to_status(compare(BASELINE_AT_5, candidate, ECONOMICS))
    assert status.candidate is not None
    # Replicas follow from throughput and utilization alone; every price-based figure is absent.
    assert status.candidate.model_dump(by_alias=True, exclude_none=True) == {
        "utilization": 0.05,
        "projectedReplicas": 3,
        "replicas": 2,
        # 4000 / (2000 x 0.7) = 2.857; at 0% and 10% utilization 1 and 5.714 -> 6.
        "replicasNeeded": pytest.approx(2.857143),
        "projectedReplicasLow": 1,
        "projectedReplicasHigh": 6,
        "capacityRpsPerReplica": 10.0,  # 1 req/s over 2 pods at 5%
    }
    assert status.projected_monthly_savings is None


def test_a_measured_capacity_replaces_the_utilization_projection_and_keeps_it_beside() -> None:
    """A sweep measured 3 req/s (600 tokens/s) per candidate pod where 5% utilization
    projects 10: all 20 req/s need 20 / (3 x 0.7) = 9.52 pods, not 2.86, and the utilization
    band no longer applies."""
    measured = replace(CANDIDATE_AT_5, measured_capacity=Throughput(3, 600))
    result = compare(BASELINE_AT_5, measured, ECONOMICS)
    candidate = result.candidate
    assert candidate.replicas_needed == pytest.approx(20 / (3 * 0.7))
    assert candidate.projected_replicas == 10
    assert candidate.projected_replicas_range is None
    assert candidate.capacity_per_replica == Throughput(3, 600)
    assert candidate.projected_capacity_per_replica == Throughput(10, 2000)
    status = to_status(result).candidate
    assert status is not None
    assert (status.capacity_rps_per_replica, status.utilization_capacity_rps_per_replica) == (3, 10)
    unmeasured = compare(BASELINE_AT_5, CANDIDATE_AT_5, ECONOMICS).candidate
    assert unmeasured.projected_capacity_per_replica is None
    assert unmeasured.replicas_needed == pytest.approx(20 / (10 * 0.7))


MEASURED = st.one_of(
    st.none(),
    st.just(0.0),
    st.just(NAN),
    st.just(float("inf")),
    st.floats(min_value=-10, max_value=1e6, allow_nan=False),
)


CANDIDATES = st.builds(
    VariantInput,
    replicas=st.integers(min_value=0, max_value=50),
    price_per_instance_hour=MEASURED,
    accelerators_per_pod=MEASURED,
    accelerators_per_instance=MEASURED,
    observed=st.builds(Throughput, MEASURED, MEASURED),
    utilization=MEASURED,
)


@settings(max_examples=300, deadline=None)
@given(candidate=CANDIDATES)
@example(  # a share of an instance that underflows to 0.0 when divided (found by hypothesis)
    candidate=VariantInput(0, None, 5e-324, 2.0, Throughput(None, None), None)
)
def test_every_figure_is_none_or_a_finite_positive_number(candidate: VariantInput) -> None:
    result = compare(BASELINE_AT_5, candidate, ECONOMICS)
    for name, value in result.candidate.__dict__.items():
        if isinstance(value, float | int) and name != "replicas":  # today's count: may be 0
            assert math.isfinite(value)
            assert value > 0
    if result.candidate.projected_replicas_range is not None:
        fewest, most = result.candidate.projected_replicas_range
        assert 1 <= fewest <= (result.candidate.projected_replicas or fewest) <= most
    ranged = result.savings_range or ()
    for figure in (result.monthly_savings, result.payback_months,
                   result.current_monthly_savings, *ranged):  # fmt: skip
        assert figure is None or math.isfinite(figure)
    to_status(result)  # the status models accept every result


def test_cost_criteria_read_the_projection() -> None:
    result = compare(BASELINE_AT_5, CANDIDATE_AT_5, ECONOMICS)
    base, cand = cost_criterion_values(result, "cost_per_million_tokens")
    # Per unit of capacity, the replicas needed unrounded: the baseline 4000 / 415.625 = 9.6241
    # x $1.006 / 14.4M tokens = $0.67235 per 1M (/ 72k requests: $0.134470 per 1k); the
    # candidate 4000 / 1400 = 2.85714 x $1.96786 / 14.4 = $0.39045 ($0.0780897 per 1k).
    assert base == pytest.approx(0.672348, rel=1e-5)
    assert cand == pytest.approx(0.390448, rel=1e-5)
    base, cand = cost_criterion_values(result, "cost_per_thousand_requests")
    assert (base, cand) == (
        pytest.approx(0.134470, rel=1e-5),
        pytest.approx(0.0780897, rel=1e-5),
    )
    with pytest.raises(ValueError, match="latency_p99 is not a cost metric"):
        cost_criterion_values(result, "latency_p99")
