"""The judge, table-driven: every outcome of every kind of criterion, with hand-computed values."""

from __future__ import annotations

from typing import Any

import pytest

from acceltrial.api.spec import AnalysisSpec, Criterion
from acceltrial.api.status import AnalysisCounts
from acceltrial.engine.analysis import (
    Judgement,
    Reading,
    applicable,
    assess,
    judge,
    round_outcome,
    tally,
)
from acceltrial.engine.weighing import judge_window

NAN, INF = float("nan"), float("inf")


def criterion(**fields: Any) -> Criterion:
    return Criterion.model_validate({"name": "c", "metric": "latency_p99", **fields})


def one(value: float, requests: float | None = None) -> Reading:
    return Reading(values=(value,), series=1, requests=requests)


ABSOLUTE_MAX = {"absolute": {"max": 0.005}}
ABSOLUTE_RANGE = {"absolute": {"min": 0.4, "max": 0.9}}
RELATIVE = {"relative": {"max": 1.10}}
RELATIVE_MIN = {"relative": {"min": 0.9}}

CASES = [
    # (criterion fields, baseline, candidate, verdict, reason fragment)
    (ABSOLUTE_MAX, None, one(0.004), "Pass", "0.004 is within max 0.005"),
    (ABSOLUTE_MAX, None, one(0.005), "Pass", "within max 0.005"),  # the limit is inclusive
    (ABSOLUTE_MAX, None, one(0.0051), "Fail", "0.0051 is above max 0.005"),
    (ABSOLUTE_RANGE, None, one(0.39), "Fail", "0.39 is below min 0.4"),
    (ABSOLUTE_RANGE, None, one(0.5), "Pass", "within min 0.4 and max 0.9"),
    # 0.55 / 0.5 = 1.1 exactly: passes; 0.56 / 0.5 = 1.12 fails.
    (RELATIVE, one(0.5), one(0.55), "Pass", "1.1x the baseline's 0.5, within max 1.1"),
    (RELATIVE, one(0.5), one(0.56), "Fail", "0.56 is 1.12x the baseline's 0.5 (limit max 1.1)"),
    (RELATIVE_MIN, one(200.0), one(170.0), "Fail", "0.85x"),
    (RELATIVE, one(0.0), one(0.0), "Pass", "1x the baseline's 0"),
    (RELATIVE, one(0.0), one(0.01), "Inconclusive", "the baseline is 0"),
    # No data is never a pass.
    (ABSOLUTE_MAX, None, Reading(), "Inconclusive", "no data for the candidate"),
    (RELATIVE, Reading(), one(0.5), "Inconclusive", "no data for the baseline"),
    (ABSOLUTE_MAX, None, one(NAN), "Inconclusive", "the candidate's value is NaN"),
    (RELATIVE, one(NAN), one(0.5), "Inconclusive", "the baseline's value is NaN"),
    (ABSOLUTE_MAX, None, one(INF), "Inconclusive", "the candidate's value is +inf"),
    (ABSOLUTE_MAX, None, one(-INF), "Inconclusive", "the candidate's value is -inf"),
    (
        ABSOLUTE_MAX,
        None,
        Reading(values=(0.001, 0.002), series=2),
        "Inconclusive",
        "returned 2 series where one was expected",
    ),
    (ABSOLUTE_MAX, None, Reading(error="HTTP 400: bad_data"), "Inconclusive", "query failed"),
    (RELATIVE, None, one(0.5), "Inconclusive", "the baseline was not measured"),
    ({**ABSOLUTE_MAX, "minRequests": 100}, None, one(0.001, 99), "Inconclusive", "thin: 99 of"),
    ({**ABSOLUTE_MAX, "minRequests": 100}, None, one(0.001, 100), "Pass", "within"),
    ({**ABSOLUTE_MAX, "minRequests": 100}, None, one(0.001), "Inconclusive", "request count"),
    ({**RELATIVE, "minRequests": 10}, one(0.5, 5), one(0.5, 50), "Inconclusive", "baseline's 5"),
    (
        {"metric": "cost_per_million_tokens", "relative": {"max": 0.8}},
        None,
        None,
        "Inconclusive",
        "judged from the cost model",
    ),
]


@pytest.mark.parametrize(
    ("fields", "baseline", "candidate", "verdict", "reason"),
    CASES,
    ids=[f"{i:02d}-{c[3]}" for i, c in enumerate(CASES)],
)
def test_judge(
    fields: dict[str, Any],
    baseline: Reading | None,
    candidate: Reading | None,
    verdict: str,
    reason: str,
) -> None:
    judgement = judge_window(criterion(**fields), baseline, candidate)
    assert judgement.verdict == verdict
    assert reason in judgement.reason


