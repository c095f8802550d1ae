"""A training run's speed and what a full run costs. Pure arithmetic on what the trial run
measured and what the catalog prices.

- **Steady-state speed** is read from the steps after the warm-up (the first steps run the
  graphs' compilation or loading, and the data pipeline filling): their throughput's mean with a
  95% interval (Student's t over the steps: successive steps are not independent, so the
  interval is a floor on the uncertainty, not its whole). A log that reports samples per second
  is turned into tokens per second with the sequence length.
- **A full run** (``spec.fullRun``: its tokens or its steps) takes ``hoursPerRun`` = its tokens
  over the job's steady tokens per second (the measured tokens per second per node times the
  nodes is the job's), or its steps times the seconds per step, over 3600, plus the one-off
  start-up (from the Job's start to its first step) in hours; ``costPerHour`` is the instance
  price times the nodes; ``costPerRun`` = ``costPerHour`` x ``hoursPerRun``, plus the
  precompile Job's node-hours at its price when there is one; tokens per dollar is the run's
  tokens over its cost.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from scipy import special  # type: ignore[import-untyped]

from acceltrial.engine.training.logs import StepRecord

CONFIDENCE = 0.95


@dataclass(frozen=True)
class Interval:
    """A mean and its 95% interval."""

    mean: float
    low: float
    high: float
    samples: int


@dataclass(frozen=True)
class Speed:
    """A variant's steady-state speed: the whole job's tokens per second (None when neither
    tokens nor samples with a sequence length were logged), and its steps per second."""

    tokens_per_second: Interval | None
    samples_per_second: Interval | None
    steps: int
    """Steps after the warm-up that logged a throughput."""


def mean_interval(values: Sequence[float]) -> Interval | None:
    """The mean of ``values`` and its 95% interval (Student's t); None without any."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return None
    count = len(finite)
    mean = sum(finite) / count
    if count < 2:
        return Interval(mean, mean, mean, 1)
    deviation = math.sqrt(sum((v - mean) ** 2 for v in finite) / (count - 1))
    # scipy.special's inverse of Student's t, not scipy.stats (46 MiB more of the operator's RSS).
    half = float(special.stdtrit(count - 1, (1 + CONFIDENCE) / 2)) * deviation / math.sqrt(count)
    return Interval(mean, mean - half, mean + half, count)


def steady_speed(
    records: Sequence[StepRecord], warmup_steps: int, sequence_length: int | None = None
) -> Speed:
    """The speed of the steps after the first ``warmup_steps`` (by step number)."""
    steady = [r for r in records if r.step > warmup_steps]
    tokens = [r.tokens_per_second for r in steady if r.tokens_per_second is not None]
    samples = [r.samples_per_second for r in steady if r.samples_per_second is not None]
    if not tokens and samples and sequence_length:
        tokens = [s * sequence_length for s in samples]
    return Speed(mean_interval(tokens), mean_interval(samples), max(len(tokens), len(samples)))


@dataclass(frozen=True)
class RunPrice:
    """What one variant's run is priced at."""

    price_per_node_hour: float
    nodes: int
    startup_seconds: float = 0.0
    """From the Job's start to the first step: image pull, compile or graph load."""
    precompile_node_hours: float = 0.0
    """The precompile Job's nodes times its hours (priced at the same instance)."""


@dataclass(frozen=True)
class RunEconomics:
    """``status.economics.<variant>`` of a training trial (USD, hours)."""

    cost_per_hour: float
    hours_per_run: float
    cost_per_run: float
    tokens_per_dollar: float | None


def run_economics(
    price: RunPrice,
    *,
    tokens_per_second: float | None,
    full_run_tokens: float | None = None,
    full_run_steps: float | None = None,
    seconds_per_step: float | None = None,
) -> RunEconomics | None:
    """A full run's time and cost at the measured speed (exactly one of ``full_run_tokens``
    and ``full_run_steps``); None when the speed it needs was not measured."""
    if (full_run_tokens is None) == (full_run_steps is None):
        raise ValueError("give exactly one of full_run_tokens and full_run_steps")
    if full_run_tokens is not None:
        if not tokens_per_second or tokens_per_second <= 0:
            return None
        steady_seconds = full_run_tokens / tokens_per_second
        tokens: float | None = full_run_tokens
    else:
        assert full_run_steps is not None
        if not seconds_per_step or seconds_per_step <= 0:
            return None
        steady_seconds = full_run_steps * seconds_per_step
        tokens = None if not tokens_per_second else tokens_per_second * steady_seconds
    cost_per_hour = price.price_per_node_hour * price.nodes
    hours = (steady_seconds + price.startup_seconds) / 3600
    cost = cost_per_hour * hours + price.precompile_node_hours * price.price_per_node_hour
    return RunEconomics(
        cost_per_hour=cost_per_hour,
        hours_per_run=hours,
        cost_per_run=cost,
        tokens_per_dollar=None if tokens is None or cost <= 0 else tokens / cost,
    )
