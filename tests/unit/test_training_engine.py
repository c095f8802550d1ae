"""The training trial's pure figures: the steps a training script's log reports (NxD Training's
lines, Katib's name=value pairs, JSON lines), the steady-state speed after the warm-up, a full
run's time and cost, and the final loss gap at matched steps, each with its uncertainty."""

from __future__ import annotations

import math

import pytest

from acceltrial.engine.training.logs import StepRecord, parse_line, parse_log
from acceltrial.engine.training.loss import MIN_MATCHED_STEPS, loss_gap
from acceltrial.engine.training.runs import (
    RunPrice,
    mean_interval,
    run_economics,
    steady_speed,
)

# As the Neuron SDK's EKS tutorial shows a worker's log (kubectl logs <pod> | tail -3).
NXD = """\
[0]:LOG Wed Dec 21 00:12:27 2022 - (0, 14) step_loss : 11.2500 learning_rate : 2.80e-06 throughput : 6497.86
[0]:LOG Wed Dec 21 00:12:32 2022 - (0, 15) step_loss : 9.7500 learning_rate : 3.00e-06 throughput : 6487.78
[0]:LOG Wed Dec 21 00:12:37 2022 - (0, 16) step_loss : 11.5000 learning_rate : 3.20e-06 throughput : 6484.92 grad-norm : 1.2
"""  # noqa: E501


def test_nxd_training_lines_give_step_loss_and_samples_per_second() -> None:
    parsed = parse_log(NXD.splitlines())
    assert [r.step for r in parsed.records] == [14, 15, 16]
    assert parsed.records[1] == StepRecord(15, 9.75, None, 6487.78, "nxd")
    assert parsed.formats == {"nxd"}
    assert parsed.losses() == {14: 11.25, 15: 9.75, 16: 11.5}


def test_katib_pairs_and_json_lines_are_read_and_other_lines_are_not() -> None:
    parsed = parse_log([
        "2026-12-07T10:00:00Z INFO starting; world_size=8",
        "2026-12-07T10:00:05Z INFO step=1 loss=2.31 tokens_per_second=1.2E5",
        '{"global_step": 2, "train_loss": 2.2, "samples_per_second": 48.5}',
        "Epoch[1] Train-loss=2.1",
        "Traceback (most recent call last):",
        '{"not": "a step"}',
    ])  # fmt: skip
    assert [(r.step, r.loss, r.format) for r in parsed.records] == [
        (1, 2.31, "katib"), (2, 2.2, "json"), (3, 2.1, "katib")]  # fmt: skip
    assert parsed.records[0].tokens_per_second == 120000.0
    assert parsed.records[1].samples_per_second == 48.5
    assert parsed.lines == 6
    assert parse_line("world_size=8") is None, "no loss and no throughput: not a step's line"
    assert parse_line("loss=nan") is None, "Katib's filter reads digits only"
    diverged = parse_line('{"step": 3, "loss": NaN}')
    assert diverged is not None
    assert diverged.step == 3
    assert diverged.loss is not None
    assert math.isnan(diverged.loss), "JSON's NaN is kept: the loss judge calls it divergence"


def test_a_step_logged_twice_keeps_its_last_line() -> None:
    parsed = parse_log(["step=5 loss=3.0", "step=5 loss=2.9", "step=4 loss=3.1"])
    assert [(r.step, r.loss) for r in parsed.records] == [(4, 3.1), (5, 2.9)]


def test_the_steady_speed_leaves_out_the_warm_up_and_turns_samples_into_tokens() -> None:
    records = [StepRecord(s, 2.0, None, 10.0 if s <= 3 else 48.0 + (s % 2)) for s in range(1, 13)]
    speed = steady_speed(records, warmup_steps=3, sequence_length=8192)
    assert speed.steps == 9
    assert speed.samples_per_second is not None
    assert speed.samples_per_second.mean == pytest.approx((48 * 5 + 49 * 4) / 9)  # steps 4-12
    assert speed.tokens_per_second is not None
    assert speed.tokens_per_second.mean == pytest.approx(speed.samples_per_second.mean * 8192)
    low, high = speed.samples_per_second.low, speed.samples_per_second.high
    assert low < speed.samples_per_second.mean < high
    assert high - low < 1.0
    assert steady_speed(records, 3).tokens_per_second is None, "no sequence length, no tokens"