def test_errors_are_marked_for_the_error_limit() -> None:
    judgement = judge(criterion(**ABSOLUTE_MAX), None, Reading(error="timeout"))
    assert judgement.errored
    assert not judge(criterion(**ABSOLUTE_MAX), None, Reading()).errored


STATISTICAL = {"metric": "latency_mean", "statistical": {"direction": "increase"}}
BASE = tuple(0.30 + 0.001 * i for i in range(20))  # median 0.3095


@pytest.mark.parametrize(
    ("fields", "candidate", "verdict", "reason"),
    [
        (STATISTICAL, tuple(v + 0.05 for v in BASE), "Fail", "significantly higher"),
        (STATISTICAL, BASE, "Pass", "no regression"),
        (STATISTICAL, tuple(v - 0.05 for v in BASE), "Pass", "no regression"),
        (
            {**STATISTICAL, "statistical": {"direction": "decrease"}},
            tuple(v - 0.05 for v in BASE),
            "Fail",
            "significantly lower",
        ),
        (
            {**STATISTICAL, "statistical": {"direction": "either"}},
            tuple(v - 0.05 for v in BASE),
            "Fail",
            "significantly lower",
        ),
        # +0.01 is ~3% of the baseline median: significant, but within allowedChange 5%.
        (
            {**STATISTICAL, "statistical": {"direction": "increase", "allowedChange": 0.05}},
            tuple(v + 0.01 for v in BASE),
            "Pass",
            "allowed change 5%",
        ),
        (STATISTICAL, BASE[:9], "Inconclusive", "candidate 9 (need 10 each)"),
        ({**STATISTICAL, "minSamples": 5}, BASE[:9], "Pass", "no regression"),
        (STATISTICAL, (*BASE[:9], NAN, INF), "Inconclusive", "candidate 9"),
    ],
)
def test_statistical(
    fields: dict[str, Any], candidate: tuple[float, ...], verdict: str, reason: str
) -> None:
    judgement = judge(criterion(**fields), Reading(BASE, series=1), Reading(candidate, series=1))
    assert judgement.verdict == verdict, judgement.reason
    assert reason in judgement.reason


def test_statistical_needs_one_series_each() -> None:
    judgement = judge(criterion(**STATISTICAL), Reading(BASE, series=2), Reading(BASE, series=1))
    assert judgement.verdict == "Inconclusive"
    assert "2 series" in judgement.reason


def verdicts(*kinds: str) -> list[Judgement]:
    return [
        Judgement(f"c{i}", "Inconclusive" if k == "Error" else k, k.lower(), errored=k == "Error")  # type: ignore[arg-type]
        for i, k in enumerate(kinds)
    ]


@pytest.mark.parametrize(
    ("kinds", "outcome"),
    [
        (("Pass", "Pass"), "Pass"),
        (("Pass", "Inconclusive"), "Inconclusive"),
        (("Inconclusive", "Error"), "Error"),
        (("Error", "Fail", "Pass"), "Fail"),
        ((), "Inconclusive"),
    ],
)
def test_the_worst_criterion_decides(kinds: tuple[str, ...], outcome: str) -> None:
    assert round_outcome(verdicts(*kinds))[0] == outcome


def test_counts_and_limits_like_argo_rollouts() -> None:
    spec = AnalysisSpec.model_validate(
        {
            "prometheus": {"address": "http://p:9090"},
            "criteria": [{"name": "c", "metric": "error_ratio", "absolute": {"max": 1}}],
            "failureLimit": 1,
            "inconclusiveLimit": 1,
            "consecutiveErrorLimit": 2,
        }
    )
    counts = AnalysisCounts()
    counts = tally(counts, "Fail")
    assert assess(counts, spec) == "Running"  # 1 failure is within failureLimit 1
    assert assess(tally(counts, "Fail"), spec) == "Failed"
    errors = tally(tally(tally(AnalysisCounts(), "Error"), "Error"), "Error")
    assert (errors.consecutive_errors, assess(errors, spec)) == (3, "Errored")
    assert tally(errors, "Pass").consecutive_errors == 0
    inconclusive = tally(tally(AnalysisCounts(), "Inconclusive"), "Inconclusive")
    assert assess(inconclusive, spec) == "Inconclusive"
    assert inconclusive.measurements == 2


def test_from_weight_gates_criteria() -> None:
    spec = AnalysisSpec.model_validate(
        {
            "prometheus": {"address": "http://p:9090"},
            "criteria": [
                {"name": "early", "metric": "error_ratio", "absolute": {"max": 1}},
                {"name": "late", "metric": "latency_p99", "relative": {"max": 1}, "fromWeight": 25},
            ],
        }
    )
    assert [c.name for c in applicable(spec, 5)] == ["early"]
    assert [c.name for c in applicable(spec, 25)] == ["early", "late"]
