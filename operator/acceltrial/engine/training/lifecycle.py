"""A training trial's state machine: from the spec, the recorded status and what the cluster
shows (its Jobs, their logs, the preflight's findings, the prices), the next status and the
Jobs to create or stop. Pure: the handlers read the world and carry out the actions.

Phases: ``Pending`` -> (``Compiling`` while the precompile Job runs) -> ``Running`` (the
baseline's and the candidate's Jobs, side by side or one after the other) -> ``Recommended``,
``NotRecommended`` or ``Failed``. A run is finished when its log reports ``run.steps`` steps
(its Job is then stopped, giving the nodes back) or its Job completes; a Job that fails, runs
past its deadline, or completes without one readable training step fails the trial with its
log's last lines. Once both runs are finished the decision (engine/training/decision.py) is
made and every Job still running is stopped.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from acceltrial.api.durations import duration_seconds
from acceltrial.api.training import (
    LossParityStatus,
    RunEconomicsStatus,
    RunStatus,
    TrainingDecision,
    TrainingTrialSpec,
    TrainingTrialStatus,
)
from acceltrial.api.training.status import (
    EconomicsPair,
    ExportedReading,
    Rate,
    RunPair,
    TrainingCriterionResult,
    TrainingReasonCode,
)
from acceltrial.engine.training.decision import Figure, judge
from acceltrial.engine.training.figures import (
    RunReading,
    TimedLog,
    read_timed_log,
    reading,
    variant_figures,
)
from acceltrial.engine.training.jobs import Role
from acceltrial.engine.training.loss import loss_curve, loss_gap
from acceltrial.engine.training.runs import Interval, RunEconomics, RunPrice, Speed

Variant = Literal["baseline", "candidate"]
VARIANTS: tuple[Variant, ...] = ("baseline", "candidate")
JobPhase = Literal["Absent", "Running", "Succeeded", "Failed"]
EXPORTED_GRACE_SECONDS = 60.0
"""How long after a run's end the decision waits for Prometheus to answer (at least three
spec.metrics.interval)."""


@dataclass(frozen=True)
class JobView:
    """A training trial's Job as the cluster holds it, with its first pod's log."""

    phase: JobPhase
    created_at: datetime | None = None
    finished_at: datetime | None = None
    failure: str | None = None
    """For a failed Job: its condition's reason and message."""
    log: tuple[str, ...] = ()
    """The log of its first pod (rank 0), each line with its timestamp."""


ABSENT = JobView("Absent")


@dataclass(frozen=True)
class NodePrice:
    """One node hour of a variant's instance type, discounts applied."""

    usd_per_hour: float
    source: str


@dataclass(frozen=True)
class Preflight:
    """What preflight found: problems end the trial; waits keep it in Preflight (within
    run.timeout); notes are recorded and let pass."""

    problems: tuple[str, ...] = ()
    waits: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    capacity_source: str | None = None


@dataclass(frozen=True)
class TrainingWorld:
    """What the handlers read for one tick."""

    now: datetime
    jobs: Mapping[Role, JobView]
    prices: Mapping[Variant, NodePrice]
    preflight: Preflight | None = None
    """What preflight found; None once the trial has started (it is judged at the start)."""
    exported: Mapping[Variant, ExportedReading] = field(default_factory=dict)
    """Prometheus over a finished run's steady steps (spec.metrics), for the runs the status
    has none for yet; a run absent here was not answered this tick."""


@dataclass(frozen=True)
class CreateJob:
    role: Role


@dataclass(frozen=True)
class StopJob:
    """Delete the Job and its pods: the run is over, the nodes go back."""

    role: Role


Action = CreateJob | StopJob


@dataclass(frozen=True)
class TrainingTick:
    status: TrainingTrialStatus
    actions: tuple[Action, ...] = ()


