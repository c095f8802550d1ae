"""How much evidence a verdict needs: the needs, thin windows, the promotion's gate, intervals.

The expected values are computed by hand from closed forms:

- a proportion with no event in n trials has the one-sided exact (Clopper-Pearson) upper bound
  ``1 - alpha ** (1 / n)`` (Clopper and Pearson, Biometrika 26, 1934; the bound behind the "rule
  of three", 3/n): 0 of 175 at 95% is 1 - 0.05 ** (1/175) = 0.016975;
- P(at least one error in n requests) at a true ratio p is ``1 - (1 - p) ** n``: 17 requests at
  1% give 0.1571;
- a Poisson count of 0 in t seconds has the exact (Garwood, Biometrika 28, 1936) two-sided 95%
  upper bound ``-ln(0.025) / t``, and a count of 1 the lower bound ``-ln(1 - 0.025) / t``.
"""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from acceltrial.api.reasons import INCONCLUSIVE, PROMOTED
from acceltrial.api.spec import Criterion, TrialSpec
from acceltrial.api.status import (
    AnalysisCounts,
    CriterionEvidence,
    CriterionResult,
    RequestCounts,
    TrialStatus,
    original_routing,
)
from acceltrial.engine.analysis import Judgement, Reading, round_outcome, tally
from acceltrial.engine.evidence import (
    error_ratio_interval,
    error_ratio_p_value,
    evidence_forecast,
    expected_requests,
    need_of,
    rate_interval,
    record,
    share_above_p_value,
    shortfalls,
)
from acceltrial.engine.lifecycle import decide
from acceltrial.engine.schedule import criteria_hash, measurement_due
from acceltrial.engine.ticks import Measurement, Observation
from acceltrial.engine.weighing import judge_window, pooled_failures, weigh

T0 = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


def criterion(**fields: Any) -> Criterion:
    return Criterion.model_validate({"name": "c", **fields})


# -- the need each measure implies ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "needed"),
    [
        ({"metric": "latency_p99", "absolute": {"max": 2}}, 100),
        ({"metric": "ttft_p99", "relative": {"max": 1.2}}, 100),
        ({"metric": "latency_p90", "absolute": {"max": 2}}, 30),  # 1/(1-0.9) = 10 < 30
        ({"metric": "latency_p50", "absolute": {"max": 2}}, 30),
        ({"metric": "error_ratio", "absolute": {"max": 0.01}}, 100),  # 1/L
        ({"metric": "error_ratio", "absolute": {"max": 0.05}}, 20),
        ({"metric": "error_ratio", "absolute": {"max": 0.001}}, 1000),
        ({"metric": "error_ratio", "relative": {"max": 1.5}}, 100),  # no absolute limit
        ({"metric": "latency_mean", "relative": {"max": 1.2}}, 30),
        ({"metric": "cost_per_million_tokens", "relative": {"max": 0.8}}, 30),
        ({"metric": "error_ratio", "absolute": {"max": 0.01}, "minRequests": 20}, 20),
        ({"metric": "latency_p99", "absolute": {"max": 2}, "minRequests": 0}, None),
        ({"metric": "accelerator_utilization", "absolute": {"min": 0.1}}, None),
        ({"query": "sum(x{pod=~'{{pods}}'})", "absolute": {"max": 1}}, None),
    ],
)
def test_each_measure_needs_the_evidence_it_implies(
    fields: dict[str, Any], needed: int | None
) -> None:
    need = need_of(criterion(**fields))
    assert (need.requests if need else None) == needed


# -- intervals and tests against closed forms ----------------------------------------------------


def test_no_error_in_175_requests_bounds_the_ratio_at_1_7_percent() -> None:
    low, high = error_ratio_interval(0, 175)
    assert low == 0
    assert high == pytest.approx(1 - 0.05 ** (1 / 175), rel=1e-9)
    assert f"{high:.1%}" == "1.7%"


