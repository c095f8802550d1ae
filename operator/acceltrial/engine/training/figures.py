"""One variant's trial run read from its log (the lines the pod printed, each with the time the
kubelet stamped on it) into what the decision weighs: steps, the time to the first step,
steady-state speed, seconds per step, the final loss, and a full run's cost and time. Pure.

The time to the first step runs from the Job's creation to the first training step's line:
scheduling, image pull, compilation or graph loading, the data pipeline filling. Seconds per
step come from the timestamps of the steps after the warm-up (the speed a log reports is the
script's own reading; the timestamps are the kubelet's).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from acceltrial.api.training import FullRunSpec, TrialRunSpec
from acceltrial.engine.training.decision import Figure
from acceltrial.engine.training.logs import ParsedLog, StepRecord, parse_line
from acceltrial.engine.training.runs import (
    RunEconomics,
    RunPrice,
    Speed,
    run_economics,
    steady_speed,
)


@dataclass(frozen=True)
class TimedLog:
    """A log's training steps, each with when its line was printed (None: not stamped)."""

    parsed: ParsedLog
    printed_at: dict[int, datetime | None]
    last_lines: tuple[str, ...]
    """The log's last lines as printed (for a failure's message)."""

    @property
    def steps(self) -> int:
        return max((r.step for r in self.parsed.records), default=0)


def read_timed_log(lines: Sequence[str], keep: int = 20) -> TimedLog:
    """The steps of a log read with ``timestamps=true`` (``<RFC 3339 time> <line>``)."""
    found: dict[int, StepRecord] = {}
    printed: dict[int, datetime | None] = {}
    texts: list[str] = []
    last = 0
    for raw in lines:
        at, text = split_timestamp(raw)
        texts.append(text)
        record = parse_line(text, last + 1)
        if record is not None:
            found[record.step] = record
            printed.setdefault(record.step, at)
            last = record.step
    records = tuple(found[s] for s in sorted(found))
    return TimedLog(ParsedLog(records, len(texts)), printed, tuple(texts[-keep:]))


def split_timestamp(line: str) -> tuple[datetime | None, str]:
    """``2026-12-07T11:00:00.123456789Z text`` into its time and its text."""
    head, _, rest = line.partition(" ")
    if not head[:4].isdigit() or "T" not in head:
        return None, line
    stamp = head.rstrip("Z")
    whole, _, fraction = stamp.partition(".")
    try:
        at = datetime.fromisoformat(f"{whole}.{fraction[:6]:0<6}+00:00")
    except ValueError:
        return None, line
    return at, rest


@dataclass(frozen=True)
class RunReading:
    """What one variant's trial run measured."""

    steps: int
    first_step_at: datetime | None
    startup_seconds: float | None
    speed: Speed
    seconds_per_step: float | None
    final_loss: float | None


def reading(log: TimedLog, run: TrialRunSpec, started_at: datetime | None) -> RunReading:
    records = log.parsed.records
    first_at = next((log.printed_at.get(r.step) for r in records), None)
    startup = None
    if first_at is not None and started_at is not None:
        startup = max(0.0, (first_at - started_at).total_seconds())
    steady = [r.step for r in records if r.step > run.warmup_steps]
    stamps = [log.printed_at.get(s) for s in steady]
    per_step = None
    if len(steady) >= 2 and stamps[0] is not None and stamps[-1] is not None:
        span = (stamps[-1] - stamps[0]).total_seconds()
        per_step = span / (steady[-1] - steady[0]) if span > 0 else None
    losses = [r.loss for r in records if r.loss is not None]
    return RunReading(
        steps=log.steps,
        first_step_at=first_at,
        startup_seconds=startup,
        speed=steady_speed(records, run.warmup_steps, run.sequence_length),
        seconds_per_step=per_step,
        final_loss=losses[-1] if losses else None,
    )


@dataclass(frozen=True)
class VariantFigures:
    """A variant's figures for the decision, its full run's economics at the mean speed, and
    why a figure is missing."""

    figures: dict[str, Figure | None]
    economics: RunEconomics | None
    missing: dict[str, str]


def variant_figures(run: RunReading, price: RunPrice, full_run: FullRunSpec) -> VariantFigures:
    """Cost and time per full run (with the range the speed's interval gives), tokens per
    dollar and the time to the first step."""
    startup = run.startup_seconds or 0.0
    priced = RunPrice(price.price_per_node_hour, price.nodes, startup, price.precompile_node_hours)
    tokens = run.speed.tokens_per_second
    at = {
        name: run_economics(
            priced,
            tokens_per_second=value,
            full_run_tokens=full_run.tokens,
            full_run_steps=full_run.steps,
            seconds_per_step=run.seconds_per_step,
        )
        for name, value in (
            ("mean", tokens.mean if tokens else None),
            ("slow", tokens.low if tokens else None),
            ("fast", tokens.high if tokens else None),
        )
    }
    mean, slow, fast = at["mean"], at["slow"] or at["mean"], at["fast"] or at["mean"]
    figures: dict[str, Figure | None] = {
        "time_to_first_step": None if run.startup_seconds is None else Figure.exact(startup),
        "cost_per_run": None,
        "time_per_run": None,
        "tokens_per_dollar": None,
    }
    missing: dict[str, str] = {}
    if run.startup_seconds is None:
        missing["time_to_first_step"] = "no training step was read from the log"
    if mean is None or slow is None or fast is None or full_run.steps is not None:
        # A run counted in steps has no speed interval (seconds per step come from timestamps).
        if mean is not None:
            figures["cost_per_run"] = Figure.exact(mean.cost_per_run)
            figures["time_per_run"] = Figure.exact(mean.hours_per_run)
            if mean.tokens_per_dollar is not None:
                figures["tokens_per_dollar"] = Figure.exact(mean.tokens_per_dollar)
        else:
            why = _why_no_speed(run, full_run)
            missing.update(cost_per_run=why, time_per_run=why, tokens_per_dollar=why)
        return VariantFigures(figures, mean, missing)
    figures["cost_per_run"] = Figure(mean.cost_per_run, fast.cost_per_run, slow.cost_per_run)
    figures["time_per_run"] = Figure(mean.hours_per_run, fast.hours_per_run, slow.hours_per_run)
    if mean.tokens_per_dollar and slow.tokens_per_dollar and fast.tokens_per_dollar:
        figures["tokens_per_dollar"] = Figure(
            mean.tokens_per_dollar, slow.tokens_per_dollar, fast.tokens_per_dollar
        )
    return VariantFigures(figures, mean, missing)


def _why_no_speed(run: RunReading, full_run: FullRunSpec) -> str:
    if run.steps == 0:
        return "no training step was read from the log"
    if full_run.tokens is not None:
        return (
            "the log reports neither tokens per second nor samples per second with "
            "run.sequenceLength set, so a run of fullRun.tokens cannot be timed"
        )
    return "fewer than two steps after the warm-up were printed with a timestamp"
