"""A training trial's state machine, through its public function: Jobs created and stopped,
runs read from timestamped logs, the decision and its figures (checked by hand), failures with
the log's lines."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import yaml

from acceltrial.api.training import TrainingTrial, TrainingTrialStatus
from acceltrial.api.training.status import ExportedReading, Rate
from acceltrial.engine.training.lifecycle import (
    CreateJob,
    JobView,
    NodePrice,
    Preflight,
    StopJob,
    TrainingTick,
    TrainingWorld,
    training_tick,
)
from tests.conftest import EXAMPLES

T0 = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
PRICES = {
    "baseline": NodePrice(21.957642, "catalog p4d.24xlarge"),
    "candidate": NodePrice(21.50, "catalog trn1.32xlarge"),
}


def spec(**changes: Any) -> Any:
    body = yaml.safe_load((EXAMPLES / "llama-trn1-training.yaml").read_text().replace("e9", "e+9"))
    body["spec"].pop("precompile")
    body["spec"].pop("compileCache")
    body["spec"]["run"] = {"steps": 60, "warmupSteps": 10, "sequenceLength": 4096}
    for key, value in changes.items():
        body["spec"][key] = value
    return TrainingTrial.model_validate(body).spec


def log(steps: int, tokens_per_second: float, start: datetime, *, loss_end: float = 2.0,
        step_seconds: float = 2.0, noise: float = 0.01) -> tuple[str, ...]:  # fmt: skip
    """JSON lines as a trainer prints them, stamped as the kubelet stamps them."""
    lines = []
    for step in range(1, steps + 1):
        at = start + timedelta(seconds=step * step_seconds)
        wobble = 1 + noise * math.sin(step * 1.7)
        loss = 4.0 + (loss_end - 4.0) * step / steps
        line = (f'{{"step": {step}, "loss": {loss:.5f}, '
                f'"tokens_per_second": {tokens_per_second * wobble:.1f}}}')  # fmt: skip
        lines.append(f"{at.isoformat().replace('+00:00', 'Z')} {line}")
    return tuple(lines)


def tick(
    trial_spec: Any, status: TrainingTrialStatus, now: datetime, **jobs: JobView
) -> TrainingTick:
    return training_tick(trial_spec, status, TrainingWorld(now, jobs, PRICES))


def run_through(
    trial_spec: Any, baseline: tuple[str, ...], candidate: tuple[str, ...]
) -> TrainingTick:
    first = tick(trial_spec, TrainingTrialStatus(), T0)
    assert {a.role for a in first.actions if isinstance(a, CreateJob)} == {"baseline", "candidate"}
    running = {v: JobView("Running", created_at=T0, log=lines)
               for v, lines in (("baseline", baseline), ("candidate", candidate))}  # fmt: skip
    return tick(trial_spec, first.status, T0 + timedelta(minutes=5), **running)


def test_a_cheaper_candidate_with_matching_loss_is_recommended_with_hand_checked_figures() -> None:
    trial = spec()
    done = run_through(trial, log(60, 40_000, T0 + timedelta(seconds=30)),
                       log(60, 60_000, T0 + timedelta(seconds=90), loss_end=2.02))  # fmt: skip

    status = done.status
    assert status.phase == "Recommended", status.message
    assert {a.role for a in done.actions if isinstance(a, StopJob)} == {"baseline", "candidate"}
    # By hand: 2e9 tokens at 40,000 tokens/s is 13.889 h, plus 32 s to the first step
    # (the line of step 1 is printed 2 s after a start 30 s after the Job's creation).
    baseline = status.economics.baseline
    hours = 2e9 / 40_000 / 3600 + 32 / 3600
    assert baseline.hours_per_run == pytest.approx(hours, rel=0.01)
    assert baseline.cost_per_run == pytest.approx(hours * 21.957642 * 2, rel=0.01)
    candidate = status.economics.candidate
    hours = 2e9 / 60_000 / 3600 + 92 / 3600
    assert candidate.cost_per_run == pytest.approx(hours * 21.50 * 2, rel=0.01)
    assert candidate.tokens_per_dollar == pytest.approx(2e9 / (hours * 43.0), rel=0.01)
    assert status.runs.candidate.startup_seconds == pytest.approx(92)
    assert status.runs.baseline.tokens_per_second.mean == pytest.approx(40_000, rel=0.01)
    assert status.loss_parity.gap == pytest.approx(0.01, abs=0.003)
    assert [c.verdict for c in status.decision.criteria] == ["Pass", "Pass", "Pass"]


def test_a_loss_15_percent_higher_is_not_recommended_and_the_reason_names_it() -> None:
    done = run_through(spec(), log(60, 40_000, T0), log(60, 60_000, T0, loss_end=2.3))

    assert done.status.phase == "NotRecommended"
    assert done.status.decision.reason_code == "CriterionFailed"
    assert done.status.decision.reason.startswith("loss-parity: loss_gap +1")
    assert done.status.loss_parity.gap == pytest.approx(0.14, abs=0.02)


def test_too_few_matched_steps_for_loss_parity_is_inconclusive() -> None:
    trial = spec(run={"steps": 14, "warmupSteps": 10, "sequenceLength": 4096})
    done = run_through(trial, log(14, 40_000, T0), log(14, 60_000, T0))

    assert done.status.phase == "NotRecommended"
    assert done.status.decision.reason_code == "Inconclusive"
    assert "loss parity needs 8" in done.status.decision.reason


def test_a_run_is_stopped_once_it_reached_its_steps_and_the_other_goes_on() -> None:
    trial = spec()
    first = tick(trial, TrainingTrialStatus(), T0)
    later = tick(trial, first.status, T0 + timedelta(minutes=3),
                 baseline=JobView("Running", T0, log=log(60, 40_000, T0)),
                 candidate=JobView("Running", T0, log=log(20, 60_000, T0)))  # fmt: skip

    assert later.actions == (StopJob("baseline"),)
    assert later.status.phase == "Running"
    assert later.status.runs.baseline.state == "Finished"
    assert later.status.message == "training: baseline: finished, candidate: step 20 of 60"

    # The baseline's Job (and its log) is gone: the decision reads what the status kept.
    done = tick(trial, later.status, T0 + timedelta(minutes=6),
                candidate=JobView("Running", T0, log=log(60, 60_000, T0)))  # fmt: skip
    assert done.status.phase == "Recommended", done.status.message
    assert len(done.status.runs.baseline.loss_curve) == 50
    assert done.status.economics.baseline.hours_per_run == pytest.approx(
        2e9 / 40_000 / 3600, rel=0.01
    )


def test_sequential_runs_the_candidate_once_the_baseline_finished() -> None:
    trial = spec(schedule="sequential")
    first = tick(trial, TrainingTrialStatus(), T0)
    assert first.actions == (CreateJob("baseline"),)

    second = tick(trial, first.status, T0 + timedelta(minutes=3),
                  baseline=JobView("Running", T0, log=log(60, 40_000, T0)))  # fmt: skip
    assert second.actions == (StopJob("baseline"), CreateJob("candidate"))


def test_a_failed_run_ends_the_trial_with_its_log_lines_and_stops_the_other() -> None:
    trial = spec()
    first = tick(trial, TrainingTrialStatus(), T0)
    lines = (*log(12, 60_000, T0), "2026-12-07T12:01:00Z RuntimeError: NaN in all-reduce")
    ended = tick(trial, first.status, T0 + timedelta(minutes=3),
                 baseline=JobView("Running", T0, log=log(20, 40_000, T0)),
                 candidate=JobView("Failed", T0, failure="BackoffLimitExceeded: Job has reached "
                                   "the specified backoff limit", log=lines))  # fmt: skip

    assert ended.status.phase == "Failed"
    assert ended.status.decision.reason_code == "RunFailed"
    assert "RuntimeError: NaN in all-reduce" in ended.status.decision.reason
    assert ended.status.runs.candidate.log_lines[-1] == "RuntimeError: NaN in all-reduce"
    assert ended.actions == (StopJob("baseline"),)


def test_a_job_that_never_logs_a_training_step_fails_naming_the_formats() -> None:
    trial = spec()
    first = tick(trial, TrainingTrialStatus(), T0)
    chatter = ("2026-12-07T12:00:01Z loading checkpoint", "2026-12-07T12:00:02Z done")
    ended = tick(trial, first.status, T0 + timedelta(minutes=3),
                 baseline=JobView("Succeeded", T0, log=chatter),
                 candidate=JobView("Running", T0, log=log(5, 60_000, T0)))  # fmt: skip

    assert ended.status.phase == "Failed"
    assert ended.status.decision.reason_code == "NoSteps"
    assert "no line acceltrial reads as a training step" in ended.status.decision.reason
    assert ended.status.decision.reason.endswith("loading checkpoint\ndone")
    assert ended.actions == (StopJob("candidate"),)


def test_a_precompile_runs_first_and_its_failure_is_compile_failed_with_its_log() -> None:
    trial = spec(precompile={"timeout": "30m"}, compileCache={"url": "s3://cache/llama/"})
    first = tick(trial, TrainingTrialStatus(), T0)
    assert first.status.phase == "Compiling"
    assert set(first.actions) == {CreateJob("precompile"), CreateJob("baseline")}

    failed = tick(trial, first.status, T0 + timedelta(minutes=2),
                  baseline=JobView("Running", T0, log=log(5, 40_000, T0)),
                  precompile=JobView("Failed", T0, failure="BackoffLimitExceeded",
                                     log=("2026-12-07T12:01:00Z ERROR neuronx-cc: "
                                          "Estimated peak HBM usage exceeds 16GB",)))  # fmt: skip
    assert failed.status.phase == "Failed"
    assert failed.status.decision.reason_code == "CompileFailed"
    assert "Estimated peak HBM usage exceeds 16GB" in failed.status.decision.reason
    assert failed.actions == (StopJob("baseline"),)


def test_a_precompile_that_succeeded_counts_into_the_candidates_cost() -> None:
    trial = spec(precompile={"timeout": "30m"}, compileCache={"url": "s3://cache/llama/"})
    first = tick(trial, TrainingTrialStatus(), T0)
    compiled = tick(trial, first.status, T0 + timedelta(minutes=20),
                    precompile=JobView("Succeeded", T0, T0 + timedelta(minutes=15)),
                    baseline=JobView("Running", T0, log=log(20, 40_000, T0)))  # fmt: skip
    assert CreateJob("candidate") in compiled.actions
    assert compiled.status.runs.candidate.precompile_seconds == 900

    start = T0 + timedelta(minutes=20)
    done = tick(trial, compiled.status, start + timedelta(minutes=5),
                baseline=JobView("Running", T0, log=log(60, 40_000, T0)),
                candidate=JobView("Running", start, log=log(60, 60_000, start)))  # fmt: skip
    candidate = done.status.economics.candidate
    precompile_cost = 0.25 * 2 * 21.50
    assert candidate.cost_per_run == pytest.approx(
        candidate.cost_per_hour * candidate.hours_per_run + precompile_cost, rel=1e-6
    )


def test_preflight_problems_fail_the_trial_before_any_job() -> None:
    trial = spec()
    world = TrainingWorld(T0, {}, PRICES, Preflight(("trn1.32xlarge has 16 Neuron devices",)))
    ended = training_tick(trial, TrainingTrialStatus(), world)
    assert ended.status.phase == "Failed"
    assert ended.status.decision.reason_code == "PreflightFailed"
    assert ended.actions == ()


def test_preflight_waits_in_preflight_then_fails_past_the_run_timeout_and_notes_pass() -> None:
    trial = spec(run={"steps": 60, "warmupSteps": 10, "sequenceLength": 4096, "timeout": "5m"})
    waiting = Preflight(waits=("EKS throttled",), notes=("cache not checked",))
    first = training_tick(trial, TrainingTrialStatus(), TrainingWorld(T0, {}, PRICES, waiting))
    assert (first.status.phase, first.actions) == ("Preflight", ())
    assert first.status.message == "preflight: waiting for EKS throttled"
    later = T0 + timedelta(minutes=6)
    ended = training_tick(trial, first.status, TrainingWorld(later, {}, PRICES, waiting))
    assert ended.status.decision.reason_code == "PreflightFailed"
    assert "waited 360s (run.timeout) for: EKS throttled" in ended.status.decision.reason
    noted = Preflight(notes=("cache not checked",), capacity_source="existing trn1 Nodes")
    started = training_tick(trial, TrainingTrialStatus(), TrainingWorld(T0, {}, PRICES, noted))
    assert started.status.phase == "Running"
    assert started.status.preflight_notes == ["cache not checked"]
    assert started.status.capacity_source == "existing trn1 Nodes"


METRICS = {
    "prometheus": {"address": "http://prometheus:9090"},
    "interval": "30s",
    "tokensPerSecond": 'sum(rate(train_tokens_total{pod=~"{{pods}}"}[{{interval}}]))',
}


def finished(trial: Any) -> TrainingTick:
    """Both runs finished (the candidate twice as fast by its log)."""
    first = tick(trial, TrainingTrialStatus(), T0)
    return tick(trial, first.status, T0 + timedelta(minutes=5),
                baseline=JobView("Running", T0, log=log(60, 40_000, T0)),
                candidate=JobView("Running", T0, log=log(60, 80_000, T0)))  # fmt: skip


def test_with_metrics_the_decision_waits_for_prometheus_and_uses_its_throughput() -> None:
    trial = spec(metrics=METRICS)
    ran = finished(trial)
    assert ran.status.phase == "Running"
    assert ran.status.message == "reading Prometheus over the steady steps of: baseline, candidate"
    run = ran.status.runs.candidate
    assert run.steady_from == T0 + timedelta(seconds=22)  # step 11, the first after the warm-up
    assert run.last_step_at == T0 + timedelta(seconds=120)
    utilization = Rate(mean=0.9, low=0.88, high=0.92)
    exported = {
        "baseline": ExportedReading(tokens_per_second=Rate(mean=40_000, low=39_900, high=40_100),
                                    accelerator_utilization=utilization, samples=4),
        "candidate": ExportedReading(tokens_per_second=Rate(mean=60_000, low=59_900, high=60_100),
                                     accelerator_utilization=utilization, samples=4),
    }  # fmt: skip
    world = TrainingWorld(T0 + timedelta(minutes=6), {}, PRICES, exported=exported)
    done = training_tick(trial, ran.status, world)

    assert done.status.phase == "Recommended", done.status.message
    candidate = done.status.runs.candidate
    assert candidate.throughput_source == "prometheus"
    assert candidate.prometheus.accelerator_utilization.mean == 0.9
    assert candidate.tokens_per_second.mean == pytest.approx(80_000, rel=0.01)  # the log's, kept
    # Projected from Prometheus' 60,000 tokens/s, not the log's 80,000.
    hours = 2e9 / 60_000 / 3600
    assert done.status.economics.candidate.hours_per_run == pytest.approx(hours, rel=0.01)


def test_prometheus_that_never_answers_is_noted_and_the_log_decides() -> None:
    trial = spec(metrics=METRICS)
    ran = finished(trial)
    soon = training_tick(trial, ran.status, TrainingWorld(T0 + timedelta(minutes=6), {}, PRICES))
    assert soon.status.phase == "Running"  # within the grace (3 x 30 s after the runs' end)
    late = TrainingWorld(T0 + timedelta(minutes=7), {}, PRICES)
    done = training_tick(trial, soon.status, late)

    assert done.status.phase == "Recommended"
    candidate = done.status.runs.candidate
    assert candidate.prometheus.note == "Prometheus did not answer within 90s of the run's end"
    assert candidate.throughput_source == "log"
    hours = 2e9 / 80_000 / 3600
    assert done.status.economics.candidate.hours_per_run == pytest.approx(hours, rel=0.01)