def test_a_proportions_two_sided_bounds_hold_their_tails() -> None:
    # Clopper-Pearson: P(X >= 3 | p=low) = 2.5% and P(X <= 3 | p=high) = 2.5%, by the sums.
    low, high = error_ratio_interval(3, 100)
    at_least_3 = 1 - sum(math.comb(100, k) * low**k * (1 - low) ** (100 - k) for k in range(3))
    at_most_3 = sum(math.comb(100, k) * high**k * (1 - high) ** (100 - k) for k in range(4))
    assert at_least_3 == pytest.approx(0.025, rel=1e-6)
    assert at_most_3 == pytest.approx(0.025, rel=1e-6)


def test_one_error_in_17_requests_is_no_evidence_against_a_1_percent_limit() -> None:
    assert error_ratio_p_value(1, 17, 0.01) == pytest.approx(1 - 0.99**17, rel=1e-9)
    assert error_ratio_p_value(1, 17, 0.01) == pytest.approx(0.1571, abs=1e-4)
    assert error_ratio_p_value(0, 17, 0.01) == 1.0


def test_fishers_one_sided_test_against_hand_computed_hypergeometric_tails() -> None:
    """P(X >= k), X hypergeometric (N drawn from M holding K events): 3 of 3 drawn from 6 with
    3 events is C(3,3) C(3,0) / C(6,3) = 1/20; at least 1 of 3 from 6 with 2 events is
    1 - C(4,3) / C(6,3) = 0.8."""
    assert share_above_p_value(3, 3, 0, 3) == pytest.approx(0.05)
    assert share_above_p_value(1, 3, 1, 3) == pytest.approx(0.8)
    assert share_above_p_value(0, 10, 5, 10) == 1.0
    assert share_above_p_value(12, 25, 3, 200) < 1e-9


def test_a_poisson_rates_exact_bounds() -> None:
    assert rate_interval(0, 60) == (0.0, pytest.approx(-math.log(0.025) / 60, rel=1e-9))
    low, _ = rate_interval(1, 60)
    assert low == pytest.approx(-math.log(1 - 0.025) / 60, rel=1e-9)


# -- thin windows ---------------------------------------------------------------------------------

P99 = {"metric": "latency_p99", "absolute": {"max": 2.0}}
MEAN = {"metric": "latency_mean", "absolute": {"max": 2.0}}
ERRORS = {"metric": "error_ratio", "absolute": {"max": 0.01}}


def one(value: float, requests: float | None) -> Reading:
    return Reading(values=(value,), series=1, requests=requests)


@pytest.mark.parametrize(
    ("fields", "reading", "verdict", "thin", "said"),
    [
        (P99, one(1.5, 120), "Pass", False, "within"),
        (P99, one(1.5, 12), "Inconclusive", True, "thin: 12 of the candidate's requests"),
        (P99, one(2.5, 12), "Inconclusive", True, "a p99 needs 100"),  # 1.25x: may be chance
        (P99, one(3.5, 12), "Inconclusive", True, "thin"),  # a quantile of few: never decisive
        (MEAN, one(3.5, 12), "Fail", False, "1.8x beyond its limit"),  # a clear breach
        (MEAN, one(2.5, 12), "Inconclusive", True, "a mean needs 30"),  # 1.25x: may be chance
        (P99, one(2.5, 150), "Fail", False, "above max"),
        (P99, one(float("nan"), 0), "Inconclusive", False, "NaN"),
        (ERRORS, one(1 / 12, 12), "Inconclusive", True, "thin"),  # 1 of 12: p = 0.11
        (ERRORS, one(5 / 12, 12), "Fail", False, "5 errors would happen with probability"),
        # Enough requests, above the limit, but within chance: P(>= 3 of 181 | 1%) = 0.27.
        (ERRORS, one(3 / 181, 181), "Inconclusive", True, "3 errors in 181 requests may be"),
        (ERRORS, one(10 / 181, 181), "Fail", False, "is above max 0.01"),  # p = 2e-5
        (ERRORS, one(0.0, 0), "Inconclusive", False, "no data"),
        (ERRORS, one(0.0, None), "Pass", False, "within"),  # requests not counted: as before
    ],
)
def test_a_window_on_few_requests_is_thin_unless_the_breach_is_decisive(
    fields: dict[str, Any], reading: Reading, verdict: str, thin: bool, said: str
) -> None:
    judged = judge_window(criterion(**fields), None, reading)
    assert (judged.verdict, judged.thin) == (verdict, thin)
    assert said in judged.reason


