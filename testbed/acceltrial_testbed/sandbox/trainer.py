"""The simulated trainer: what a training Job's pod prints, line by line and when, and how it
ends, as a training script does. The test bed plays it for the pods of a TrainingTrial's Jobs
(sandbox/realplane/pod_logs.py writes the lines as they fall due); the operator reads them
through ``pods/<name>/log`` like any training log.

The behaviour comes from the pod's ``sandbox.acceltrial.dev/trainer`` annotation (JSON of
:class:`Behaviour`; the demo sets it from a scenario's ``trainers``), the role from the pod's
``acceltrial.dev/variant`` label and the steps from its ``ACCELTRIAL_TRIAL_STEPS`` env:

- a run (``baseline`` or ``candidate``) prints a few lines of start-up for
  ``startupSeconds``, then one line per step every ``stepSeconds`` in its ``format`` (JSON
  lines, NxD Training's ``step_loss : ... throughput : ...`` with sequences per second, or
  Katib's ``name=value``), its throughput the job's ``tokensPerSecond`` with a 1% wobble and
  its loss falling from ``loss.initial`` to ``loss.final``; with ``fails: run`` it dies a third
  of the way through (a Python traceback, exit code 1). Its tokens are also counted as a
  script exports them (:meth:`Script.tokens_by`; sandbox/trainer_metrics.py serves the
  counter and the accelerator exporters' utilization of its nodes);
- a ``precompile`` pod prints ``neuron_parallel_compile``'s lines for ``compileSeconds`` and
  ends with exit code 0, or with ``fails: compile`` a neuronx-cc error and exit code 1.

Pure: the script is computed from the behaviour; playing it is the pod log server's business.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

TRAINER = "sandbox.acceltrial.dev/trainer"
"""The pod annotation holding the trainer's behaviour (JSON)."""
HOLD = {
    "pod-complete.stage.kwok.x-k8s.io/delay": "24h",
    "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "24h",
}
"""Keeps kwok's pod-complete stage from ending the pod by itself (its delay and its jitter,
both: the jitter of 5 s bounds the delay otherwise): the trainer ends it (exit-code
annotation)."""
STEPS_ENV = "ACCELTRIAL_TRIAL_STEPS"


class Loss(BaseModel):
    model_config = ConfigDict(extra="forbid")

    initial: float = Field(gt=0)
    final: float = Field(gt=0)


class Behaviour(BaseModel):
    """What a scenario's ``trainers.<variant>`` says, with the job's figures worked out."""

    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)

    tokens_per_second: float = Field(gt=0)
    """The whole job's (the scenario's per node, times the nodes)."""
    startup_seconds: float = Field(default=5.0, ge=0, le=600)
    loss: Loss = Loss(initial=4.0, final=2.0)
    fails: Literal["compile", "run"] | None = None
    format: Literal["json", "nxd", "katib"] = "json"
    sequence_length: int = Field(default=4096, ge=1)
    step_seconds: float = Field(default=0.25, gt=0, le=60)
    compile_seconds: float = Field(default=3.0, ge=0, le=600)
    utilization: float = Field(default=0.9, gt=0, le=1)
    """The accelerators' utilization while it trains (its exporter reports a trickle before)."""
    logs_throughput: bool = True
    """False: the JSON and Katib lines carry the step and the loss only, and the throughput is
    in the exported counter alone (``train_tokens_total``)."""
    seed: int = 0


@dataclass(frozen=True)
class Script:
    """The lines a pod prints, each at its offset in seconds from the pod's start, and how it
    ends: its exit code at ``ends_at``."""

    lines: tuple[tuple[float, str], ...]
    ends_at: float
    exit_code: int
    tokens: tuple[tuple[float, float], ...] = ()
    """Each step's tokens, at the offset its line is printed (what the script's counter adds)."""

    def tokens_by(self, elapsed: float) -> float:
        """The script's ``train_tokens_total`` counter ``elapsed`` seconds after the start."""
        return sum(tokens for at, tokens in self.tokens if at <= elapsed)

    def training(self, elapsed: float) -> bool:
        """Whether the script is between its first and its last step (its accelerators busy)."""
        return bool(self.tokens) and self.tokens[0][0] <= elapsed <= self.tokens[-1][0]


