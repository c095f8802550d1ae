"""The Prometheus source's templates (rendering per variant, escaping, refusals, presets) and the
engine's plan of requests, as PromQL."""

from __future__ import annotations

import pytest

from acceltrial.api.spec import AnalysisSpec
from acceltrial.engine.analysis import plan
from acceltrial.engine.metrics import PRESET_METRICS, OwnQuery, PresetMetric, VariantTarget
from acceltrial.providers.metrics.prometheus.presets import (
    PRESETS,
    TemplateError,
    preset_template,
    promql_duration,
    render,
)
from acceltrial.providers.metrics.prometheus.reader import promql

CANDIDATE = VariantTarget(
    "candidate",
    "serving",
    "llama3-cand",
    ("llama3-cand-7d9f-x2k4p", "llama3-cand-7d9f-q8zzt"),
    "neuron",
)
BASELINE = VariantTarget("baseline", "serving", "llama3-gpu", ("llama3-gpu-5c-abcde",), "gpu")


def test_placeholders_are_rendered_per_variant() -> None:
    template = (
        'sum(rate(x{namespace="{{namespace}}", pod=~"{{pods}}"}[{{ interval }}])) # {{deployment}}'
    )
    assert render(template, CANDIDATE, "1m") == (
        'sum(rate(x{namespace="serving", '
        'pod=~"^(?:llama3-cand-7d9f-q8zzt|llama3-cand-7d9f-x2k4p)$"}[60s])) # llama3-cand'
    )


def test_dots_in_pod_names_are_escaped_for_regex_and_promql() -> None:
    target = VariantTarget("baseline", "ns", "d", ("web.0",), "gpu")
    assert render('pod=~"{{pods}}"', target, "30s") == 'pod=~"^(?:web\\\\.0)$"'


def test_no_pods_matches_nothing() -> None:
    target = VariantTarget("candidate", "ns", "d", (), "neuron")
    assert render('pod=~"{{pods}}"', target, "30s") == 'pod=~"^$"'


@pytest.mark.parametrize(
    ("template", "target", "message"),
    [
        ("x{pod=~'{{pod}}'}", CANDIDATE, "unknown placeholder {{pod}}"),
        ("{{job}}", CANDIDATE, "unknown placeholder {{job}}"),
        (
            "{{namespace}}",
            VariantTarget("candidate", 'serving"} or vector(1) #', "d", (), "neuron"),
            "is not a valid Kubernetes name",
        ),
        ("{{pods}}", VariantTarget("candidate", "ns", "d", ('a"|.*',), "neuron"), "pod name"),
    ],
)
def test_unsafe_templates_and_values_are_refused(
    template: str, target: VariantTarget, message: str
) -> None:
    with pytest.raises(TemplateError, match=message.replace("{", r"\{").replace("|", r"\|")):
        render(template, target, "1m")


@pytest.mark.parametrize(
    ("interval", "promql"), [("1m", "60s"), ("1h30m", "5400s"), ("1.5s", "1500ms")]
)
def test_intervals_become_promql_durations(interval: str, promql: str) -> None:
    assert promql_duration(interval) == promql


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_preset_metric_renders_for_both_variants(preset: str) -> None:
    for metric in PRESETS[preset]:
        for target in (BASELINE, CANDIDATE):
            rendered = render(preset_template(preset, metric, target.accelerator), target, "1m")
            assert "{{" not in rendered
            assert 'namespace="serving"' in rendered


def test_utilization_comes_from_each_variants_exporter() -> None:
    assert "neuroncore_utilization_ratio" in preset_template(
        "vllm", "accelerator_utilization", "neuron"
    )
    assert "DCGM_FI_DEV_GPU_UTIL" in preset_template("tgi", "accelerator_utilization", "gpu")


def test_plan_asks_one_query_per_criterion_and_variant() -> None:
    spec = AnalysisSpec.model_validate(
        {
            "prometheus": {"address": "http://p:9090"},
            "criteria": [
                {"name": "p99", "metric": "latency_p99", "relative": {"max": 1.1}},
                {
                    "name": "err",
                    "metric": "error_ratio",
                    "absolute": {"max": 0.01},
                    "minRequests": 10,
                },
                {
                    "name": "mean",
                    "metric": "latency_mean",
                    "statistical": {"direction": "increase"},
                },
                {"name": "cost", "metric": "cost_per_million_tokens", "relative": {"max": 0.8}},
                {"name": "late", "metric": "ttft_p99", "relative": {"max": 1.2}, "fromWeight": 50},
            ],
        }
    )
    planned = plan(spec, weight=25)
    assert [(q.criterion, q.variant, q.mode) for q in planned] == [
        ("p99", "baseline", "instant"),
        ("p99", "candidate", "instant"),
        ("err", "candidate", "instant"),
        ("mean", "baseline", "range"),
        ("mean", "candidate", "range"),
    ]
    err = planned[2]
    assert (err.measure, err.requests) == (PresetMetric("error_ratio"), PresetMetric("requests"))
    asked = promql(err, CANDIDATE, "vllm", "1m")
    assert "label_replace((" in asked
    assert '"acceltrial_part", "requests"' in asked


def test_an_own_query_is_passed_to_the_source_untouched_but_for_its_placeholders() -> None:
    spec = AnalysisSpec.model_validate(
        {
            "prometheus": {"address": "http://p:9090"},
            "preset": "custom",
            "criteria": [{"name": "q", "query": 'up{pod=~"{{pods}}"}', "absolute": {"max": 2}}],
        }
    )
    (request,) = plan(spec, weight=5)
    assert request.measure == OwnQuery('up{pod=~"{{pods}}"}')
    assert promql(request, CANDIDATE, "custom", "1m") == (
        'up{pod=~"^(?:llama3-cand-7d9f-q8zzt|llama3-cand-7d9f-x2k4p)$"}'
    )


def test_the_engine_and_the_prometheus_presets_name_the_same_metrics() -> None:
    assert {p: frozenset(m) for p, m in PRESETS.items()} == PRESET_METRICS
