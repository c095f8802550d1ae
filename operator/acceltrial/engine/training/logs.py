"""Reading a training script's log lines: the step, the loss and the throughput each line
reports, in the formats training jobs print today. Pure.

- **NxD Training** (the Neuron SDK's tutorials and ``neuronx-distributed`` examples): ``LOG
  <time> - (<epoch>, <step>) step_loss : <loss> learning_rate : <lr> throughput : <seq/s>``,
  often behind an MPI rank prefix (``[0]:``). Its throughput is sequences (samples) per second
  of the whole job.
- **Katib's StdOut collector** format: ``name=value`` pairs anywhere in a line, as Katib's
  default filter ``([\\w|-]+)\\s*=\\s*([+-]?\\d*(\\.\\d+)?([Ee][+-]?\\d+)?)`` reads them
  (``loss=0.3``, ``accuracy=.98``).
- **JSON lines**: one object per line.

Names read, whatever the format (case-insensitive): the step from ``step``, ``global_step``,
``iteration`` or ``iter``; the loss from ``loss``, ``train_loss``, ``train-loss``,
``step_loss`` or ``training_loss``; tokens per second from ``tokens_per_second``,
``tokens_per_sec`` or ``tokens-per-second``; samples per second from ``samples_per_second``,
``samples_per_sec``, ``sequences_per_second``, ``seq_per_sec`` or ``throughput``. A line with
neither a loss nor a throughput is not a training step's line. A line with no step is numbered
after the last one read (Katib's own examples print ``epoch 1: loss=...``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

LogFormat = Literal["nxd", "katib", "json"]

KATIB_FILTER = re.compile(r"([\w|-]+)\s*=\s*([+-]?\d*(\.\d+)?([Ee][+-]?\d+)?)")
"""Katib's default metrics filter (pkg/metricscollector/v1beta1/common/const.go)."""
_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|NaN|inf|-inf"
NXD_LINE = re.compile(
    rf"\((?P<epoch>\d+),\s*(?P<step>\d+)\)\s+step_loss\s*:\s*(?P<loss>{_NUMBER})"
    rf"(?:.*?\bthroughput\s*:\s*(?P<throughput>{_NUMBER}))?"
)
STEP_NAMES = frozenset({"step", "global_step", "iteration", "iter"})
LOSS_NAMES = frozenset({"loss", "train_loss", "train-loss", "step_loss", "training_loss"})
TOKEN_RATE_NAMES = frozenset({"tokens_per_second", "tokens_per_sec", "tokens-per-second"})
SAMPLE_RATE_NAMES = frozenset(
    {"samples_per_second", "samples_per_sec", "sequences_per_second", "seq_per_sec", "throughput"}
)


@dataclass(frozen=True)
class StepRecord:
    """What one log line says of one training step."""

    step: int
    loss: float | None = None
    tokens_per_second: float | None = None
    samples_per_second: float | None = None
    format: LogFormat = "katib"


@dataclass(frozen=True)
class ParsedLog:
    """The steps a log reports, in order (a step logged twice: the last line wins)."""

    records: tuple[StepRecord, ...]
    lines: int
    """Lines read."""

    @property
    def formats(self) -> frozenset[LogFormat]:
        return frozenset(record.format for record in self.records)

    def losses(self) -> dict[int, float]:
        """The loss at each step that logged one."""
        return {r.step: r.loss for r in self.records if r.loss is not None}


def parse_log(lines: Iterable[str]) -> ParsedLog:
    """The training steps ``lines`` report, whatever format each line is in."""
    found: dict[int, StepRecord] = {}
    read = 0
    last = 0
    for line in lines:
        read += 1
        record = parse_line(line, last + 1)
        if record is not None:
            found[record.step] = record
            last = record.step
    return ParsedLog(tuple(found[step] for step in sorted(found)), read)


def parse_line(line: str, next_step: int = 1) -> StepRecord | None:
    """The step ``line`` reports, or None when it reports none (``next_step`` numbers a line
    without a step)."""
    text = line.strip()
    if not text:
        return None
    nxd = NXD_LINE.search(text)
    if nxd is not None:
        throughput = nxd.group("throughput")
        return StepRecord(
            step=int(nxd.group("step")),
            loss=float(nxd.group("loss")),
            samples_per_second=None if throughput is None else float(throughput),
            format="nxd",
        )
    if text.startswith("{"):
        try:
            body = json.loads(text)
        except ValueError:
            body = None
        if isinstance(body, dict):
            return _record(body, next_step, "json")
    pairs = {m.group(1): m.group(2) for m in KATIB_FILTER.finditer(text) if m.group(2)}
    return _record(pairs, next_step, "katib") if pairs else None


def _record(values: Mapping[str, object], next_step: int, fmt: LogFormat) -> StepRecord | None:
    named = {str(key).lower(): value for key, value in values.items()}
    loss = _first(named, LOSS_NAMES)
    tokens = _first(named, TOKEN_RATE_NAMES)
    samples = _first(named, SAMPLE_RATE_NAMES)
    if loss is None and tokens is None and samples is None:
        return None
    step = _first(named, STEP_NAMES)
    whole = step is not None and math.isfinite(step) and step >= 0
    return StepRecord(int(step) if whole and step is not None else next_step, loss, tokens,
                      samples, fmt)  # fmt: skip


def _first(values: Mapping[str, object], names: frozenset[str]) -> float | None:
    for name in sorted(names):
        if name in values:
            try:
                return float(str(values[name]))
            except ValueError:
                return None
    return None