@dataclass
class _Step:
    """One tick's inputs and what it has decided so far."""

    spec: TrainingTrialSpec
    status: TrainingTrialStatus
    world: TrainingWorld
    runs: dict[Variant, RunStatus]
    actions: list[Action] = field(default_factory=list)


def training_tick(
    spec: TrainingTrialSpec, status: TrainingTrialStatus, world: TrainingWorld
) -> TrainingTick:
    """The next status and actions (see the module docstring)."""
    if status.phase in ("Recommended", "NotRecommended", "Failed"):
        return TrainingTick(status, _stop_running(world))
    if status.phase in ("Pending", "Preflight"):
        checked = _preflight(spec, status, world)
        if isinstance(checked, TrainingTick):
            return checked
        status = checked
    return _running(spec, status, world)


def _running(
    spec: TrainingTrialSpec, status: TrainingTrialStatus, world: TrainingWorld
) -> TrainingTick:
    """A tick past preflight: the precompile, each run, then the decision."""
    step = _Step(spec, status, world, {v: _run(status, v) for v in VARIANTS})
    runs, actions = step.runs, step.actions
    if spec.precompile is not None and runs["candidate"].precompile_seconds is None:
        outcome = _precompile(step)
        if isinstance(outcome, TrainingTick):
            return outcome
    for variant in VARIANTS:
        if runs[variant].state == "Finished" or not _may_start(spec, variant, runs):
            continue
        outcome = _advance(step, variant)
        if isinstance(outcome, TrainingTick):
            return outcome
    if all(runs[v].state == "Finished" for v in VARIANTS):
        waiting = _exported(spec, world, runs)
        step.status = _with_runs(status, runs)
        if waiting is None:
            return _decide(step)
        return TrainingTick(step.status.model_copy(update={"message": waiting}), tuple(actions))
    status = _with_runs(status, runs)
    # Compiling while the precompile runs, whatever the baseline does meanwhile.
    phase = "Compiling" if runs["candidate"].state == "Compiling" else "Running"
    message = _progress(spec, runs)
    return TrainingTick(status.model_copy(update={"phase": phase, "message": message}),
                        tuple(actions))  # fmt: skip


def _preflight(
    spec: TrainingTrialSpec, status: TrainingTrialStatus, world: TrainingWorld
) -> TrainingTrialStatus | TrainingTick:
    """The status to run with once preflight passes, or the tick that fails or waits."""
    found = world.preflight or Preflight()
    started = status.started_at or world.now
    status = status.model_copy(update={
        "started_at": started, "preflight_notes": list(found.notes)[:16] or None,
        "capacity_source": (found.capacity_source or "")[:512] or None,
    })  # fmt: skip
    if found.problems:
        return _fail(status, world, "PreflightFailed", "; ".join(found.problems))
    if found.waits:
        waited = (world.now - started).total_seconds()
        if waited > duration_seconds(spec.run.timeout):
            why = f"preflight waited {waited:.0f}s (run.timeout) for: " + "; ".join(found.waits)
            return _fail(status, world, "PreflightFailed", why)
        message = "preflight: waiting for " + "; ".join(found.waits)
        return TrainingTick(status.model_copy(update={"phase": "Preflight", "message": message}))
    phase = "Compiling" if spec.precompile is not None else "Running"
    return status.model_copy(update={"phase": phase, "started_at": world.now})


def _run(status: TrainingTrialStatus, variant: Variant) -> RunStatus:
    recorded = getattr(status.runs, variant) if status.runs is not None else None
    return recorded if recorded is not None else RunStatus()


def _with_runs(status: TrainingTrialStatus, runs: dict[Variant, RunStatus]) -> TrainingTrialStatus:
    return status.model_copy(update={"runs": RunPair(**runs)})


def _may_start(spec: TrainingTrialSpec, variant: Variant, runs: dict[Variant, RunStatus]) -> bool:
    if variant == "baseline":
        return True
    if spec.precompile is not None and runs["candidate"].precompile_seconds is None:
        return False
    return spec.schedule == "parallel" or runs["baseline"].state == "Finished"


