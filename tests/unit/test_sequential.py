"""analysis.mode: sequential: the queries it plans, its verdicts on counts, and its error bound."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np

from acceltrial.api.spec import AnalysisSpec
from acceltrial.engine.analysis import Reading, judge, plan
from acceltrial.engine.metrics import MetricRequest, PresetMetric, VariantTarget
from acceltrial.engine.sequential import error_counts, latency_counts
from acceltrial.engine.weighing import judge_window
from acceltrial.providers.metrics.prometheus import Series
from acceltrial.providers.metrics.prometheus.reader import promql, to_reading

TARGETS = {
    "baseline": VariantTarget("baseline", "serving", "llm-gpu", ("llm-gpu-1",), "gpu"),
    "candidate": VariantTarget("candidate", "serving", "llm-neuron", ("llm-neuron-1",), "neuron"),
}
BOUNDS = ("1.0", "2.5", "5.0", "+Inf")


def analysis(mode: str = "sequential", **criterion: Any) -> AnalysisSpec:
    return AnalysisSpec.model_validate(
        {
            "prometheus": {"address": "http://prometheus:9090"},
            "criteria": [{"name": "c", "metric": "latency_p99", **criterion}],
            "mode": mode,
        }
    )


INCREASE = {"statistical": {"direction": "increase"}}


def latency_reading(per_interval: list[list[float]]) -> Reading:
    """Counters of a histogram from per-interval counts per bucket (le order of BOUNDS)."""
    cumulative = np.cumsum(np.cumsum(np.array([[0.0] * 4, *per_interval]), axis=0), axis=1)
    # per row: counts within each bucket -> cumulative over le, then over time
    parts = tuple(
        (le, tuple((15.0 * t, float(cumulative[t][i])) for t in range(len(cumulative))))
        for i, le in enumerate(BOUNDS)
    )
    return Reading(series=len(parts), parts=parts)


def test_sequential_mode_plans_raw_latency_counters_which_prometheus_splits_by_le() -> None:
    planned = plan(analysis(**INCREASE), weight=5)

    assert [(q.variant, q.counters) for q in planned] == [
        ("baseline", "latency"),
        ("candidate", "latency"),
    ]
    assert promql(planned[1], TARGETS["candidate"], "vllm", "1m") == (
        'sum by (le) (vllm:e2e_request_latency_seconds_bucket{namespace="serving", '
        'pod=~"^(?:llm-neuron-1)$"})'
    )


def test_fixed_mode_and_decrease_criteria_keep_their_value_queries() -> None:
    fixed = plan(analysis("fixed", **INCREASE), weight=5)
    decrease = plan(analysis(statistical={"direction": "decrease"}), weight=5)

    for request in fixed + decrease:
        assert request.counters is None
        assert "histogram_quantile" in promql(request, TARGETS[request.variant], "vllm", "1m")


def test_a_candidate_as_fast_as_the_baseline_passes() -> None:
    spec = analysis(**INCREASE)
    same = latency_reading([[5, 10, 4, 1]] * 20)

    verdict = judge(spec.criteria[0], same, same, spec)

    assert verdict.verdict == "Pass", verdict.reason


def test_a_clearly_slower_candidate_fails_with_the_evidence_in_words() -> None:
    spec = analysis(**INCREASE)
    baseline = latency_reading([[50, 100, 45, 5]] * 8)  # 5% slower than 5 s
    candidate = latency_reading([[0, 5, 5, 10]] * 8)  # half slower than 5 s

    verdict = judge(spec.criteria[0], baseline, candidate, spec)

    assert verdict.verdict == "Fail"
    assert "sequential test over 8 intervals" in verdict.reason
    assert "above 1x the baseline's" in verdict.reason


def test_one_burst_in_one_interval_does_not_fail_the_step() -> None:
    spec = analysis(**INCREASE)
    baseline = latency_reading([[50, 100, 45, 5]] * 8)
    candidate = latency_reading([[10, 20, 9, 1]] * 7 + [[0, 0, 0, 40]])

    assert judge(spec.criteria[0], baseline, candidate, spec).verdict == "Pass"


def test_no_candidate_requests_is_inconclusive_never_a_pass() -> None:
    spec = analysis(**INCREASE)
    baseline = latency_reading([[5, 10, 4, 1]] * 4)

    for candidate in (latency_reading([[0, 0, 0, 0]] * 4), Reading(series=0)):
        verdict = judge(spec.criteria[0], baseline, candidate, spec)
        assert verdict.verdict == "Inconclusive"
        assert "no requests counted for the candidate" in verdict.reason


def test_errors_against_an_absolute_max_use_the_candidate_alone() -> None:
    spec = analysis(metric="error_ratio", absolute={"max": 0.01})
    planned = plan(spec, weight=5)
    ok = [(15.0 * t, 100.0 * t) for t in range(10)]
    bad = [(15.0 * t, 10.0 * t) for t in range(10)]  # 10% errors

    status = (("2xx", tuple(ok)), ("5xx", tuple(bad)))
    verdict = judge(spec.criteria[0], None, Reading(series=2, parts=status), spec)

    assert [q.variant for q in planned] == ["candidate"]
    assert verdict.verdict == "Fail"
    assert "an error ratio of 0.01" in verdict.reason


def test_a_5xx_series_created_by_its_first_errors_counts_them() -> None:
    """vLLM exports ``status="5xx"`` only from the first 5xx: a series that begins inside the
    window counted up from zero, so its first value is errors of the window. Here the build fails
    20% of 40 requests a scrape, and the window sees the 5xx series twice: 16 errors of 80
    requests in the last two scrapes, not 8."""
    spec = analysis(metric="error_ratio", absolute={"max": 0.01})
    ok = tuple((3.0 * t, 32.0 * t) for t in range(3))
    errors = ((3.0, 8.0), (6.0, 16.0))  # created at the first scrape after its first error
    counts = error_counts({"2xx": ok, "5xx": errors})

    assert sum(counts.events["errors"].values()) == 16.0
    assert sum(counts.requests.values()) == 64.0 + 16.0
    reading = Reading(series=2, parts=(("2xx", ok), ("5xx", errors)))
    assert judge(spec.criteria[0], None, reading, spec).verdict == "Pass", "two capped intervals"
    verdict = judge_window(spec.criteria[0], None, reading, spec)
    assert verdict.verdict == "Fail", "16 of 80 at a 1% limit is no chance"
    assert "16 of the candidate's 80 requests in this step failed" in verdict.reason


def test_a_few_errors_in_a_short_step_do_not_fail_it() -> None:
    spec = analysis(metric="error_ratio", absolute={"max": 0.01})
    ok = tuple((3.0 * t, 39.0 * t) for t in range(3))
    errors = tuple((3.0 * t, 1.0 * t) for t in range(3))  # 2 of 80: likely enough at 1%
    reading = Reading(series=2, parts=(("2xx", ok), ("5xx", errors)))

    assert judge_window(spec.criteria[0], None, reading, spec).verdict == "Pass"


def test_a_5xx_series_present_from_the_window_start_is_differenced() -> None:
    ok = tuple((3.0 * t, 100.0 + 32.0 * t) for t in range(3))
    errors = tuple((3.0 * t, 50.0 + 8.0 * t) for t in range(3))

    counts = error_counts({"2xx": ok, "5xx": errors})

    assert sum(counts.events["errors"].values()) == 16.0, "its first value is from before"


def test_a_new_pods_first_requests_count_when_its_series_began_after_the_range() -> None:
    """A candidate pod's status series appears with its first response: at 1 request/s its
    first window of a step holds one or two scrapes of it, and differencing those lost its
    requests ("no requests counted for the candidate"). Known to begin after the range's start
    (``since``), it counts from zero, as the vLLM instrumentator's counter did."""
    since = 100.0
    ok = ((102.0, 2.0), (103.0, 3.0))  # created by its first request, after the step began

    assert sum(error_counts({"2xx": ok}).requests.values()) == 1.0, "without the range's start"
    counts = error_counts({"2xx": ok}, since)

    assert sum(counts.requests.values()) == 3.0
    spec = analysis(metric="error_ratio", absolute={"max": 0.01})
    reading = Reading(series=1, parts=(("2xx", ok),), since=since)
    judged = judge(spec.criteria[0], None, reading, spec)
    assert judged.verdict == "Pass"
    assert judged.candidate_requests == 3.0


