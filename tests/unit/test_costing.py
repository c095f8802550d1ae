"""Cost criteria from a measurement's readings: the inputs planned, figures built, and judged.

Worked numbers: baseline 2 g5.xlarge pods ($1.006/h, 1 of 1 GPU each) serving 9 req/s and
1800 tokens/s at 60% GPU busy; candidate 1 inf2.8xlarge pod ($1.96786/h, 2 of 2 NeuronCores)
serving 1 req/s and 200 tokens/s at 10% busy. Production: 10 req/s, 2000 tokens/s.

- baseline capacity per replica: 4.5 / 0.6 = 7.5 req/s, 900 / 0.6 = 1500 tokens/s; at 70%:
  ceil(10 / 5.25) = 2 and ceil(2000 / 1050) = 2 replicas, $2.012/h;
  per 1M tokens: 2.012 / (2000 x 3600) x 1e6 = $0.27944.
- candidate capacity: 1 / 0.1 = 10 req/s, 200 / 0.1 = 2000 tokens/s; at 70%: ceil(10 / 7) = 2 and
  ceil(2000 / 1400) = 2 replicas, $3.93572/h; per 1M tokens: 3.93572 / 7.2e9 x 1e6 = $0.54663.
- candidate / baseline = 1.956 at whole replicas. Cost criteria judge the cost per unit of
  capacity, the replicas needed unrounded: the baseline 1.90476 x $1.006 = $1.91619/h, $0.26614
  per 1M tokens; the candidate 1.42857 x $1.96786 = $2.81123/h, $0.39045: 1.467.
"""

from __future__ import annotations

import pytest

from acceltrial.api.spec import AnalysisSpec, Criterion, EconomicsSpec
from acceltrial.engine.analysis import Reading, judge_cost
from acceltrial.engine.costing import (
    COST_INPUT_PREFIX,
    VariantResources,
    cost_figures,
    plan_cost_inputs,
)
from acceltrial.engine.economics import cost_criterion_values
from acceltrial.engine.metrics import Variant, VariantTarget
from acceltrial.providers.metrics.prometheus.reader import promql

TARGETS: dict[Variant, VariantTarget] = {
    "baseline": VariantTarget("baseline", "ml", "llama3-gpu", ("gpu-a", "gpu-b"), "gpu"),
    "candidate": VariantTarget("candidate", "ml", "llama3-inf2", ("inf2-a",), "neuron"),
}
RESOURCES = {
    "baseline": VariantResources(1.006, "catalog", 1, 1),
    "candidate": VariantResources(1.96786, "catalog", 2, 2),
}
MEASURED = {
    ("request_rate", "baseline"): 9.0,
    ("token_rate", "baseline"): 1800.0,
    ("accelerator_utilization", "baseline"): 0.6,
    ("request_rate", "candidate"): 1.0,
    ("token_rate", "candidate"): 200.0,
    ("accelerator_utilization", "candidate"): 0.1,
}


def readings(measured: dict[tuple[str, str], float]) -> dict[tuple[str, Variant], Reading]:
    return {
        (COST_INPUT_PREFIX + metric, variant): Reading(values=(value,), series=1)  # type: ignore[misc]
        for (metric, variant), value in measured.items()
    }


def cost_criterion(**bounds: object) -> Criterion:
    return Criterion.model_validate({"name": "cost", "metric": "cost_per_million_tokens", **bounds})


def test_the_plan_asks_each_variant_for_rates_and_utilization_with_the_preset() -> None:
    analysis = AnalysisSpec.model_validate(
        {
            "interval": "30s",
            "prometheus": {"address": "http://p:9090"},
            "criteria": [{"name": "e", "metric": "error_ratio", "absolute": {"max": 0.01}}],
        }
    )
    planned = {
        (q.criterion, q.variant): promql(q, TARGETS[q.variant], "vllm", "30s")
        for q in plan_cost_inputs(analysis)
    }
    assert len(planned) == 18, "9 per variant: rates, utilization, latency, errors, evidence"
    assert "DCGM_FI_DEV_GPU_UTIL" in planned[("economics:accelerator_utilization", "baseline")]
    # Utilization over the same window as the rates it divides.
    assert "avg_over_time(" in planned[("economics:accelerator_utilization", "baseline")]
    scrapes = planned[("economics:scrapes", "baseline")]
    assert "count_over_time(vllm:request_success_total" in scrapes
    assert (
        "increase(vllm:e2e_request_latency_seconds_count"
        in planned[("economics:requests", "candidate")]
    )
    assert (
        "neuroncore_utilization_ratio"
        in planned[("economics:accelerator_utilization", "candidate")]
    )
    assert "vllm:generation_tokens_total" in planned[("economics:token_rate", "candidate")]
    assert "[30s]" in planned[("economics:request_rate", "baseline")]