def _precompile(step: _Step) -> TrainingTick | None:
    spec, status, world, runs, actions = step.spec, step.status, step.world, step.runs, step.actions
    job = world.jobs.get("precompile", ABSENT)
    run = runs["candidate"]
    if job.phase == "Absent":
        if run.state == "Compiling":
            return _fail(status, world, "CompileFailed",
                         "the precompile Job was deleted before it finished")  # fmt: skip
        actions.append(CreateJob("precompile"))
        runs["candidate"] = run.model_copy(update={"state": "Compiling", "started_at": world.now})
        return None
    if job.phase == "Failed":
        lines = _tail(job.log, spec.run.log_lines)
        runs["candidate"] = run.model_copy(update={"state": "Failed", "log_lines": list(lines)})
        why = f"the precompile Job failed ({job.failure or 'Failed'})" + _quoted(lines)
        return _fail(_with_runs(status, runs), world, "CompileFailed", why)
    if job.phase == "Succeeded":
        began, ended = job.created_at or run.started_at, job.finished_at or world.now
        seconds = max(0.0, (ended - began).total_seconds()) if began else 0.0
        runs["candidate"] = run.model_copy(
            update={"state": "Waiting", "precompile_seconds": seconds, "started_at": None}
        )
    return None


def _advance(step: _Step, variant: Variant) -> TrainingTick | None:
    spec, status, world, runs, actions = step.spec, step.status, step.world, step.runs, step.actions
    run, job = runs[variant], world.jobs.get(variant, ABSENT)
    if job.phase == "Absent":
        if run.started_at is not None and run.state == "Running":
            why = f"the {variant}'s Job was deleted before its run finished"
            return _fail(status, world, "RunFailed", why)
        actions.append(CreateJob(variant))
        runs[variant] = run.model_copy(update={"state": "Running", "started_at": world.now})
        return None
    log = read_timed_log(job.log, keep=spec.run.log_lines)
    measured = reading(log, spec.run, run.started_at or job.created_at)
    run = _measured(run, measured, log, spec.run.warmup_steps)
    if log.steps >= spec.run.steps or job.phase == "Succeeded":
        if log.steps == 0:
            runs[variant] = run.model_copy(update={"state": "Failed"})
            why = (f"the {variant}'s log has no line acceltrial reads as a training step "
                   "(NxD Training's step_loss lines, name=value pairs, or JSON lines)")  # fmt: skip
            return _fail(_with_runs(status, runs), world, "NoSteps", why + _quoted(log.last_lines))
        if job.phase == "Running":
            actions.append(StopJob(variant))
        runs[variant] = run.model_copy(update={"state": "Finished", "finished_at": world.now})
        return None
    if job.phase == "Failed":
        runs[variant] = run.model_copy(
            update={"state": "Failed", "log_lines": list(log.last_lines)}
        )
        why = f"the {variant}'s Job failed ({job.failure or 'Failed'})"
        return _fail(_with_runs(status, runs), world, "RunFailed", why + _quoted(log.last_lines))
    runs[variant] = run
    return None


def _exported(
    spec: TrainingTrialSpec, world: TrainingWorld, runs: dict[Variant, RunStatus]
) -> str | None:
    """Record what Prometheus answered for the finished runs (spec.metrics); the message to
    wait with while a run has no answer yet, within EXPORTED_GRACE of its end."""
    if spec.metrics is None:
        return None
    waiting = []
    for v in VARIANTS:
        run = runs[v]
        if run.prometheus is not None:
            continue
        if v in world.exported:
            runs[v] = run.model_copy(update={"prometheus": world.exported[v]})
            continue
        ended = run.finished_at or world.now
        grace = max(EXPORTED_GRACE_SECONDS, 3 * duration_seconds(spec.metrics.interval))
        if (world.now - ended).total_seconds() <= grace:
            waiting.append(v)
            continue
        note = f"Prometheus did not answer within {grace:.0f}s of the run's end"
        runs[v] = run.model_copy(update={"prometheus": ExportedReading(note=note)})
    if not waiting:
        return None
    return "reading Prometheus over the steady steps of: " + ", ".join(waiting)