def test_a_thin_windows_cost_is_never_decisive_however_far_beyond_its_limit() -> None:
    cost = criterion(metric="cost_per_million_tokens", relative={"max": 0.9})
    failed = Judgement("cost", "Fail", "1.54x the baseline's", ratio=1.54, baseline_requests=400)
    judged = weigh(failed, cost, 13, 0.05)
    assert (judged.verdict, judged.thin) == ("Inconclusive", True)
    # The same figure on enough requests fails.
    assert weigh(failed, cost, 40, 0.05).verdict == "Fail"


def test_a_cost_near_its_limit_in_one_window_is_thin_and_judged_pooled() -> None:
    """The flagship's candidate, 0.56x the baseline's cost by its profiles, read 0.99x on one
    window of 39 requests on a busy machine (limit 0.9): no rollback on that window alone.
    Pooled with the trial's other windows at the promotion, a dearer candidate still fails."""
    cost = criterion(name="cost", metric="cost_per_million_tokens", relative={"max": 0.9})
    near = Judgement("cost", "Fail", "0.99x the baseline's", ratio=0.99, baseline_requests=400)

    judged = weigh(near, cost, 39, 0.01)

    assert (judged.verdict, judged.thin) == ("Inconclusive", True)
    assert "judged on every window pooled before the promotion" in judged.reason
    passed = CriterionEvidence(
        criterion="cost", step=2, weight=25, windows=1, thin_windows=0, candidate_requests=40,
        baseline_requests=120, candidate_value_sum=0.5 * 40, baseline_value_sum=1.0 * 120,
    )  # fmt: skip
    dearer = passed.model_copy(
        update={"step": 3, "weight": 50, "candidate_requests": 120, "thin_windows": 1,
                "candidate_value_sum": 1.2 * 120, "baseline_value_sum": 1.0 * 120}
    )  # fmt: skip
    # (20 + 144) / 160 = 1.025 against (120 + 120) / 240 = 1.0: above 0.9.
    assert pooled_failures([cost], [passed, dearer]) == [
        "cost: pooled over 160 of the candidate's requests: 1.025 is 1.02x the baseline's 1 "
        "(limit max 0.9)"
    ], "a cost is pooled though one window was judged alone"
    latency = criterion(**RELATIVE_P99)
    rows = [row.model_copy(update={"criterion": "c"}) for row in (passed, dearer)]
    assert pooled_failures([latency], rows) == [], "other criteria: judged in a step already"


def test_an_error_ratio_above_its_limit_within_chance_fails_no_step_and_no_promotion() -> None:
    """The `handover` trial of the end-to-end suite, a candidate failing one request in a
    thousand, read 3 errors (0.0159) in its 50% step's 181 requests against a 1% limit and was
    rolled back on that point estimate. Errors the binomial test carries still fail."""
    errors = criterion(name="errors", **ERRORS)
    first = errors_row(91, 0.03175)  # 2.9 errors, as a rate extrapolates them

    quiet = judge_window(errors, None, one(0.0, 90), step=[first])

    assert (quiet.verdict, quiet.thin) == ("Inconclusive", True)
    assert "but 3 errors in 181 requests may be chance under 0.01 (p = 0.27)" in quiet.reason
    burst = judge_window(errors, None, one(0.1, 90), step=[first])
    assert burst.verdict == "Fail", "9 of 90 in one window: p = 3e-7"
    # At the promotion, windows that were all thin are pooled: 5 of 273 may be chance
    # (p = 0.14), 9 of 273 may not (p = 0.0019).
    within = [errors_row(91, 5 / 273, step) for step in (1, 2, 3)]
    assert pooled_failures([errors], within) == []
    beyond = [errors_row(91, 9 / 273, step) for step in (1, 2, 3)]
    assert pooled_failures([errors], beyond) == [
        "errors: pooled over 273 of the candidate's requests: 0.03297 is above max 0.01"
    ]


