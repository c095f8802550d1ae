"""The trial state machine: from spec, status and what was observed now, the next status and the
actions to take. Pure, deterministic, and crash-safe by construction: all progress lives in the
returned status, every action is idempotent, so replaying a tick after a crash changes nothing.

Phases: Pending -> Preflight -> Progressing (step 0 waits for the candidate to be Available, then
steps 1..N) -> Promoting -> BakingIn -> Promoted; Paused on a person's request, on too many
inconclusive measurements, or while the last step waits for approval; RollingBack -> RolledBack
(or Aborted) on any failure, including during the bake; Failed when preflight finds the trial
cannot start (nothing was created).

Rules that hold (and are property-tested): the candidate's weight never exceeds the current
step's before promotion; a step advances only after a passing measurement of that step (or a
person's explicit promote); rollback restores the routing recorded in ``status.original``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

from acceltrial.api.durations import duration_seconds
from acceltrial.api.spec import TrialSpec
from acceltrial.api.status import (
    TERMINAL_PHASES,
    AnalysisCounts,
    Condition,
    CriterionResult,
    Decision,
    EconomicsStatus,
    OriginalRouting,
    Phase,
    TrialStatus,
)
from acceltrial.engine.analysis import RoundOutcome, StepStatus, assess, tally
from acceltrial.engine.conditions import ConditionStatus, remove_condition, set_condition
from acceltrial.engine.queries import Variant

UserAction = Literal["pause", "resume", "abort", "promote", "approve"]
RECENT_RESULTS = 64
SPEC_CHANGE_REJECTED = "SpecChangeRejected"
_PROGRESSING_PHASES = frozenset({"Pending", "Preflight", "Progressing", "Promoting", "BakingIn"})
_MEASURED_PHASES = frozenset({"Progressing", "Paused", "BakingIn"})


@dataclass(frozen=True)
class DeployCandidate:
    """Create or update the candidate Deployment and Service (server-side apply)."""


@dataclass(frozen=True)
class SetWeight:
    """Send ``weight`` percent of the traffic to the candidate."""

    weight: int


@dataclass(frozen=True)
class RestoreRouting:
    """Put the routing back exactly as recorded in ``status.original``."""


@dataclass(frozen=True)
class RemoveCandidate:
    """Delete the candidate Deployment and Service, releasing their capacity."""


@dataclass(frozen=True)
class ScaleBaselineToZero:
    """Scale the baseline Deployment to zero replicas (it is never deleted)."""


@dataclass(frozen=True)
class ClearUserAction:
    """Remove the acceltrial.dev/action annotation: each action is handled once."""


Action = (
    DeployCandidate
    | SetWeight
    | RestoreRouting
    | RemoveCandidate
    | ScaleBaselineToZero
    | ClearUserAction
)


@dataclass(frozen=True)
class Event:
    """A Kubernetes Event to post on the trial."""

    type: Literal["Normal", "Warning"]
    reason: str
    message: str


@dataclass(frozen=True)
class Measurement:
    """One measurement of the current step, already judged."""

    outcome: RoundOutcome
    reason: str
    results: tuple[CriterionResult, ...] = ()
    economics: EconomicsStatus | None = None
    """The cost comparison of this measurement, kept in status.economics."""
    observed: Mapping[Variant, Mapping[str, float | None]] | None = None
    """Per variant, the figures the report shows side by side (request rate, latency, ...)."""


@dataclass(frozen=True)
class Observation:
    """What the handler saw in the cluster (and Prometheus) on this tick."""

    now: datetime
    generation: int
    preflight_problems: tuple[str, ...] = ()
    routing: OriginalRouting | None = None
    """Routing as the cluster holds it now, before any change by this trial."""
    observed_weight: int | None = None
    """The candidate weight the cluster holds now, as the router reads it back."""
    candidate_available: bool = False
    measurement: Measurement | None = None
    action: UserAction | None = None


@dataclass(frozen=True)
class TickResult:
    """The next status, the actions to apply (in order) and the Events to post."""

    status: TrialStatus
    actions: tuple[Action, ...] = ()
    events: tuple[Event, ...] = ()


def criteria_hash(spec: TrialSpec) -> str:
    """Hash of what is frozen at the start: the steps and the analysis."""
    frozen = {
        "steps": [s.model_dump(mode="json", by_alias=True) for s in spec.steps],
        "analysis": spec.analysis.model_dump(mode="json", by_alias=True),
    }
    return hashlib.sha256(json.dumps(frozen, sort_keys=True).encode()).hexdigest()


def measurement_due(spec: TrialSpec, status: TrialStatus, now: datetime) -> bool:
    """Whether a measurement should be taken now (one ``analysis.interval`` after the last)."""
    if status.phase not in _MEASURED_PHASES or not status.step or status.step_started_at is None:
        return False
    since = max(status.step_started_at, status.last_measurement_at or status.step_started_at)
    return now >= since + _seconds(spec.analysis.interval)


def decide(spec: TrialSpec, status: TrialStatus, observation: Observation) -> TickResult:
    """The next status and actions for one tick."""
    return _Tick(spec, status, observation).run()


def on_delete(status: TrialStatus) -> tuple[Action, ...]:
    """Actions before a deleted trial's finalizer is removed: undo unless it was promoted."""
    if status.phase in (*TERMINAL_PHASES, None, "Pending"):
        return ()
    return (RestoreRouting(), RemoveCandidate())