def _measured(run: RunStatus, measured: RunReading, log: TimedLog, warmup_steps: int) -> RunStatus:
    speed = measured.speed
    losses = {s: v for s, v in log.parsed.losses().items() if s > warmup_steps}
    steady = [log.printed_at.get(s) for s in sorted(log.printed_at) if s > warmup_steps]
    stamped = [at for at in steady if at is not None]
    return run.model_copy(update={
        "steady_from": stamped[0] if stamped else None,
        "last_step_at": stamped[-1] if stamped else None,
        "loss_curve": loss_curve(losses) or None,
        "steps": measured.steps,
        "first_step_at": measured.first_step_at,
        "startup_seconds": measured.startup_seconds,
        "tokens_per_second": _rate(speed.tokens_per_second),
        "samples_per_second": _rate(speed.samples_per_second),
        "seconds_per_step": measured.seconds_per_step,
        "final_loss": measured.final_loss if _finite(measured.final_loss) else None,
        "log_formats": sorted(log.parsed.formats) or None,
    })  # fmt: skip


def _rate(interval: Interval | None) -> Rate | None:
    if interval is None or not all(map(math.isfinite, (interval.mean, interval.low))):
        return None
    return Rate(mean=max(0.0, interval.mean), low=interval.low, high=interval.high)


def _decide(step: _Step) -> TrainingTick:
    spec, status, world, runs, actions = step.spec, step.status, step.world, step.runs, step.actions
    # From the status, not the logs: a finished run's Job (and its log) is gone.
    exported = spec.metrics is not None and spec.metrics.tokens_per_second is not None
    sources = {v: _throughput_source(runs[v], exported) for v in VARIANTS}
    runs = {v: runs[v].model_copy(update={"throughput_source": sources[v]}) for v in VARIANTS}
    status = _with_runs(status, runs)
    readings = {v: _reading(runs[v], prometheus=sources[v] == "prometheus") for v in VARIANTS}
    nodes = {"baseline": spec.baseline.nodes, "candidate": spec.candidate.nodes}
    figures, economics = {}, {}
    for v in VARIANTS:
        price = world.prices[v]
        precompile = (runs[v].precompile_seconds or 0.0) / 3600 * nodes[v]
        found = variant_figures(
            readings[v], RunPrice(price.usd_per_hour, nodes[v], 0.0, precompile), spec.full_run
        )
        figures[v], economics[v] = found, _economics(found.economics, price)
    gap = loss_gap(_losses(runs["baseline"]), _losses(runs["candidate"]), spec.run.warmup_steps)
    candidate = dict(figures["candidate"].figures)
    missing = {**figures["baseline"].missing, **figures["candidate"].missing}
    if gap.diverged is not None:
        candidate["loss_gap"] = Figure.exact(math.inf)
    elif gap.gap is not None:
        candidate["loss_gap"] = Figure(gap.gap.mean, gap.gap.low, gap.gap.high)
    else:
        missing["loss_gap"] = gap.problem or "loss parity could not be judged"
    verdict = judge(spec.criteria, figures["baseline"].figures, candidate, missing)
    decision = TrainingDecision(
        verdict=verdict.verdict,
        reason_code=verdict.reason_code,
        reason=verdict.reason[:8192],
        criteria=[
            TrainingCriterionResult(
                name=r.name, metric=r.metric, verdict=r.verdict,
                value=r.value if _finite(r.value) else None, message=r.message[:2048],
            )
            for r in verdict.criteria
        ],
        decided_at=world.now,
    )  # fmt: skip
    parity = LossParityStatus(
        gap=gap.gap.mean if gap.gap else None,
        low=gap.gap.low if gap.gap else None,
        high=gap.gap.high if gap.gap else None,
        matched_steps=gap.matched_steps,
        diverged=gap.diverged is not None,
        note=gap.problem,
    )
    done = status.model_copy(update={
        "phase": verdict.verdict, "message": decision.reason[:8192], "decision": decision,
        "economics": EconomicsPair(**economics), "loss_parity": parity,
    })  # fmt: skip
    return TrainingTick(done, (*actions, *_stop_running(world, exclude=actions)))


