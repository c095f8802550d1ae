"""A measurement's readings are put to the metrics source together: one question per window and
kind (values at the window's end, samples across it), a user's own query apart so a query the
backend refuses fails only its criterion (issue 19: 20 queries a measurement for 3 criteria)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from acceltrial.api.spec import TrialSpec
from acceltrial.api.status import TrialStatus
from acceltrial.engine.analysis import MeasurementWindow, Reading
from acceltrial.engine.measurement import measurement_requests, plan_measurement
from acceltrial.engine.metrics import MetricRequest, PresetMetric, Variant, VariantTarget
from acceltrial.providers.metrics.port import (
    MAX_ASKS_PER_QUESTION,
    MetricsError,
    Retry,
    collect,
)
from tests.unit.memory_metrics import MemorySource

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
TARGETS: dict[Variant, VariantTarget] = {
    "baseline": VariantTarget("baseline", "serving", "llama3-gpu", ("llama3-gpu-1",), "gpu"),
    "candidate": VariantTarget("candidate", "serving", "llama3-c", ("llama3-c-1",), "neuron"),
}
NO_WAIT = Retry(sleep=lambda _: None)
OWN_QUERY = 'sum(rate(my_errors{pod=~"{{pods}}"}[{{interval}}]))'


def spec(mode: str, *criteria: dict[str, object]) -> TrialSpec:
    return TrialSpec.model_validate(
        {
            "baseline": {"deploymentRef": {"name": "llama3-gpu"}, "instanceType": "g5.2xlarge"},
            "candidate": {"image": "neuron:1", "instanceType": "inf2.8xlarge", "neuronCores": 2},
            "traffic": {"router": "gatewayapi", "gatewayapi": {"httpRouteRef": {"name": "r"}}},
            "steps": [{"weight": 25, "duration": "5m"}],
            "analysis": {
                "mode": mode,
                "prometheus": {"address": "http://prometheus:9090"},
                "criteria": list(criteria),
            },
        }
    )


EXAMPLE = spec(
    "fixed",
    {"name": "p99", "metric": "latency_p99", "relative": {"max": 1.1}},
    {"name": "errors", "metric": "error_ratio", "absolute": {"max": 0.005}},
    {
        "name": "mean",
        "metric": "latency_mean",
        "statistical": {"direction": "increase", "allowedChange": 0.05},
    },
)
STEP = TrialStatus(phase="Progressing", step=1, canary_weight=25, step_started_at=NOW)


def run(trial: TrialSpec, status: TrialStatus, source: MemorySource) -> int:
    planned = plan_measurement(trial, status, NOW + timedelta(minutes=2))
    requests = measurement_requests(trial.analysis, planned.weight)
    return collect(requests, source, TARGETS, planned.window, NO_WAIT).queries


def test_three_criteria_and_every_cost_input_take_two_questions() -> None:
    """Values at the window's end (two criteria, 18 cost inputs) in one, the rank-sum test's
    samples in the other: at most criteria x 2, whatever the cost inputs."""
    source = MemorySource()
    assert run(EXAMPLE, STEP, source) == source.questions == 2
    assert len(source.asked) >= 20, "every reading was still asked for"


def test_sequential_counters_share_the_question_of_their_window() -> None:
    trial = spec(
        "sequential",
        {"name": "p99", "metric": "latency_p99", "statistical": {"direction": "increase"}},
        {"name": "errors", "metric": "error_ratio", "statistical": {"direction": "increase"}},
    )
    source = MemorySource()
    assert run(trial, STEP, source) == 2
    counters = {a.request.counters for a in source.asked if a.request.counters}
    assert counters == {"latency", "errors"}


def test_during_the_bake_the_baseline_is_a_question_of_its_own() -> None:
    """At 100% the baseline is read over its last window of traffic: another time, another
    question."""
    baking = TrialStatus(phase="BakingIn", step=1, canary_weight=100, step_started_at=NOW)
    source = AnsweringEverything()
    questions = run(EXAMPLE, baking, source)
    ends = {a.end for a in source.asked if a.request.variant == "baseline"}
    assert ends == {NOW}
    assert questions == 4  # both kinds, for each of the two windows


class AnsweringEverything(MemorySource):
    def _reading(self, request: MetricRequest, target: VariantTarget) -> Reading:
        return Reading(values=(1.0,), series=1)


def test_a_refused_own_query_fails_only_its_own_criterion() -> None:
    class Refused(MetricsError):
        temporary = False

    trial = spec(
        "fixed",
        {"name": "p99", "metric": "latency_p99", "relative": {"max": 1.1}},
        {"name": "mine", "query": OWN_QUERY, "relative": {"max": 1.1}},
    )
    source = MemorySource(
        {("latency_p99", v): Reading(values=(1.0,), series=1) for v in TARGETS},
        failing={OWN_QUERY: Refused("bad_data: parse error")},
    )
    planned = plan_measurement(trial, STEP, NOW + timedelta(minutes=2))
    requests = measurement_requests(trial.analysis, planned.weight)
    collection = collect(requests, source, TARGETS, planned.window, NO_WAIT)
    # The preset's readings at the window's end, the candidate's latency counters over the step
    # (what tells a p99 beyond its limit from chance), then the own query's two variants.
    assert collection.queries == 3
    for variant in TARGETS:
        assert collection.readings[("p99", variant)].values == (1.0,)
        assert "parse error [permanent]" in (collection.readings[("mine", variant)].error or "")


def test_a_temporary_failure_asks_the_whole_question_again_and_fails_each_reading() -> None:
    class Down(MetricsError):
        pass

    source = MemorySource(failing={"error_ratio": Down("no route")})
    planned = plan_measurement(EXAMPLE, STEP, NOW + timedelta(minutes=2))
    requests = measurement_requests(EXAMPLE.analysis, planned.weight)
    collection = collect(requests, source, TARGETS, planned.window, NO_WAIT)
    assert source.questions == 3 + 1, "the failing question three times, the range one once"
    failed = [k for k, r in collection.readings.items() if r.error]
    assert ("errors", "candidate") in failed
    assert ("p99", "baseline") in failed, "asked in the same question"
    assert ("mean", "baseline") not in failed, "another question"
    assert all("(asked 3 times)" in (collection.readings[k].error or "") for k in failed)


def test_a_question_holds_a_bounded_number_of_readings() -> None:
    window = MeasurementWindow(NOW - timedelta(minutes=5), NOW, 15.0)
    requests = [
        MetricRequest(f"c{n}", "baseline", PresetMetric(f"metric_{n}"))
        for n in range(MAX_ASKS_PER_QUESTION + 1)
    ]
    source = MemorySource()
    assert collect(requests, source, TARGETS, window, NO_WAIT).queries == 2
    assert len(source.asked) == MAX_ASKS_PER_QUESTION + 1


def test_in_the_bake_the_baseline_may_reach_back_three_intervals_and_no_further() -> None:
    baking = TrialStatus(phase="BakingIn", step=1, canary_weight=100, step_started_at=NOW)
    planned = plan_measurement(EXAMPLE, baking, NOW + timedelta(minutes=2))
    assert planned.window.baseline_end == NOW
    # The example's analysis interval is one minute.
    assert planned.window.baseline_earlier == tuple(NOW - timedelta(minutes=k) for k in (1, 2, 3))
    assert plan_measurement(EXAMPLE, STEP, NOW).window.baseline_earlier == ()
