"""The analysis end to end against a real Prometheus: presets, provider, judge and limits.

Histories are prepared (tests/integration/histories.py) with known latency distributions, error
ratios and utilizations per scenario, so each verdict below is known in advance.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from acceltrial.engine.analysis import (
    Judgement,
    MeasurementWindow,
    plan,
    round_outcome,
)
from acceltrial.engine.weighing import judge_window
from acceltrial.providers.metrics.factory import reader_for
from acceltrial.providers.metrics.port import Collection, collect
from acceltrial.providers.metrics.prometheus import PrometheusClient, QueryRejected
from tests.integration.conftest import analysis, targets
from tests.integration.histories import SCENARIOS

P99 = {"name": "p99-latency", "metric": "latency_p99", "relative": {"max": 1.10}}
ERRORS = {"name": "errors", "metric": "error_ratio", "absolute": {"max": 0.005}}
MEAN = {
    "name": "mean-latency",
    "metric": "latency_mean",
    "statistical": {"direction": "increase", "confidence": 0.95, "allowedChange": 0.05},
}
UTILIZATION = {"name": "utilization", "metric": "accelerator_utilization", "absolute": {"min": 0.4}}
TOKENS = {"name": "tokens", "metric": "token_rate", "absolute": {"min": 100}, "minRequests": 50}


def measure(
    client: PrometheusClient,
    namespace: str,
    window: MeasurementWindow,
    *criteria: dict[str, Any],
) -> tuple[dict[str, Judgement], Collection]:
    spec = analysis(*criteria)
    planned = plan(spec, weight=50)
    collection = collect(planned, reader_for(spec, client), targets(namespace), window)
    verdicts = {
        c.name: judge_window(
            c,
            collection.readings.get((c.name, "baseline")),
            collection.readings.get((c.name, "candidate")),
        )
        for c in spec.criteria
    }
    return verdicts, collection


@pytest.fixture
def prometheus(prometheus_url: str) -> PrometheusClient:
    return PrometheusClient(prometheus_url, timeout_seconds=5)


def test_a_healthy_candidate_passes_every_criterion(
    prometheus: PrometheusClient, window: MeasurementWindow
) -> None:
    verdicts, collection = measure(
        prometheus, "healthy", window, P99, ERRORS, MEAN, UTILIZATION, TOKENS
    )
    assert {name: j.verdict for name, j in verdicts.items()} == dict.fromkeys(verdicts, "Pass")
    profile = SCENARIOS["healthy"]
    p99 = verdicts["p99-latency"]
    assert p99.baseline == pytest.approx(profile.baseline.p99, rel=0.1)
    assert p99.candidate == pytest.approx(profile.candidate.p99, rel=0.1)
    assert verdicts["utilization"].candidate == pytest.approx(0.6)
    mean = verdicts["mean-latency"]
    assert mean.baseline_samples == mean.candidate_samples == 81  # 20 min at 15 s, both ends
    # One query per window: every value at the window's end together, the samples across it
    # (the rank-sum test's) together.
    assert collection.queries == 2


def test_a_p99_regression_fails_with_the_ratio(
    prometheus: PrometheusClient, window: MeasurementWindow
) -> None:
    verdicts, _ = measure(prometheus, "slow-tail", window, P99)
    p99 = verdicts["p99-latency"]
    expected = SCENARIOS["slow-tail"].candidate.p99 / SCENARIOS["slow-tail"].baseline.p99
    assert p99.verdict == "Fail"
    assert p99.ratio == pytest.approx(expected, rel=0.1)
    assert "(limit max 1.1)" in p99.reason


def test_an_error_rate_regression_fails(
    prometheus: PrometheusClient, window: MeasurementWindow
) -> None:
    verdicts, _ = measure(prometheus, "errors", window, ERRORS)
    assert verdicts["errors"].verdict == "Fail"
    assert verdicts["errors"].candidate == pytest.approx(0.03, rel=0.05)
    assert "above max 0.005" in verdicts["errors"].reason


def test_a_slower_mean_is_caught_by_the_rank_sum_test(
    prometheus: PrometheusClient, window: MeasurementWindow
) -> None:
    verdicts, _ = measure(prometheus, "shifted", window, MEAN)
    mean = verdicts["mean-latency"]
    assert mean.verdict == "Fail"
    assert mean.comparison is not None
    assert mean.comparison.p_value < 0.001
    assert mean.comparison.lower > 0
    assert "significantly higher" in mean.reason


def test_a_candidate_without_traffic_is_inconclusive_never_a_pass(
    prometheus: PrometheusClient, window: MeasurementWindow
) -> None:
    verdicts, _ = measure(prometheus, "idle", window, P99, ERRORS, MEAN, TOKENS)
    assert {j.verdict for j in verdicts.values()} == {"Inconclusive"}
    assert "NaN" in verdicts["p99-latency"].reason
    assert "NaN" in verdicts["errors"].reason
    assert "too few finite samples" in verdicts["mean-latency"].reason
    assert "no data: the candidate answered no request in the window" in verdicts["tokens"].reason
    outcome, reason = round_outcome(list(verdicts.values()))
    assert outcome == "Inconclusive"
    assert reason.startswith("p99-latency: ")


def test_a_missing_metric_is_inconclusive(
    prometheus: PrometheusClient, window: MeasurementWindow
) -> None:
    verdicts, _ = measure(prometheus, "missing", window, P99, ERRORS)
    for judgement in verdicts.values():
        assert judgement.verdict == "Inconclusive"
        assert "no data for the candidate" in judgement.reason


def test_infinity_is_inconclusive(prometheus: PrometheusClient, window: MeasurementWindow) -> None:
    infinite = {"name": "infinite", "query": "vector(1) / 0", "absolute": {"max": 1}}
    verdicts, _ = measure(prometheus, "healthy", window, infinite)
    assert verdicts["infinite"].verdict == "Inconclusive"
    assert "+inf" in verdicts["infinite"].reason


def test_several_series_where_one_was_expected(
    prometheus: PrometheusClient, window: MeasurementWindow
) -> None:
    per_pod = {
        "name": "per-pod",
        "query": 'rate(vllm:request_success_total{namespace="{{namespace}}", pod=~"{{pods}}"}'
        "[{{interval}}])",
        "relative": {"max": 2},
    }
    verdicts, _ = measure(prometheus, "healthy", window, per_pod)
    assert verdicts["per-pod"].verdict == "Inconclusive"
    assert "returned 2 series where one was expected" in verdicts["per-pod"].reason


def test_a_syntax_error_is_a_typed_error_with_prometheus_text(
    prometheus: PrometheusClient, window: MeasurementWindow
) -> None:
    with pytest.raises(QueryRejected, match=r"HTTP 400: bad_data: .*parse error"):
        prometheus.instant("sum(rate(up[1m])", window.end)
    broken = {"name": "broken", "query": "sum(rate(up[1m])", "absolute": {"max": 1}}
    verdicts, _ = measure(prometheus, "healthy", window, broken)
    assert verdicts["broken"].errored
    assert verdicts["broken"].verdict == "Inconclusive"
    assert round_outcome(list(verdicts.values()))[0] == "Error"


def test_prometheus_down_is_an_error_not_a_pass(window: MeasurementWindow) -> None:
    down = PrometheusClient("http://127.0.0.1:9", timeout_seconds=2)  # discard port: closed
    verdicts, collection = measure(down, "healthy", window, P99, ERRORS)
    assert collection.queries == 1, "the three readings are one query, failed once"
    assert len(collection.readings) == 3
    for judgement in verdicts.values():
        assert judgement.errored
        assert "cannot reach http://127.0.0.1:9" in judgement.reason
    assert round_outcome(list(verdicts.values()))[0] == "Error"


def test_utilization_of_each_variant_comes_from_its_own_exporter(
    prometheus: PrometheusClient, window: MeasurementWindow
) -> None:
    relative = {"name": "util", "metric": "accelerator_utilization", "relative": {"min": 1.0}}
    verdicts, _ = measure(prometheus, "busy-idle-gpu", window, relative)
    util = verdicts["util"]
    assert util.baseline == pytest.approx(0.2)  # DCGM percent scaled to a ratio
    assert util.candidate == pytest.approx(0.6)  # neuroncore_utilization_ratio
    assert util.ratio is not None
    assert math.isclose(util.ratio, 3.0, rel_tol=1e-6)
    assert util.verdict == "Pass"