def test_a_series_there_at_the_range_start_is_differenced_whatever_its_value() -> None:
    ok = ((100.0, 50.0), (101.0, 52.0), (102.0, 53.0))

    assert sum(error_counts({"2xx": ok}, since=100.0).requests.values()) == 3.0
    assert sum(latency_counts({"+Inf": ok}, since=100.0).requests.values()) == 3.0


def test_a_histogram_first_seen_in_the_range_counts_from_zero() -> None:
    """A pod whose first scrape comes after the step began (created by the scale-up, or found
    late by Prometheus) served its first counts in the range."""
    late = {"1.0": ((104.0, 1.0), (105.0, 2.0)), "+Inf": ((104.0, 2.0), (105.0, 4.0))}

    counts = latency_counts(late, since=100.0)

    assert sum(counts.requests.values()) == 4.0
    assert sum(counts.events["slower than 1.0 s"].values()) == 2.0


def test_to_reading_keeps_each_series_by_the_split_label() -> None:
    query = MetricRequest("c", "candidate", PresetMetric("latency_p99"), counters="latency")
    series = [Series({"le": "1.0"}, ((0.0, 1.0), (15.0, 2.0))), Series({"le": "+Inf"}, ())]

    reading = to_reading(series, query, since=datetime.fromtimestamp(0.0, UTC))

    assert reading.parts == (("1.0", ((0.0, 1.0), (15.0, 2.0))), ("+Inf", ()))
    assert reading.series == 2
    assert reading.since == 0.0, "the range's start, to tell series created in it"


def test_a_b_candidates_within_tolerance_fail_at_most_alpha_of_steps() -> None:
    spec = analysis(**INCREASE).model_copy(update={"alpha": 0.05})
    rng = np.random.default_rng(7)
    probabilities = [0.3, 0.5, 0.15, 0.05]
    failed = 0
    runs = 100
    for _ in range(runs):
        baseline = rng.multinomial(190, probabilities, size=30).tolist()
        candidate = rng.multinomial(10, probabilities, size=30).tolist()
        looks = range(4, 31, 4)  # a measurement every minute of a 7.5 minute step
        failed += any(
            judge(
                spec.criteria[0],
                latency_reading(baseline[:n]),
                latency_reading(candidate[:n]),
                spec,
            ).verdict
            == "Fail"
            for n in looks
        )
    assert failed / runs <= 0.05 + 0.03  # alpha, with room for 100 runs