def errors_row(served: float, ratio: float, step: int = 3) -> CriterionEvidence:
    return CriterionEvidence(
        criterion="errors", step=step, weight=50, windows=1, thin_windows=1,
        candidate_requests=served, candidate_value_sum=ratio * served,
    )  # fmt: skip


def test_a_relative_criterion_is_thin_on_a_thin_baseline() -> None:
    relative = criterion(metric="latency_p99", relative={"max": 1.2})
    judged = judge_window(relative, one(1.0, 40), one(1.0, 400))
    assert judged.thin
    assert "the baseline's 40 requests" in judged.reason


def test_thin_windows_count_toward_no_limit() -> None:
    thin = Judgement("c", "Inconclusive", "thin: 3", thin=True)
    passed = Judgement("d", "Pass", "fine")
    assert round_outcome([thin, passed])[0] == "Thin"
    assert round_outcome([thin, Judgement("e", "Inconclusive", "no data")])[0] == "Inconclusive"
    counts = tally(AnalysisCounts(), "Thin")
    assert (counts.thin, counts.inconclusive, counts.last_outcome) == (1, 0, "Thin")


# -- the evidence the promotion counts ------------------------------------------------------------


def result(
    requests: float, step: int = 1, weight: int = 5, *, verdict: str = "Pass", **counted: Any
) -> CriterionResult:
    return CriterionResult.model_validate(
        {
            "criterion": "errors",
            "step": step,
            "weight": weight,
            "verdict": verdict,
            "requests": RequestCounts(candidate=requests, **counted).model_dump(),
            "thin": verdict == "Inconclusive" and requests > 0,
            "reason": "r",
            "at": T0,
        }
    )


def test_evidence_adds_every_judged_window_and_skips_windows_without_data() -> None:
    rows = record([], [result(30, verdict="Inconclusive")])  # thin: counted
    rows = record(rows, [result(40), result(0, verdict="Inconclusive")])  # no data: skipped
    rows = record(rows, [result(50, step=2, weight=25, candidate_errors=1)])
    by_step = {row.step: row for row in rows}
    assert (by_step[1].candidate_requests, by_step[1].windows, by_step[1].thin_windows) == (
        70,
        2,
        1,
    )
    assert by_step[2].candidate_errors == 1
    errors = criterion(name="errors", metric="error_ratio", absolute={"max": 0.01})
    assert shortfalls([errors], rows) == []  # 120 >= 100: enough
    assert shortfalls([errors], rows[:1]) == [
        "errors was judged on 70 of the candidate's requests; an error ratio limited to 0.01 "
        "needs 100 requests (1/limit)"
    ]


def test_a_sequential_count_spans_its_step_and_replaces_it() -> None:
    rows = record([], [result(40, spans_step=True)])
    rows = record(rows, [result(90, spans_step=True)])
    assert rows[0].candidate_requests == 90


# -- the promotion's gate, through the state machine ----------------------------------------------


def quiet_spec(**analysis: Any) -> TrialSpec:
    return TrialSpec.model_validate(
        {
            "baseline": {"deploymentRef": {"name": "gpu"}, "instanceType": "g5.xlarge"},
            "candidate": {"image": "neuron:1", "instanceType": "inf2.xlarge"},
            "traffic": {"router": "gatewayapi", "gatewayapi": {"httpRouteRef": {"name": "r"}}},
            "steps": [
                {"weight": 5, "duration": "1m"},
                {"weight": 25, "duration": "1m"},
                {"weight": 50, "duration": "1m"},
            ],
            "analysis": {
                "interval": "1m",
                "prometheus": {"address": "http://p:9090"},
                "criteria": [ERRORS | {"name": "errors"}],
                "onInconclusive": "rollback",
                **analysis,
            },
            "promotion": {"bakeTime": "1m"},
        }
    )


ROUTING = original_routing(
    {
        "router": "gatewayapi",
        "httpRoute": {
            "name": "r",
            "namespace": "serving",
            "ruleIndex": 0,
            "backendRefs": [{"name": "gpu", "port": 8000, "weight": 1}],
        },
    }
)