@dataclass
class _Tick:
    spec: TrialSpec
    status: TrialStatus
    obs: Observation
    actions: list[Action] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)

    def run(self) -> TickResult:
        if self.obs.action is not None:
            self.actions.append(ClearUserAction())
        phase = self.status.phase or "Pending"
        if phase not in TERMINAL_PHASES:
            # A rollback under way always completes, whatever happened to the spec.
            if phase != "RollingBack" and self._spec_changed():
                self._hold_for_spec_change()
            else:
                self._update(conditions=remove_condition(self._conditions(), SPEC_CHANGE_REJECTED))
                self._step(phase)
        self._update(conditions=self._phase_conditions(), observed_generation=self.obs.generation)
        return TickResult(self.status, tuple(self.actions), tuple(self.events))

    # -- phases ----------------------------------------------------------------------------

    def _step(self, phase: Phase) -> None:
        if self.obs.action == "abort" and phase != "RollingBack":
            self._roll_back("abort", "aborted by a person (acceltrial.dev/action: abort)")
            return
        handlers = {
            "Pending": self._pending,
            "Preflight": self._preflight,
            "Progressing": self._progressing,
            "Paused": self._paused,
            "Promoting": self._promoting,
            "BakingIn": self._baking,
            "RollingBack": self._rolling_back,
        }
        handlers[phase]()

    def _pending(self) -> None:
        self._update(criteria_hash=criteria_hash(self.spec), started_at=self.obs.now)
        self._enter("Preflight", "checking that the trial can start")

    def _preflight(self) -> None:
        if self.obs.preflight_problems:
            reason = "; ".join(self.obs.preflight_problems)
            self._update(decision=self._decision("none", f"preflight failed: {reason}"))
            self._enter("Failed", f"preflight failed, nothing was changed: {reason}")
            return
        original = self.status.original or self.obs.routing
        self._update(original=original, step=0, canary_weight=0, step_started_at=self.obs.now)
        self.actions.append(DeployCandidate())
        self._enter("Progressing", "deploying the candidate; waiting for it to be Available")

    def _progressing(self) -> None:
        if self.status.step == 0:
            self._await_candidate()
            return
        if not self._judge_measurement():
            return
        self._keep_weight()
        if self.obs.action == "pause":
            self._pause("User", "paused by a person")
        elif self.obs.action == "promote" or self._step_passed():
            self._advance()

    def _await_candidate(self) -> None:
        if self.obs.candidate_available:
            self._start_step(1)
            return
        started = self.status.step_started_at or self.obs.now
        deadline = started + _seconds(self.spec.progress_deadline)
        if self.obs.now >= deadline:
            self._roll_back(
                "rollback",
                f"the candidate was not Available within {self.spec.progress_deadline}",
            )

    def _paused(self) -> None:
        if not self._judge_measurement():
            return
        self._keep_weight()
        awaiting = self.status.pause_reason == "AwaitingApproval"
        if awaiting and self.obs.action in ("approve", "promote"):
            self._promote()
        elif not awaiting and self.obs.action == "resume":
            counts = self.status.counts or AnalysisCounts()
            # Resuming grants a fresh allowance of inconclusive measurements.
            self._update(pause_reason=None, counts=counts.model_copy(update={"inconclusive": 0}))
            self._enter("Progressing", "resumed by a person")
        elif not awaiting and self.obs.action == "promote":
            self._update(pause_reason=None)
            self._advance()

    def _promoting(self) -> None:
        self.actions.append(SetWeight(100))
        self._update(canary_weight=100, step_started_at=self.obs.now, counts=AnalysisCounts())
        self._enter(
            "BakingIn", f"all traffic on the candidate; baking for {self.spec.promotion.bake_time}"
        )

    def _baking(self) -> None:
        if not self._judge_measurement():
            return
        self._keep_weight()
        started = self.status.step_started_at or self.obs.now
        baked = self.obs.now >= started + _seconds(self.spec.promotion.bake_time)
        if baked and (self._bake_needs_no_analysis() or self._latest_passed()):
            self.actions.append(ScaleBaselineToZero())
            self._update(decision=self._decision("promote", "every step and the bake passed"))
            self._enter("Promoted", "promoted; the baseline is scaled to zero, not deleted")

    def _rolling_back(self) -> None:
        self.actions += [RestoreRouting(), RemoveCandidate()]
        decision = self.status.decision
        final: Phase = "Aborted" if decision and decision.verdict == "abort" else "RolledBack"
        # The candidate had no share before the trial; status.original holds the rest.
        self._update(canary_weight=0)
        self._enter(final, "routing restored as found; candidate removed")

    # -- analysis --------------------------------------------------------------------------

    def _judge_measurement(self) -> bool:
        """Record this tick's measurement; False when it ended the step (rollback or pause)."""
        measurement = self.obs.measurement
        if measurement is None:
            return True
        counts = tally(self.status.counts or AnalysisCounts(), measurement.outcome)
        recent = [*(self.status.analysis or []), *measurement.results][-RECENT_RESULTS:]
        self._update(counts=counts, analysis=recent, last_measurement_at=self.obs.now)
        if measurement.economics is not None:
            self._update(economics=measurement.economics)
        verdict: StepStatus = assess(counts, self.spec.analysis)
        where = f"at {self.status.canary_weight}%"
        if verdict in ("Failed", "Errored"):
            self._roll_back("rollback", f"{measurement.reason} {where}")
            return False
        if verdict == "Inconclusive" and self.status.phase != "Paused":
            if self.spec.analysis.on_inconclusive == "rollback":
                self._roll_back("rollback", f"inconclusive: {measurement.reason} {where}")
            else:
                why = f"too many inconclusive measurements: {measurement.reason} {where}"
                self._pause("Inconclusive", why)
            return False
        return True

    def _step_passed(self) -> bool:
        started = self.status.step_started_at or self.obs.now
        step = self.spec.steps[(self.status.step or 1) - 1]
        return self.obs.now >= started + _seconds(step.duration) and self._latest_passed()

    def _latest_passed(self) -> bool:
        counts = self.status.counts
        return counts is not None and counts.last_outcome == "Pass"

    def _bake_needs_no_analysis(self) -> bool:
        return _seconds(self.spec.promotion.bake_time) < _seconds(self.spec.analysis.interval)

    # -- transitions -----------------------------------------------------------------------

    def _advance(self) -> None:
        step = self.status.step or 0
        if step < len(self.spec.steps):
            self._start_step(step + 1)
        elif self.spec.promotion.mode == "manual":
            self._pause("AwaitingApproval", "the last step passed; waiting for approve")
        else:
            self._promote()

    def _start_step(self, number: int) -> None:
        weight = self.spec.steps[number - 1].weight
        self.actions.append(SetWeight(weight))
        self._update(
            step=number, canary_weight=weight, step_started_at=self.obs.now, counts=AnalysisCounts()
        )
        self._enter("Progressing", f"step {number}/{len(self.spec.steps)}: {weight}% of traffic")

    def _promote(self) -> None:
        self._update(pause_reason=None)
        self._enter("Promoting", "promoting: all traffic moves to the candidate")

    def _pause(self, why: Literal["User", "Inconclusive", "AwaitingApproval"], text: str) -> None:
        self._update(pause_reason=why)
        self._enter("Paused", text)

    def _roll_back(self, verdict: Literal["rollback", "abort"], reason: str) -> None:
        self._update(decision=self._decision(verdict, reason), pause_reason=None)
        self._enter("RollingBack", f"rolling back: {reason}")

    def _keep_weight(self) -> None:
        """Re-apply the weight when the cluster no longer holds what the trial set."""
        observed, expected = self.obs.observed_weight, self.status.canary_weight
        if observed is not None and expected is not None and observed != expected:
            self.actions.append(SetWeight(expected))
            drift = f"routing held {observed}%, set back to {expected}%"
            self.events.append(Event("Warning", "RoutingDrift", drift))

    def _hold_for_spec_change(self) -> None:
        message = (
            "spec.steps or spec.analysis changed after the trial started; the change is refused "
            "and the trial holds. Restore them, or delete and re-create the trial to restart."
        )
        if self.obs.action == "abort":
            self._roll_back("abort", "aborted by a person (acceltrial.dev/action: abort)")
        conditions = self._condition(self._conditions(), SPEC_CHANGE_REJECTED, "True", message)
        self._update(conditions=conditions)

    def _enter(self, phase: Phase, message: str) -> None:
        if phase != self.status.phase:
            bad = phase in ("RollingBack", "RolledBack", "Failed", "Aborted")
            kind: Literal["Normal", "Warning"] = "Warning" if bad else "Normal"
            self.events.append(Event(kind, phase, message))
        self._update(phase=phase, message=message)

    # -- status bookkeeping ----------------------------------------------------------------

    def _update(self, **changes: object) -> None:
        self.status = self.status.model_copy(update=changes)

    def _decision(
        self, verdict: Literal["promote", "rollback", "abort", "none"], reason: str
    ) -> Decision:
        return Decision(verdict=verdict, reason=reason, at=self.obs.now)

    def _spec_changed(self) -> bool:
        frozen = self.status.criteria_hash
        return frozen is not None and frozen != criteria_hash(self.spec)

    def _conditions(self) -> list[Condition]:
        return list(self.status.conditions or [])

    def _condition(
        self, conditions: list[Condition], type_: str, status: ConditionStatus, message: str
    ) -> list[Condition]:
        reason = type_ if type_ == SPEC_CHANGE_REJECTED else (self.status.phase or "Pending")
        return set_condition(
            conditions,
            type_=type_,
            status=status,
            reason=reason,
            message=message,
            generation=self.obs.generation,
            now=self.obs.now,
        )

    def _phase_conditions(self) -> list[Condition]:
        phase = self.status.phase or "Pending"
        message = self.status.message or ""
        conditions = self._conditions()
        ready: ConditionStatus = "True" if phase == "Promoted" else "False"
        conditions = self._condition(conditions, "Ready", ready, message)
        progressing: ConditionStatus = "True" if phase in _PROGRESSING_PHASES else "False"
        conditions = self._condition(conditions, "Progressing", progressing, message)
        if phase in ("RolledBack", "Failed", "Aborted"):
            decided = self.status.decision.reason if self.status.decision else message
            return self._condition(conditions, "Degraded", "True", decided)
        return remove_condition(conditions, "Degraded")


def _seconds(duration: str) -> timedelta:
    return timedelta(seconds=duration_seconds(duration))
