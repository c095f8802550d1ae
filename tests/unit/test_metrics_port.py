"""The metrics port speaks the domain: a whole measurement runs on a source that knows no PromQL
(tests/unit/memory_metrics.py), and the engine holds no PromQL of its own."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from acceltrial.api.spec import TrialSpec
from acceltrial.api.status import TrialStatus
from acceltrial.engine.analysis import Reading
from acceltrial.engine.costing import VariantResources
from acceltrial.engine.measurement import judge_measurement, measurement_requests, plan_measurement
from acceltrial.engine.metric_check import answers, plan_check, unjudgeable
from acceltrial.engine.metrics import Variant, VariantTarget
from acceltrial.providers.metrics.port import MetricsError, collect
from tests.conftest import REPO
from tests.unit.memory_metrics import MemorySource

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
TARGETS: dict[Variant, VariantTarget] = {
    "baseline": VariantTarget("baseline", "serving", "llama3-gpu", ("llama3-gpu-1",), "gpu"),
    "candidate": VariantTarget("candidate", "serving", "llama3-c", ("llama3-c-1",), "neuron"),
}
RESOURCES = {
    "baseline": VariantResources(1.006, "catalog", 1, 1),
    "candidate": VariantResources(1.968, "catalog", 2, 2),
}
SPEC = TrialSpec.model_validate(
    {
        "baseline": {"deploymentRef": {"name": "llama3-gpu"}, "instanceType": "g5.2xlarge"},
        "candidate": {"image": "neuron:1", "instanceType": "inf2.8xlarge", "neuronCores": 2},
        "traffic": {"router": "gatewayapi", "gatewayapi": {"httpRouteRef": {"name": "llama3"}}},
        "steps": [{"weight": 25, "duration": "5m"}],
        "analysis": {
            "prometheus": {"address": "http://prometheus:9090"},
            "criteria": [
                {"name": "errors", "metric": "error_ratio", "absolute": {"max": 0.01}},
                {"name": "p99", "metric": "latency_p99", "relative": {"max": 1.2}},
            ],
        },
    }
)
STATUS = TrialStatus(phase="Progressing", step=1, canary_weight=25, step_started_at=NOW)


def one(value: float) -> Reading:
    return Reading(values=(value,), series=1)


def measured(source: MemorySource) -> tuple[str, str]:
    planned = plan_measurement(SPEC, STATUS, NOW + timedelta(minutes=2))
    requests = measurement_requests(SPEC.analysis, planned.weight)
    readings = collect(requests, source, TARGETS, planned.window).readings
    measurement = judge_measurement(SPEC, planned, readings, TARGETS, RESOURCES)
    return measurement.outcome, measurement.reason


def test_a_measurement_runs_on_a_source_that_knows_no_promql() -> None:
    healthy = {
        ("error_ratio", "candidate"): one(0.001),
        ("latency_p99", "baseline"): one(1.0),
        ("latency_p99", "candidate"): one(1.1),
    }
    assert measured(MemorySource(healthy))[0] == "Pass"
    failing = {**healthy, ("error_ratio", "candidate"): one(0.2)}
    outcome, reason = measured(MemorySource(failing))
    assert outcome == "Fail"
    assert "errors" in reason
    silent = {k: v for k, v in healthy.items() if k[1] != "candidate"}
    assert measured(MemorySource(silent))[0] == "Inconclusive", "no data is never a pass"


def test_a_reading_needed_twice_is_asked_once() -> None:
    """The p99 criterion and the report's p99 cost input read the same thing: read once, filed
    under both."""
    source = MemorySource({("latency_p99", "baseline"): one(1.0)})
    planned = plan_measurement(SPEC, STATUS, NOW + timedelta(minutes=2))
    requests = measurement_requests(SPEC.analysis, planned.weight)
    collection = collect(requests, source, TARGETS, planned.window)
    asked = [(a.request.measure, a.request.variant, a.request.counters) for a in source.asked]
    assert len(asked) == len(set(asked)) < len(requests)
    assert collection.readings[("p99", "baseline")].values == (1.0,)
    assert collection.readings[("economics:latency_p99", "baseline")].values == (1.0,)


def test_a_failing_source_makes_an_errored_measurement_after_asking_again() -> None:
    class Down(MetricsError):
        pass

    source = MemorySource(failing={"latency_p99": Down("no route to the source")})
    outcome, _ = measured(source)
    assert outcome in ("Error", "Inconclusive")
    asked_p99 = [a for a in source.asked if a.request.criterion == "p99"]
    assert len(asked_p99) == 3 * 2, "each variant asked three times (a temporary failure)"


def test_preflight_names_what_the_source_was_asked() -> None:
    source = MemorySource({("latency_p99", "baseline"): one(1.0)})
    planned = plan_check(SPEC.analysis, ("baseline",))
    window = plan_measurement(SPEC, STATUS, NOW).window
    problems = unjudgeable(answers(planned, collect(planned, source, TARGETS, window).readings))
    assert problems == [
        "criterion errors: the baseline's query gives no usable value, it returned nothing "
        "(an empty result): error_ratio of baseline"
    ]


PROMQL = re.compile(r"histogram_quantile|label_replace|\brate\(|sum by|_over_time\(|\{\{")


def test_the_engine_holds_no_promql() -> None:
    engine = REPO / "operator" / "acceltrial" / "engine"
    found = {
        f"{path.name}:{number}": line.strip()
        for path in sorted(engine.glob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if PROMQL.search(line)
    }
    assert found == {}, "PromQL belongs to providers/metrics/prometheus/"
