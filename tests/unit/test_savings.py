"""Savings as a careful analyst states them, with the promote demo's numbers worked out by hand:
at today's replicas (2 x g5.xlarge at $1.006/h against 1 x inf2.8xlarge at $1.96786/h) and at the
projected replicas (3 g5.xlarge, 2.07 rounded up, against 1 inf2.8xlarge), a range when the
utilization band (5 points either way) moves a count, and the payback from the same figures."""

from __future__ import annotations

import pytest

from acceltrial.api.spec import EconomicsSpec, MigrationCost
from acceltrial.engine.economics import (
    UTILIZATION_BAND,
    Throughput,
    VariantInput,
    compare,
    replica_range,
    to_status,
)
from acceltrial.pages.savings import WOULD_HAVE, payback_line, savings_lines

G5 = 1.006
INF2_8X = 1.96786
DEMO = EconomicsSpec(
    target_utilization=0.7, migration_cost=MigrationCost(engineer_hours=80, hourly_rate=120)
)
ALL_TRAFFIC = Throughput(requests_per_second=12)
INSTANCES = ("g5.xlarge", "inf2.8xlarge")

# The baseline's last step: 6 req/s on 2 pods. Capacity per pod = 3 / u; all 12 req/s at 70%
# need 12 / (3 / u x 0.7) = 5.714 u replicas: u = 0.36225 makes it 2.07.
BASELINE = VariantInput(
    replicas=2,
    price_per_instance_hour=G5,
    accelerators_per_pod=1,
    accelerators_per_instance=1,
    observed=Throughput(requests_per_second=6),
    utilization=0.36225,
)
# The bake: all 12 req/s on 1 pod at 64%: capacity 18.75, so 12 / (18.75 x 0.7) = 0.914.
CANDIDATE = VariantInput(
    replicas=1,
    price_per_instance_hour=INF2_8X,
    accelerators_per_pod=2,
    accelerators_per_instance=2,
    observed=Throughput(requests_per_second=12),
    utilization=0.64,
)
# At 25%: 3 req/s on 1 pod at 17.5%: 12 / (3 / 0.175 x 0.7) = 1.000, on the rounding edge.
ON_THE_EDGE = VariantInput(
    **{**CANDIDATE.__dict__, "observed": Throughput(3), "utilization": 0.175}
)


def test_savings_at_todays_and_at_the_projected_replicas() -> None:
    result = compare(BASELINE, CANDIDATE, DEMO, ALL_TRAFFIC)
    assert result.baseline.replicas == 2
    assert result.candidate.replicas == 1
    # Today: 2 x 1.006 = 2.012 against 1.96786: 0.04414/h x 730 = $32.22 a month.
    assert result.current_monthly_savings == pytest.approx(32.2222)
    # Projected: 5.714 x 0.36225 = 2.07 -> 3 g5.xlarge; 0.914 -> 1 inf2.8xlarge.
    assert result.baseline.replicas_needed == pytest.approx(2.07)
    assert result.baseline.projected_replicas == 3
    assert result.candidate.replicas_needed == pytest.approx(0.914286, rel=1e-5)
    assert result.candidate.projected_replicas == 1
    # 3 x 1.006 - 1.96786 = 1.05014/h x 730 = $766.60 a month.
    assert result.monthly_savings == pytest.approx(766.6022)
    # The band: the baseline's 2.07 at 31.2% and 41.2% is 1.78 and 2.36 -> 2 to 3; the
    # candidate's 0.914 at 59% and 69% is 0.84 and 0.99 -> 1 either way.
    assert result.baseline.projected_replicas_range == (2, 3)
    assert result.candidate.projected_replicas_range == (1, 1)
    # So the projected savings are $32.22 (2 against 1) to $766.60 (3 against 1).
    assert result.savings_range == pytest.approx((32.2222, 766.6022))
    # Payback: $9,600 / $766.60 = 12.52 months; / $32.22 = 297.9 months.
    assert result.payback_months == pytest.approx(12.5228, rel=1e-4)


def test_the_range_when_the_rounding_edge_moves_a_count() -> None:
    result = compare(BASELINE, ON_THE_EDGE, DEMO, ALL_TRAFFIC)
    assert result.candidate.replicas_needed == pytest.approx(1.0)
    assert result.candidate.projected_replicas == 1, "1.000 is one replica, not two"
    # 12.5% and 22.5% utilization: 0.714 and 1.286 replicas -> 1 to 2.
    assert result.candidate.projected_replicas_range == (1, 2)
    low, high = result.savings_range or (0.0, 0.0)
    # Lowest: 2 g5 against 2 inf2: 2.012 - 3.93572 = -1.92372/h x 730 = -$1,404.32.
    assert low == pytest.approx(-1404.3156)
    # Highest: 3 g5 against 1 inf2, as at the measured utilization.
    assert high == pytest.approx(766.6022)
    assert result.monthly_savings == pytest.approx(766.6022)


def test_the_band_keeps_utilization_within_0_and_1() -> None:
    assert UTILIZATION_BAND == 0.05
    assert replica_range(1.9, 0.98) == (2, 2), "98% + 5 points is capped at 100%: 1.94"
    assert replica_range(3.0, 0.04) == (1, 7), "4% - 5 points is 0: the fewest is 1"
    assert replica_range(None, 0.5) is None
    assert replica_range(2.0, None) is None


def test_the_demo_in_words() -> None:
    status = to_status(compare(BASELINE, CANDIDATE, DEMO, ALL_TRAFFIC))
    lines = savings_lines(status, INSTANCES, 0.7)
    assert lines[0] == (
        "At today's replicas, 2 g5.xlarge ($2.012/h) against 1 inf2.8xlarge ($1.968/h): "
        "the candidate saves $32 per month."
    )
    assert lines[1] == (
        "At the replicas all traffic needs at 70% utilization, 3 g5.xlarge (2.07 rounded up; "
        "2 to 3 with utilization 5 points either way) against 1 inf2.8xlarge (0.91 rounded "
        "up): the candidate saves $32 to $767 per month ($767 saved at the measured "
        "utilization)."
    )
    assert payback_line(status, 9600) == (
        "Migration effort $9,600: at today's replicas, pays back in 297.9 months; at the "
        "projected replicas, pays back in 12.5 to 297.9 months."
    )


def test_a_range_across_zero_and_a_payback_that_may_never_come() -> None:
    status = to_status(compare(BASELINE, ON_THE_EDGE, DEMO, ALL_TRAFFIC))
    said = savings_lines(status, INSTANCES, 0.7)[1]
    assert "1 inf2.8xlarge (1.00 needed; 1 to 2 with utilization 5 points either way)" in said
    assert "saves up to $767 per month or costs up to $1,404 more" in said
    assert payback_line(status, 9600) == (
        "Migration effort $9,600: at today's replicas, pays back in 297.9 months; at the "
        "projected replicas, pays back in 12.5 months at best, never at worst (it may save "
        "nothing)."
    )


def test_a_rollback_says_more_and_would_have() -> None:
    dearer = VariantInput(**{**CANDIDATE.__dict__, "replicas": 2, "utilization": 0.95})
    status = to_status(compare(BASELINE, dearer, DEMO, ALL_TRAFFIC))
    today = savings_lines(status, INSTANCES, 0.7, WOULD_HAVE)[0]
    # 2.012 - 2 x 1.96786 = -1.92372/h x 730 = -$1,404 a month: more, not a cost.
    assert today.endswith("the candidate would have cost $1,404 more per month.")
    assert "would have cost $1,404 per month" not in today