def run(spec: TrialSpec, rps: float, ticks: int = 12, **late: Any) -> TrialStatus:
    """Tick once a minute; each measurement judged on rps x weight x 60 requests, none failed."""
    status, now = TrialStatus(), T0
    for n in range(ticks):
        now += timedelta(minutes=1)
        measurement = None
        if measurement_due(spec, status, now) and status.phase not in (None, "Pending"):
            weight = status.canary_weight or 0
            served = rps * weight / 100 * 60
            thin = served < 100
            one_result = result(
                served,
                step=0 if status.phase == "BakingIn" else status.step or 0,
                weight=weight,
                verdict="Inconclusive" if thin else "Pass",
                candidate_errors=0,
            )
            measurement = Measurement("Thin" if thin else "Pass", "errors", (one_result,))
        action = late.get("actions", {}).get(n)
        observation = Observation(
            now=now,
            generation=1,
            routing=ROUTING,
            candidate_available=True,
            candidate_available_replicas=1,
            measurement=measurement,
            action=action,
        )
        status = decide(spec, status, observation).status
        if status.phase in ("Promoted", "RolledBack"):
            break
    return status


def test_a_quiet_service_is_never_promoted_on_a_handful_of_requests() -> None:
    status = run(quiet_spec(), rps=0.5)  # 1.5 + 7.5 + 15 + 30 requests: 54
    assert status.phase == "RolledBack"
    assert status.decision is not None
    assert status.decision.reason_code == INCONCLUSIVE
    assert "not enough evidence to promote" in status.decision.reason
    assert "needs 100 requests" in status.decision.reason


def test_a_quiet_service_with_pause_waits_for_evidence_at_full_traffic() -> None:
    status = run(quiet_spec(onInconclusive="pause"), rps=0.5, ticks=9)
    assert (status.phase, status.pause_reason) == ("Paused", "Inconclusive")
    assert status.canary_weight == 100


def test_a_busy_service_is_promoted_and_the_decision_says_on_what() -> None:
    status = run(quiet_spec(), rps=20)
    assert status.phase == "Promoted"
    assert status.decision is not None
    assert status.decision.reason_code == PROMOTED
    assert "judged on the candidate's requests: errors" in status.decision.reason
    assert "(needs 100)" in status.decision.reason


# -- the forecast before anything changes ---------------------------------------------------------


def test_the_forecast_says_when_the_steps_cannot_gather_the_evidence() -> None:
    spec = quiet_spec(
        criteria=[
            P99 | {"name": "latency"},
            ERRORS | {"name": "errors", "fromWeight": 25},
            {"name": "busy", "metric": "accelerator_utilization", "absolute": {"min": 0.1}},
        ]
    )
    # 1.5 requests/s: steps 5%, 25%, 50% of 1m bring 0.075x60 + 0.375x60 + 0.75x60 = 72; the
    # 1m bake 90; 162 in all, enough for 100. Errors from 25% only: 22.5 + 45 + 90 = 157.5.
    assert expected_requests(spec, 1.5, spec.analysis.criteria[0]) == pytest.approx(162)
    assert expected_requests(spec, 1.5, spec.analysis.criteria[1]) == pytest.approx(157.5)
    assert evidence_forecast(spec, 1.5) == []
    # 0.5 requests/s: 24 from the steps + 30 from the bake; 76 more need a bake of 152 s: 3m.
    assert evidence_forecast(spec, 0.5) == [
        "at 0.5 requests/s these steps and the bake bring the candidate about 54 requests; "
        "latency: a p99 needs 100 requests: make promotion.bakeTime at least 3m (or the steps "
        "longer)",
        "at 0.5 requests/s these steps and the bake bring the candidate about 52 requests; "
        "errors: an error ratio limited to 0.01 needs 100 requests (1/limit): make "
        "promotion.bakeTime at least 3m (or the steps longer)",
    ]