def _losses(run: RunStatus) -> dict[int, float]:
    return {p.step: p.loss for p in run.loss_curve or []}


def _throughput_source(run: RunStatus, exported: bool) -> Literal["log", "prometheus"]:
    """Prometheus when spec.metrics.tokensPerSecond is given and answered, else the log."""
    answered = run.prometheus is not None and run.prometheus.tokens_per_second is not None
    return "prometheus" if exported and answered else "log"


def _reading(run: RunStatus, prometheus: bool = False) -> RunReading:
    """A finished run as its status recorded it; its tokens per second from Prometheus when
    ``prometheus``."""
    steps = run.steps or 0
    tokens = run.prometheus.tokens_per_second if prometheus and run.prometheus else None
    return RunReading(
        steps=steps,
        first_step_at=run.first_step_at,
        startup_seconds=run.startup_seconds,
        speed=Speed(
            tokens_per_second=_interval(tokens or run.tokens_per_second, steps),
            samples_per_second=_interval(run.samples_per_second, steps),
            steps=steps,
        ),
        seconds_per_step=run.seconds_per_step,
        final_loss=run.final_loss,
    )


def _interval(rate: Rate | None, steps: int) -> Interval | None:
    return None if rate is None else Interval(rate.mean, rate.low, rate.high, steps)


def _economics(found: RunEconomics | None, price: NodePrice) -> RunEconomicsStatus | None:
    if found is None or found.hours_per_run <= 0:
        return None
    return RunEconomicsStatus(
        price_per_node_hour=price.usd_per_hour,
        price_source=price.source[:1024],
        cost_per_hour=found.cost_per_hour,
        hours_per_run=found.hours_per_run,
        cost_per_run=found.cost_per_run,
        tokens_per_dollar=found.tokens_per_dollar,
    )


def _fail(
    status: TrainingTrialStatus, world: TrainingWorld, code: TrainingReasonCode, reason: str
) -> TrainingTick:
    decision = TrainingDecision(
        verdict="Failed", reason_code=code, reason=reason[:8192], decided_at=world.now
    )
    failed = status.model_copy(
        update={"phase": "Failed", "message": reason[:8192], "decision": decision}
    )
    return TrainingTick(failed, _stop_running(world))


def _stop_running(world: TrainingWorld, exclude: list[Action] | None = None) -> tuple[Action, ...]:
    """Stop every Job still running: a trial that ended keeps no node busy."""
    done = {a.role for a in exclude or [] if isinstance(a, StopJob)}
    return tuple(
        StopJob(role) for role, job in world.jobs.items()
        if job.phase == "Running" and role not in done
    )  # fmt: skip


def _progress(spec: TrainingTrialSpec, runs: dict[Variant, RunStatus]) -> str:
    parts = []
    for v in VARIANTS:
        run = runs[v]
        if run.state == "Compiling":
            parts.append(f"{v}: precompiling")
        elif run.state == "Running":
            parts.append(f"{v}: step {run.steps or 0} of {spec.run.steps}")
        else:
            parts.append(f"{v}: {run.state.lower()}")
    return "training: " + ", ".join(parts)


def _tail(lines: tuple[str, ...], keep: int) -> tuple[str, ...]:
    return read_timed_log(lines, keep=keep).last_lines


def _quoted(lines: tuple[str, ...]) -> str:
    return "; log tail:\n" + "\n".join(lines) if lines else ""


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)