def test_cost_figures_and_a_relative_cost_criterion_use_the_projection() -> None:
    figures = cost_figures(readings(MEASURED), TARGETS, RESOURCES, EconomicsSpec())
    baseline, candidate = cost_criterion_values(figures.comparison, "cost_per_million_tokens")
    assert baseline == pytest.approx(0.26614, rel=1e-4)
    assert candidate == pytest.approx(0.39045, rel=1e-4)
    assert figures.comparison.baseline.projected_per_million_tokens == pytest.approx(
        0.27944, rel=1e-4
    )
    assert figures.comparison.candidate.projected_per_million_tokens == pytest.approx(
        0.54663, rel=1e-4
    )
    assert figures.missing == "every input was measured"

    failed = judge_cost(cost_criterion(relative={"max": 1.0}), baseline, candidate, "")
    assert failed.verdict == "Fail"
    assert failed.ratio == pytest.approx(1.467, rel=1e-3)
    assert "(limit max 1)" in failed.reason
    passed = judge_cost(cost_criterion(absolute={"max": 0.6}), baseline, candidate, "")
    assert passed.verdict == "Pass"


def test_an_unknown_price_or_missing_traffic_is_inconclusive_with_the_cause() -> None:
    unpriced = {**RESOURCES, "baseline": VariantResources(None, "not in the table", 1, 1)}
    silent = {k: v for k, v in MEASURED.items() if k[1] != "candidate"}
    figures = cost_figures(readings(silent), TARGETS, unpriced, EconomicsSpec())
    baseline, candidate = cost_criterion_values(figures.comparison, "cost_per_million_tokens")
    assert (baseline, candidate) == (None, None)
    judgement = judge_cost(
        cost_criterion(relative={"max": 1.0}), baseline, candidate, figures.missing
    )
    assert judgement.verdict == "Inconclusive"
    assert "the baseline's instance price is unknown (not in the table)" in judgement.reason
    assert "the candidate served no measured traffic" in judgement.reason


def test_a_custom_preset_plans_no_server_queries_for_the_cost_model() -> None:
    """preset: custom has no request or token queries: planning must not fail every
    measurement; only utilization (from the exporters) is asked for."""
    analysis = AnalysisSpec.model_validate({
        "interval": "1m", "prometheus": {"address": "http://p:9090"}, "preset": "custom",
        "criteria": [{"name": "q", "query": "vector(1)", "absolute": {"max": 2}}],
    })  # fmt: skip
    planned = plan_cost_inputs(analysis)
    assert {q.criterion for q in planned} == {"economics:accelerator_utilization"}


def test_both_variants_are_projected_from_the_pods_that_served_for_all_the_traffic() -> None:
    """The replicas router's 50% step with one of the candidate's two pods still starting: the
    serving pod carried the candidate's 6.5 req/s at 27.19% busy, capacity 6.5 / 0.2719 = 23.9
    req/s a pod, so production's 13 req/s needs ceil(13 / (23.9 x 0.7)) = 1 inf2.8xlarge.
    Counting the starting pod would halve that capacity and project 2 (ceil(13 / 8.37)). The
    baseline, 2 pods at 6.5 req/s and 39.81% busy, 3.25 / 0.3981 = 8.16 a pod, needs
    ceil(13 / 5.71) = 3 g5.xlarge: both for the same 13 req/s, by one rule."""
    measured = {
        ("request_rate", "baseline"): 6.5,
        ("accelerator_utilization", "baseline"): 0.3981,
        ("request_rate", "candidate"): 6.5,
        ("accelerator_utilization", "candidate"): 0.2719,
    }
    starting = VariantTarget(
        "candidate", "ml", "llama3-inf2", ("inf2-a", "inf2-b"), "neuron", serving=1
    )
    targets = {**TARGETS, "candidate": starting}
    comparison = cost_figures(readings(measured), targets, RESOURCES, EconomicsSpec()).comparison
    assert comparison.production.requests_per_second == pytest.approx(13.0)
    assert comparison.candidate.projected_replicas == 1
    assert comparison.baseline.projected_replicas == 3
    assert comparison.candidate.projected_cost_per_hour == pytest.approx(1.96786)
    assert comparison.baseline.projected_cost_per_hour == pytest.approx(3 * 1.006)
    counted_all = {**TARGETS, "candidate": VariantTarget(
        "candidate", "ml", "llama3-inf2", ("inf2-a", "inf2-b"), "neuron")}  # fmt: skip
    wrong = cost_figures(readings(measured), counted_all, RESOURCES, EconomicsSpec()).comparison
    assert wrong.candidate.projected_replicas == 2, "the starting pod counted: capacity halved"
