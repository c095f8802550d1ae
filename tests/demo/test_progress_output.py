"""What the demo and ``acceltrial status`` print, from a trial's status: the bar never goes
backwards, a trial that did not promote claims no savings, a message is never cut inside a
name."""

from __future__ import annotations

from typing import Any

import pytest

from acceltrial.cli.trials import shorten, status_rows
from acceltrial_testbed.demo.progress import deciding_criteria, economics_lines, progress

ECONOMICS = {
    "baseline": {"costPerHour": 2.012, "projectedCostPerMillionTokens": 0.45, "replicas": 2,
                 "replicasNeeded": 2.07, "projectedReplicas": 3},
    "candidate": {"costPerHour": 1.968, "projectedCostPerMillionTokens": 0.30, "replicas": 1,
                  "replicasNeeded": 0.91, "projectedReplicas": 1},
    "currentMonthlySavings": 32.1,
    "projectedMonthlySavings": 767.0,
    "paybackMonths": 12.5,
    "measuredAt": "2026-12-03T09:40:00Z", "step": 3, "weight": 50,
}  # fmt: skip
INSTANCES = ("g5.xlarge", "inf2.8xlarge")
METRICS = {"p99-latency": "latency_p99", "cost": "cost_per_million_tokens"}


def result(criterion: str, verdict: str, weight: int) -> dict[str, Any]:
    return {"criterion": criterion, "verdict": verdict, "weight": weight, "step": 0,
            "at": "2026-12-03T09:40:00Z"}  # fmt: skip


def rolled_back_at_the_bake(on: str) -> dict[str, Any]:
    failed = on.split("+")
    results = [result("p99-latency", "Fail" if "p99-latency" in failed else "Pass", 100),
               result("cost", "Fail" if "cost" in failed else "Pass", 100)]  # fmt: skip
    decision = {"verdict": "rollback", "reason": f"{on}: beyond the limit at 100%",
                "reasonCode": "CriterionFailed"}  # fmt: skip
    return {"phase": "RollingBack", "step": 3, "canaryWeight": 100, "analysis": results,
            "lastMeasurementAt": "2026-12-03T09:40:00Z", "economics": ECONOMICS,
            "decision": decision}  # fmt: skip


def test_a_rollback_during_the_bake_keeps_the_bar_where_it_was() -> None:
    baking = progress({"phase": "BakingIn", "step": 3}, steps=3)
    assert progress(rolled_back_at_the_bake("cost"), steps=3) == baking
    assert progress({**rolled_back_at_the_bake("cost"), "phase": "RolledBack"}, 3) == baking
    assert progress({"phase": "Progressing", "step": 2}, 3) < baking


def test_a_promotion_tells_the_savings() -> None:
    lines = economics_lines(ECONOMICS, INSTANCES, {"verdict": "promote"}, target=0.7,
                            migration=9600)  # fmt: skip
    assert (
        "  At today's replicas, 2 g5.xlarge ($2.012/h) against 1 inf2.8xlarge ($1.968/h): the "
        "candidate saves $32 per month."
    ) in lines
    assert (
        "  At the replicas all traffic needs at 70% utilization, 3 g5.xlarge (2.07 rounded up) "
        "against 1 inf2.8xlarge (0.91 rounded up): the candidate saves $767 per month."
    ) in lines
    assert "  Cost figures from step 3 (50% to the candidate), window ending 09:40:00 UTC." in lines
    assert (
        "  Migration effort $9,600: at today's replicas, pays back in 299.1 months; at the "
        "projected replicas, pays back in 12.5 months."
    ) in lines


@pytest.mark.parametrize(
    ("criterion", "told"),
    [
        ("p99-latency", "the trial rolled back on p99-latency, not on cost"),
        ("cost", "the trial rolled back on its cost criterion cost"),
        ("p99-latency+cost", "the trial rolled back on p99-latency, cost (cost among them)"),
    ],
)
def test_a_rollback_tells_what_the_candidate_would_have_cost_and_why(
    criterion: str, told: str
) -> None:
    status = rolled_back_at_the_bake(criterion)
    deciding = deciding_criteria(status, METRICS)
    text = "\n".join(economics_lines(ECONOMICS, INSTANCES, status["decision"], deciding))
    assert list(deciding) == criterion.split("+")
    assert "saves" not in text
    assert "pays back" not in text
    assert "the candidate would have saved $767 per month" in text
    assert told in text


def test_a_rollback_for_another_reason_names_no_criterion() -> None:
    """A candidate not scaled for all traffic: the last measurement's thin cost is not why."""
    status = rolled_back_at_the_bake("cost")
    status["decision"] = {"verdict": "rollback", "reasonCode": "CandidateNotScaled",
                          "reason": "the candidate did not reach 3 Available replicas"}  # fmt: skip
    deciding = deciding_criteria(status, METRICS)
    assert deciding == {}
    text = "\n".join(economics_lines(ECONOMICS, INSTANCES, status["decision"], deciding))
    assert "the trial rolled back before any criterion failed" in text
    assert "cost criterion" not in text


def test_a_failed_preflight_has_unknown_economics() -> None:
    lines = economics_lines(None, INSTANCES, {"verdict": "none"})
    assert lines == [
        "Economics: unknown (no user request reached the candidate: nothing was measured)"
    ]


def test_a_long_message_is_cut_between_words_never_inside_a_name() -> None:
    message = ("rolling back: p99-latency of llama3-8b-inf2-candidate is 1.65x the baseline's "
               "llama3-8b-gpu (limit max 1.2) at 5%")  # fmt: skip
    cut = shorten(message, 80)
    assert len(cut) <= 80
    assert cut.endswith("...")
    assert message.startswith(cut.removesuffix("..."))
    assert message[len(cut) - 3] == " ", "the cut falls on a space"
    assert shorten("short", 80) == "short"
    name = "x" * 90
    assert shorten(f"{name} rest", 80) == f"{name}...", "one long name is shown whole"


def test_status_shows_the_message_shortened() -> None:
    message = "candidate llama3-8b-inf2-candidate " * 5
    trial = {"metadata": {"name": "t"}, "spec": {"steps": [{}]},
             "status": {"phase": "Progressing", "message": message}}  # fmt: skip
    shown = status_rows([trial], watching=False)[1][-1]
    assert shown.endswith("llama3-8b-inf2-candidate...")
