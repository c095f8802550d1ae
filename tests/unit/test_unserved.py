"""A measurement in which the candidate answered no request (engine/unserved.py): thin when its
share could bring none by chance, inconclusive when the baseline's requests beside it say it
should have had some. The demo `promote-then-delete` paused on a busy machine after three empty
windows at 5% (1 request/s): Flagger's "no values found" pain, a quiet step taken for a fault."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from acceltrial.api.spec import TrialSpec
from acceltrial.api.status import TrialStatus
from acceltrial.engine.analysis import Reading
from acceltrial.engine.costing import VariantResources
from acceltrial.engine.measurement import judge_measurement, measurement_requests, plan_measurement
from acceltrial.engine.metrics import Variant, VariantTarget
from acceltrial.engine.ticks import Measurement
from acceltrial.engine.unserved import expected_requests
from acceltrial.providers.metrics.port import collect
from tests.unit.memory_metrics import MemorySource

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
TARGETS: dict[Variant, VariantTarget] = {
    "baseline": VariantTarget("baseline", "demo", "llama3-gpu", ("llama3-gpu-1",), "gpu"),
    "candidate": VariantTarget("candidate", "demo", "llama3-c", ("llama3-c-1",), "neuron"),
}
RESOURCES = {
    "baseline": VariantResources(1.006, "catalog", 1, 1),
    "candidate": VariantResources(1.968, "catalog", 2, 2),
}
SPEC = TrialSpec.model_validate(
    {
        "baseline": {"deploymentRef": {"name": "llama3-gpu"}, "instanceType": "g5.xlarge"},
        "candidate": {"image": "neuron:1", "instanceType": "inf2.8xlarge", "neuronCores": 2},
        "traffic": {"router": "gatewayapi", "gatewayapi": {"httpRouteRef": {"name": "llama3"}}},
        "steps": [{"weight": 5, "duration": "6s"}, {"weight": 50, "duration": "6s"}],
        "analysis": {
            "interval": "3s",
            "prometheus": {"address": "http://prometheus:9090"},
            "preset": "vllm",
            "mode": "sequential",
            "criteria": [
                {"name": "errors", "metric": "error_ratio", "absolute": {"max": 0.01}},
                {"name": "p99", "metric": "latency_p99", "relative": {"max": 1.2}},
            ],
        },
    }
)


def counters(per_second: float, seconds: int = 3) -> tuple[tuple[float, float], ...]:
    return tuple((float(t), per_second * t) for t in range(seconds + 1))


def measured(weight: int, baseline_per_second: float) -> Measurement:
    """One measurement 3 s into a step at ``weight``%: the baseline served
    ``baseline_per_second``, the candidate's counters stood still."""
    status = TrialStatus(phase="Progressing", step=1, canary_weight=weight, step_started_at=NOW)
    baseline_latency = Reading(
        series=2,
        parts=(("1.0", counters(baseline_per_second)), ("+Inf", counters(baseline_per_second))),
    )
    still = Reading(series=2, parts=(("1.0", counters(0.0)), ("+Inf", counters(0.0))))
    source = MemorySource(
        {
            ("latency_p99", "baseline"): baseline_latency,
            ("latency_p99", "candidate"): still,
            ("error_ratio", "candidate"): Reading(series=1, parts=(("2xx", counters(0.0)),)),
            ("requests", "baseline"): Reading(values=(3 * baseline_per_second,), series=1),
            ("requests", "candidate"): Reading(values=(0.0,), series=1),
        }
    )
    planned = plan_measurement(SPEC, status, NOW + timedelta(seconds=3))
    requests = measurement_requests(SPEC.analysis, planned.weight)
    readings = collect(requests, source, TARGETS, planned.window).readings
    return judge_measurement(SPEC, planned, readings, TARGETS, RESOURCES)


def test_no_request_where_the_share_brings_three_on_average_is_thin() -> None:
    """5% beside 19 requests/s: 3 expected in a 3 s window, none one time in twenty."""
    measurement = measured(5, baseline_per_second=19.0)

    assert measurement.outcome == "Thin", measurement.reason
    by_name = {r.criterion: r for r in measurement.results}
    assert by_name["p99"].thin
    assert by_name["errors"].thin, "judged beside the window's baseline requests"
    assert "would bring 3 beside the baseline's requests" in by_name["p99"].reason
    assert "may be chance" in by_name["p99"].reason


def test_no_request_where_the_share_should_bring_many_is_inconclusive() -> None:
    """50% beside 19 requests/s: 57 expected; none is no chance, the candidate gets no traffic."""
    measurement = measured(50, baseline_per_second=19.0)

    assert measurement.outcome == "Inconclusive"
    assert "is it receiving traffic?" in measurement.reason
    assert not any(r.thin for r in measurement.results)


def test_the_expected_requests_follow_the_share_or_the_mirror() -> None:
    assert expected_requests(95.0, 5, 0) == 5.0
    assert expected_requests(100.0, 0, 10) == 10.0, "a mirror copies a share of the baseline's"
    assert expected_requests(100.0, 100, 0) is None, "at 100% the baseline serves nothing"
    assert expected_requests(None, 5, 0) is None
    assert math.exp(-3.0) > SPEC.analysis.alpha > math.exp(-57.0)
