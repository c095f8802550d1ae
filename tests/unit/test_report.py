"""The decision report as the engine builds it, tick after tick."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from acceltrial.api.spec import TrialSpec
from acceltrial.api.status import (
    CriterionResult,
    Decision,
    EconomicsStatus,
    TrialStatus,
    VariantEconomics,
)
from acceltrial.engine.candidate import TrialRef
from acceltrial.engine.report import ReportInputs, judged, update_report
from acceltrial.engine.ticks import Measurement
from tests.unit.test_lifecycle import ORIGINAL, make_spec

T0 = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)
TRIAL = TrialRef("llama3", "ml", "uid-1")


def observed(rate: float, latency: float) -> dict[str, float | None]:
    return {"request_rate": rate, "token_rate": rate * 150, "latency_mean": latency,
            "latency_p50": latency * 0.9, "latency_p99": latency * 2.2, "error_ratio": 0.001,
            "accelerator_utilization": 0.5}  # fmt: skip


def measurement(weight: int, base_rate: float, cand_rate: float, step: int = 1) -> Measurement:
    result = CriterionResult(criterion="errors", step=step, weight=weight, verdict="Pass",
                             reason="ok", at=T0)  # fmt: skip
    economics = EconomicsStatus(
        baseline=VariantEconomics(projected_cost_per_million_tokens=0.45),
        candidate=VariantEconomics(projected_cost_per_million_tokens=0.30),
    )
    return Measurement(
        "Pass", "every criterion passed", (result,), economics,
        {"baseline": observed(base_rate, 1.3), "candidate": observed(cand_rate, 1.2)},
    )  # fmt: skip


def spec() -> TrialSpec:
    return make_spec()


def test_each_measurement_adds_a_point_and_refreshes_the_figures() -> None:
    status = TrialStatus(phase="Progressing", step=1, canary_weight=5, criteria_hash="abc",
                         original=ORIGINAL)  # fmt: skip
    first = update_report(None, ReportInputs(spec(), status, TRIAL, T0, measurement(5, 11.4, 0.6),
                                             replicas={"baseline": 2, "candidate": 1}))  # fmt: skip
    later = T0 + timedelta(seconds=30)
    second = update_report(first, ReportInputs(spec(), status, TRIAL, later,
                                               measurement(25, 9.0, 3.0)))  # fmt: skip
    assert [p.weight for p in second.timeline] == [5, 25]
    assert second.timeline[1].candidate["cost_per_million_tokens"] == 0.30
    assert second.variants.candidate.requests_per_second == 3.0
    assert second.variants.candidate.replicas == 1, "kept from the earlier tick"
    assert second.workload.requests_per_second == pytest.approx(12.0)
    assert second.workload.tokens_per_request == pytest.approx(150)
    # Little's law: 9 x 1.3 + 3 x 1.2 requests in flight.
    assert second.workload.concurrency == pytest.approx(9 * 1.3 + 3 * 1.2)
    assert second.controlled_test.weights_reached == [5, 25]
    assert second.controlled_test.rollback_ready
    assert second.compatibility.deployed
    assert second.gitops is None


def test_a_variant_without_traffic_keeps_the_replicas_its_figures_were_measured_with() -> None:
    status = TrialStatus(phase="Progressing", step=3, canary_weight=50, criteria_hash="abc",
                         original=ORIGINAL)  # fmt: skip
    first = update_report(None, ReportInputs(spec(), status, TRIAL, T0, measurement(50, 6.0, 6.0),
                                             replicas={"baseline": 2, "candidate": 1}))  # fmt: skip
    # After promotion the baseline is scaled to zero and serves nothing.
    inputs = ReportInputs(spec(), status, TRIAL, T0, measurement(100, 0.0, 12.0),
                          replicas={"baseline": 0, "candidate": 3})  # fmt: skip
    handed_over = update_report(first, inputs)
    assert handed_over.variants.baseline.replicas == 2
    assert handed_over.variants.baseline.requests_per_second == 6.0
    assert handed_over.variants.candidate.replicas == 3


def test_at_100_percent_the_workload_is_the_candidates_and_gitops_comes_with_promotion() -> None:
    decided = Decision(verdict="promote", reason="every step and the bake passed", at=T0)
    status = TrialStatus(phase="Promoted", step=3, canary_weight=100, decision=decided)
    manifests = {"httpRoute": {"kind": "HTTPRoute"}}
    inputs = ReportInputs(spec(), status, TRIAL, T0, measurement(100, 6.0, 12.0), gitops=manifests)
    report = update_report(None, inputs)
    assert report.workload.requests_per_second == 12.0, "the baseline's window is from before"
    assert report.gitops == manifests
    assert report.decision == decided


def test_no_traffic_on_the_candidate_is_reported_as_not_deployed() -> None:
    status = TrialStatus(phase="RolledBack", step=1, canary_weight=0)
    report = update_report(None, ReportInputs(spec(), status, TRIAL, T0, measurement(5, 12, 0)))
    assert not report.compatibility.deployed
    assert "the candidate served no measured request" in report.compatibility.notes


def test_criteria_are_described_with_their_limits() -> None:
    (errors,) = spec().analysis.criteria
    assert judged(errors) == "candidate error_ratio <= 0.01"


def test_a_shadow_steps_measurements_count_as_mirrored_not_as_a_weight_reached() -> None:
    shadow = make_spec(steps=[{"mirror": 10, "duration": "2m"}, {"weight": 5, "duration": "2m"}])
    mirrored = TrialStatus(phase="Progressing", step=1, canary_weight=0, criteria_hash="abc",
                           original=ORIGINAL)  # fmt: skip
    first = update_report(None, ReportInputs(shadow, mirrored, TRIAL, T0,
                                             measurement(0, 12.0, 1.2)))  # fmt: skip
    assert first.controlled_test.weights_reached == []
    assert first.controlled_test.mirrors_reached == [10]
    served = mirrored.model_copy(update={"step": 2, "canary_weight": 5})
    later = T0 + timedelta(seconds=30)
    second = update_report(first, ReportInputs(shadow, served, TRIAL, later,
                                               measurement(5, 11.4, 0.6, step=2)))  # fmt: skip
    assert second.controlled_test.weights_reached == [5]
    assert second.controlled_test.mirrors_reached == [10]