def test_preflight_warns_once_and_the_trial_still_starts() -> None:
    spec = quiet_spec()
    status = TrialStatus(phase="Preflight", criteria_hash=criteria_hash(spec), started_at=T0)
    seen = Observation(now=T0, generation=1, routing=ROUTING, baseline_request_rate=0.2)
    result = decide(spec, status, seen)
    assert result.status.phase == "Progressing", "a warning, not a refusal"
    warned = [c for c in result.status.conditions or [] if c.type == "EvidenceExpected"]
    assert [(c.status, c.reason) for c in warned] == [("False", "TooLittleTraffic")]
    assert "about 22 requests" in warned[0].message
    assert [e.reason for e in result.events if e.type == "Warning"] == ["TooLittleTraffic"]
    enough = decide(spec, status, replace(seen, baseline_request_rate=20.0)).status
    said = [(c.status, c.reason) for c in enough.conditions or [] if c.type == "EvidenceExpected"]
    assert said == [("True", "EnoughTraffic")]


# -- thin windows pooled ---------------------------------------------------------------------------


def window_row(served: float, p99: float, base_served: float, base_p99: float) -> CriterionEvidence:
    return CriterionEvidence(
        criterion="c", step=1, weight=5, windows=1, thin_windows=1,
        candidate_requests=served, baseline_requests=base_served,
        candidate_value_sum=p99 * served, baseline_value_sum=base_p99 * base_served,
    )  # fmt: skip


RELATIVE_P99 = {"metric": "latency_p99", "relative": {"max": 1.2}}


def test_a_thin_window_is_judged_on_the_steps_windows_pooled_once_they_are_enough() -> None:
    relative = criterion(**RELATIVE_P99)
    before = [window_row(40, 5.0, 700, 2.8), window_row(40, 4.6, 700, 3.0)]
    # 40 + 40 + 30 = 110 requests; (200 + 184 + 30 x 5.2) / 110 = 4.909 against
    # (1960 + 2100 + 2100) / 2100 = 2.933: 1.67x, beyond 1.2.
    judged = judge_window(relative, one(3.0, 700), one(5.2, 30), step=before)
    assert (judged.verdict, judged.thin) == ("Fail", False)
    assert "pooled over 110 of the candidate's requests: 4.909 is 1.67x" in judged.reason
    assert judged.candidate == 5.2, "the window keeps its own figure"
    alone = judge_window(relative, one(3.0, 700), one(5.2, 30), step=before[:1])
    assert alone.thin, "70 requests pooled are still fewer than 100"


def test_the_promotion_judges_a_criterion_never_judged_on_enough_on_everything_pooled() -> None:
    relative = criterion(**RELATIVE_P99)
    thin_rows = [window_row(30, 5.0, 600, 2.8), window_row(80, 5.0, 100, 2.8)]
    assert pooled_failures([relative], thin_rows) == [
        "c: pooled over 110 of the candidate's requests: 5 is 1.79x the baseline's 2.8 (limit "
        "max 1.2)"
    ]
    good = [window_row(30, 2.5, 600, 2.8), window_row(80, 2.9, 100, 2.8)]
    assert pooled_failures([relative], good) == []
    judged_once = [*thin_rows, thin_rows[0].model_copy(update={"thin_windows": 0, "step": 2})]
    assert pooled_failures([relative], judged_once) == [], "judged on enough in a step already"


def test_a_regression_seen_only_in_thin_windows_is_rolled_back_at_the_promotion() -> None:
    spec = quiet_spec(criteria=[RELATIVE_P99 | {"name": "c"}])
    status, now = TrialStatus(), T0
    for _ in range(12):
        now += timedelta(minutes=1)
        measurement = None
        if measurement_due(spec, status, now) and status.phase not in (None, "Pending"):
            weight = status.canary_weight or 0
            thin = CriterionResult(
                criterion="c", step=0 if status.phase == "BakingIn" else status.step or 0,
                weight=weight, verdict="Inconclusive", thin=True, candidate=5.0, baseline=2.8,
                requests=RequestCounts(candidate=30, baseline=300), reason="thin", at=now,
            )  # fmt: skip
            measurement = Measurement("Thin", "c: thin", (thin,))
        seen = Observation(now=now, generation=1, routing=ROUTING, candidate_available=True,
                           candidate_available_replicas=1, measurement=measurement)  # fmt: skip
        status = decide(spec, status, seen).status
        if status.phase == "RolledBack":
            break
    assert status.decision is not None
    assert status.decision.reason_code == "CriterionFailed"
    assert "pooled over 120 of the candidate's requests" in status.decision.reason