def script(behaviour: Behaviour, role: str, steps: int) -> Script:
    """What the pod of ``role`` prints and when it ends."""
    if role == "precompile":
        return _precompile(behaviour)
    rng = random.Random(f"{behaviour.seed}-{role}")
    lines: list[tuple[float, str]] = [
        (0.0, "loading checkpoint shards: 100%"),
        (behaviour.startup_seconds / 2, "model and data loader ready; starting training"),
    ]
    if role == "candidate" and behaviour.fails == "compile":
        at = behaviour.startup_seconds
        lines += [(at, f"ERROR {line}") for line in COMPILE_ERROR]
        return Script(tuple(lines), at + 0.5, 1)
    last = max(3, steps // 3) if behaviour.fails == "run" else steps
    tokens: list[tuple[float, float]] = []
    for step in range(1, last + 1):
        at = behaviour.startup_seconds + step * behaviour.step_seconds
        rate = behaviour.tokens_per_second * (1 + rng.gauss(0, 0.01))
        lines.append((at, _step_line(behaviour, step, steps, rate, rng)))
        tokens.append((at, rate * behaviour.step_seconds))
    end = behaviour.startup_seconds + last * behaviour.step_seconds
    if behaviour.fails == "run":
        lines += [(end + 0.1, text) for text in RUN_ERROR]
        return Script(tuple(lines), end + 0.5, 1, tuple(tokens))
    return Script(tuple(lines), end + 1.0, 0, tuple(tokens))


COMPILE_ERROR = (
    "neuronx-cc: Estimated peak HBM usage (18.2 GB) exceeds 16 GB available per NeuronCore",
    "neuronx-cc: compilation failed for graph 7 of 24 (model_1.hlo.pb)",
)
RUN_ERROR = (
    "Traceback (most recent call last):",
    '  File "train.py", line 212, in <module>',
    "RuntimeError: NRT error: collective operation timed out (rank 3)",
)


def _precompile(behaviour: Behaviour) -> Script:
    seconds = behaviour.compile_seconds
    lines = [(0.0, "neuron_parallel_compile: extracting graphs from 10 steps"),
             (seconds / 2, "neuron_parallel_compile: compiling 24 graphs")]  # fmt: skip
    if behaviour.fails == "compile":
        lines += [(seconds, f"ERROR {line}") for line in COMPILE_ERROR]
        return Script(tuple(lines), seconds + 0.5, 1)
    summary = {"compilation_summary": {"total": 24, "successful": 24, "failed": 0}}
    lines.append((seconds, json.dumps(summary)))
    return Script(tuple(lines), seconds + 0.5, 0)


def _step_line(
    behaviour: Behaviour, step: int, steps: int, tokens: float, rng: random.Random
) -> str:
    loss = _loss(behaviour.loss, step, steps) * (1 + rng.gauss(0, 0.002))
    if behaviour.format == "nxd":
        samples = tokens / behaviour.sequence_length
        return (f"[0]: LOG Mon Dec  7 12:00:00 2026 - (0, {step}) step_loss : {loss:.4f} "
                f"learning_rate : 1.00E-04 throughput : {samples:.2f}")  # fmt: skip
    speed = f" tokens_per_second={tokens:.1f}" if behaviour.logs_throughput else ""
    if behaviour.format == "katib":
        return f"step={step} loss={loss:.5f}{speed}"
    line: dict[str, float] = {"step": step, "loss": round(loss, 5)}
    if behaviour.logs_throughput:
        line["tokens_per_second"] = round(tokens, 1)
    return json.dumps(line)


def _loss(loss: Loss, step: int, steps: int) -> float:
    """From ``initial`` towards ``final``, reaching it at the last step (an exponential)."""
    shape = (1 - math.exp(-4 * step / steps)) / (1 - math.exp(-4))
    return loss.initial + (loss.final - loss.initial) * shape