def test_a_full_run_costs_what_a_hand_computation_says() -> None:
    """Llama-3.1-8B on 32 trn1.32xlarge: 47.95 sequences/s of 8,192 tokens (the Neuron SDK's
    published figure), $21.50 an hour each on demand, 1T tokens, 15 minutes to the first step
    and a precompile of 32 nodes for 15 minutes."""
    tokens_per_second = 47.95 * 8192  # 392,806.4
    price = RunPrice(21.50, 32, startup_seconds=900, precompile_node_hours=32 * 0.25)
    run = run_economics(price, tokens_per_second=tokens_per_second, full_run_tokens=1e12)
    assert run is not None
    hours = 1e12 / 392_806.4 / 3600 + 0.25  # 707.41 + 0.25
    assert run.cost_per_hour == pytest.approx(688.0)
    assert run.hours_per_run == pytest.approx(hours)
    assert run.cost_per_run == pytest.approx(688.0 * hours + 8 * 21.50)
    assert run.cost_per_run == pytest.approx(486_857, rel=0.001)
    assert run.tokens_per_dollar == pytest.approx(1e12 / run.cost_per_run)
    by_steps = run_economics(RunPrice(98.32, 2), tokens_per_second=None, full_run_steps=10_000,
                             seconds_per_step=1.8)  # fmt: skip
    assert by_steps is not None
    assert by_steps.hours_per_run == pytest.approx(5.0)
    assert by_steps.cost_per_run == pytest.approx(983.2)
    assert by_steps.tokens_per_dollar is None
    assert run_economics(price, tokens_per_second=None, full_run_tokens=1e12) is None
    with pytest.raises(ValueError, match="exactly one"):
        run_economics(price, tokens_per_second=1.0)


def curve(final: float, steps: int = 40, start: float = 10.0) -> dict[int, float]:
    """A loss falling from ``start`` to ``final``, with a little step-to-step wobble."""
    return {s: final + (start - final) * math.exp(-s / 4) + 0.01 * ((s * 7) % 3 - 1)
            for s in range(1, steps + 1)}  # fmt: skip


def test_matching_curves_have_a_gap_near_zero_and_a_higher_final_loss_shows() -> None:
    same = loss_gap(curve(2.0), curve(2.0), warmup_steps=5)
    assert same.problem is None
    assert same.gap is not None
    assert same.gap.low <= 0 <= same.gap.high
    assert same.matched_steps == 35
    assert len(same.final_steps) == 8
    assert same.final_steps[-1] == 40
    higher = loss_gap(curve(2.0), curve(2.3), warmup_steps=5)
    assert higher.gap is not None
    assert higher.gap.mean == pytest.approx(0.15, abs=0.01)
    assert higher.gap.low > 0.1
    assert higher.candidate_final == pytest.approx(2.3, abs=0.05)


def test_too_few_matched_steps_or_a_diverged_loss_say_so() -> None:
    few = loss_gap(curve(2.0, steps=10), curve(2.0), warmup_steps=5)
    assert few.gap is None
    assert few.problem == (
        f"5 steps after the warm-up (5) logged a loss on both variants; loss parity needs "
        f"{MIN_MATCHED_STEPS}"
    )
    broken = curve(2.0) | {30: math.nan}
    diverged = loss_gap(curve(2.0), broken, warmup_steps=5)
    assert diverged.diverged == "candidate"
    assert diverged.problem == "the candidate's loss is nan at step 30"


def test_the_interval_is_students_t() -> None:
    found = mean_interval([1, 2, 3, 4, 5.5])
    assert found is not None
    # scipy.stats.t.interval(0.95, 4, loc=3.1, scale=sem) gives 0.93153 to 5.26847.
    assert (found.low, found.high) == (pytest.approx(0.93153, abs=1e-5),
                                       pytest.approx(5.26847, abs=1e-5))  # fmt: skip
    assert mean_interval([]) is None
    assert mean_interval([2.0]) == mean_interval([2.0, math.inf])