def test_a_regression_seen_only_in_thin_windows_of_the_steps_is_rolled_back_before_promoting() -> (
    None
):
    """Pooled over the steps the thin windows already hold the need (3 x 40 >= 100): the trial
    rolls back at the last step's end, before the candidate is scaled for all traffic."""
    spec = quiet_spec(criteria=[RELATIVE_P99 | {"name": "c"}])
    status, now, phases = TrialStatus(), T0, []
    for _ in range(12):
        now += timedelta(minutes=1)
        measurement = None
        if measurement_due(spec, status, now) and status.phase not in (None, "Pending"):
            thin = CriterionResult(
                criterion="c", step=status.step or 0, weight=status.canary_weight or 0,
                verdict="Inconclusive", thin=True, candidate=5.5, baseline=2.8,
                requests=RequestCounts(candidate=40, baseline=300), reason="thin", at=now,
            )  # fmt: skip
            measurement = Measurement("Thin", "c: thin", (thin,))
        seen = Observation(now=now, generation=1, routing=ROUTING, candidate_available=True,
                           candidate_available_replicas=1, measurement=measurement)  # fmt: skip
        status = decide(spec, status, seen).status
        phases.append(status.phase)
        if status.phase == "RolledBack":
            break
    assert status.decision is not None
    assert status.decision.reason_code == "CriterionFailed"
    # 5.5 s is 1.96x the baseline's 2.8 s, 1.64 times the 1.2 limit: a clear breach.
    assert "pooled over 120 of the candidate's requests" in status.decision.reason
    assert "(the steps)" in status.decision.reason
    assert "Promoting" not in phases
    assert status.promotion is None


def test_errors_that_crept_up_in_the_bake_are_never_promoted() -> None:
    errors = criterion(name="errors", metric="error_ratio", absolute={"max": 0.01})
    rows = record(
        [], [result(60, candidate_errors=0), result(67, step=0, weight=100, candidate_errors=4)]
    )
    # P(at least 4 of 67 | 1%) = 1 - sum_{k<4} C(67, k) 0.01^k 0.99^(67-k) = 0.0046.
    expected = 1 - sum(math.comb(67, k) * 0.01**k * 0.99 ** (67 - k) for k in range(4))
    assert expected == pytest.approx(0.0046, abs=1e-4)
    assert pooled_failures([errors], rows, alpha=0.01) == [
        "errors: 4 of the candidate's 67 requests in the bake failed; under an error ratio of "
        "0.01 that happens with probability 0.0046"
    ]
    one = record([], [result(67, step=0, weight=100, candidate_errors=1)])
    assert pooled_failures([errors], one, alpha=0.01) == [], "1 of 67 may be chance (p = 0.49)"


def test_errors_above_their_limit_over_the_trial_hold_the_promotion_back_though_within_chance() -> (
    None
):
    """Errors creeping up to 3%: 7 of 244 against a 1% limit is p = 0.013, no failure at alpha
    0.01, and no promotion either. Clopper-Pearson's 95% interval of 7/244 is 1.2% to 5.8%."""
    errors = criterion(name="errors", metric="error_ratio", absolute={"max": 0.01})
    rows = [
        CriterionEvidence(criterion="errors", step=2, weight=25, windows=2,
                          candidate_requests=100, candidate_errors=1),
        CriterionEvidence(criterion="errors", step=0, weight=100, windows=2,
                          candidate_requests=144, candidate_errors=6),
    ]  # fmt: skip
    short = shortfalls([errors], rows)
    assert short == [
        "errors: 7 of the candidate's 244 requests failed (2.9%; 95% interval 1.2% to 5.8%), "
        "above its limit of 0.01: not shown within it"
    ]
    assert error_ratio_p_value(7, 244, 0.01) == pytest.approx(0.013, abs=0.001)
    within = [row.model_copy(update={"candidate_errors": 0}) for row in rows]
    assert shortfalls([errors], within) == []
