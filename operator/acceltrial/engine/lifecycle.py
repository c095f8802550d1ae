"""The trial state machine: from spec, status and what was observed now, the next status and the
actions to take. Pure, deterministic, and crash-safe by construction: all progress lives in the
returned status, every action is idempotent, so replaying a tick after a crash changes nothing.

Phases: Pending -> Preflight -> Progressing (step 0 waits for the candidate to be Available and,
with spec.quality, to answer like the baseline; then steps 1..N) -> Promoting (the candidate
scaled to what production needs and Available) -> BakingIn (all traffic on the candidate, the
baseline warm; with the replicas router its pods are taken out of the Service, not scaled
down) -> Promoted (the candidate handed over: owned by nobody; the baseline at zero); Paused on
a person's request, on too many inconclusive measurements, on a quality check that cannot
tell, or while the last step waits for approval; RollingBack -> RolledBack
(or Aborted) on any failure, including during the bake; Failed when preflight finds the trial
cannot start (nothing was created), or when the candidate's answers fail spec.quality before any
user reached it (the candidate removed, the route never changed).

Rules that hold (and are property-tested): the weight asked (``status.requestedWeight``) never
exceeds the current step's before promotion (``status.canaryWeight`` is the share the routing
really gives: for the replicas router, whole pods); a step advances only after a passing
measurement of that step (or a person's explicit promote); rollback restores the routing recorded
in ``status.original``.

The rules it follows live beside it and only judge: the gates (engine/gates.py) and the route
guard (engine/route_guard.py) return verdicts that ``_Tick`` applies. What a tick exchanges with
the handlers is engine/ticks.py's; where a trial stands on its steps, engine/schedule.py's; what
undoes a trial, engine/undo.py's.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

from acceltrial.api.reasons import ABORTED, PROMOTED, ReasonCode
from acceltrial.api.spec import TrialSpec
from acceltrial.api.status import (
    TERMINAL_PHASES,
    AnalysisCounts,
    Decision,
    PauseReason,
    Phase,
    PromotionStatus,
    TrialStatus,
)
from acceltrial.engine.capacity_gate import capacity_gate
from acceltrial.engine.conditions import (
    SPEC_CHANGE_HELD,
    SPEC_CHANGE_REJECTED,
    ConditionStatus,
    phase_conditions,
    remove_condition,
    set_condition,
)
from acceltrial.engine.evidence import (
    EVIDENCE_EXPECTED,
    TOO_LITTLE_TRAFFIC,
    forecast_once,
    judged_on,
)
from acceltrial.engine.gates import (
    api_refusal,
    baked,
    candidate_deployed,
    candidate_scaled,
    compiled,
    enough_evidence,
    measurement_recorded,
    pooled_over_the_steps,
    preflight_cleared,
    step_served,
)
from acceltrial.engine.promotion import promotion_replicas
from acceltrial.engine.quality.gate import quality_gate
from acceltrial.engine.route_guard import ROUTE_CHANGED, one_route_write, route_guard, set_back
from acceltrial.engine.routing import share_text
from acceltrial.engine.schedule import (
    MEASURED_PHASES,
    criteria_hash,
    requested_weight,
    routed_step,
    share_of,
)
from acceltrial.engine.ticks import (
    Action,
    ClearUserAction,
    DeployCandidate,
    Event,
    HandOverCandidate,
    Observation,
    RetargetAutoscaler,
    ScaleBaselineToZero,
    SetWeight,
    TickResult,
)
from acceltrial.engine.undo import rolled_back, undo
from acceltrial.engine.verdict import GateVerdict


def decide(spec: TrialSpec, status: TrialStatus, observation: Observation) -> TickResult:
    """The next status and actions for one tick."""
    return _Tick(spec, status, observation).run()


@dataclass
class _Tick:
    spec: TrialSpec
    status: TrialStatus
    obs: Observation
    actions: list[Action] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    _set_back_at: int | None = None
    """Where this tick's set-back sits in ``actions`` (its RoutingDrift event goes with it)."""

    def run(self) -> TickResult:
        if self.obs.action is not None:
            self.actions.append(ClearUserAction())
        phase = self.status.phase or "Pending"
        if phase not in TERMINAL_PHASES:
            # A rollback under way always completes, whatever happened to the spec.
            if phase != "RollingBack" and self._spec_changed():
                self._hold_for_spec_change()
            else:
                self._remove_condition(SPEC_CHANGE_REJECTED)
                self._step(phase)
        conditions = phase_conditions(self.status, self.obs.generation, self.obs.now)
        self._update(conditions=conditions, observed_generation=self.obs.generation)
        self.actions, self.events = one_route_write(self.actions, self.events, self._set_back_at)
        return TickResult(self.status, tuple(self.actions), tuple(self.events))

    # -- phases ----------------------------------------------------------------------------

    def _step(self, phase: Phase) -> None:
        if not self._obey(api_refusal(phase, self.obs)):
            return
        if self.obs.action == "abort" and phase != "RollingBack":
            self._roll_back("abort", ABORTED, "aborted by a person (acceltrial.dev/action: abort)")
            return
        if not self._guard_route(phase):
            return
        if phase in MEASURED_PHASES:
            self._follow_share()
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

    def _guard_route(self, phase: Phase) -> bool:
        """Apply engine/route_guard.py's verdict; False when it ended the tick's work."""
        verdict = route_guard(phase, self.status.pause_reason, self.obs)
        if verdict.conflict_gone:
            self._remove_condition(ROUTE_CHANGED)
        elif verdict.route_changed is not None:
            self._set_condition(ROUTE_CHANGED, "True", verdict.route_changed, ROUTE_CHANGED)
        return self._obey(verdict)

    def _pending(self) -> None:
        self._update(criteria_hash=criteria_hash(self.spec), started_at=self.obs.now)
        self._enter("Preflight", "checking that the trial can start")

    def _preflight(self) -> None:
        if not self._obey(preflight_cleared(self.spec, self.status, self.obs)):
            return
        # The routing as found is recorded before a compile Job runs: the trial's record of
        # what it must leave as it was, whatever the compile's outcome.
        self._update(original=self.status.original or self.obs.routing)
        self._forecast_evidence()
        self.status, verdict = compiled(self.spec, self.status, self.obs)
        if not self._obey(verdict):
            return
        self._update(step=0, canary_weight=0, requested_weight=0, step_started_at=self.obs.now)
        self.actions.append(DeployCandidate())
        self._enter("Progressing", "deploying the candidate; waiting for it to be Available")

    def _forecast_evidence(self) -> None:
        said = forecast_once(
            self.spec, self.status.conditions or [], self.obs.baseline_request_rate
        )
        if said is not None and not said.enough:
            self.events.append(Event("Warning", TOO_LITTLE_TRAFFIC, said.message))
        if said is not None:
            reason = "EnoughTraffic" if said.enough else TOO_LITTLE_TRAFFIC
            held: ConditionStatus = "True" if said.enough else "False"
            self._set_condition(EVIDENCE_EXPECTED, held, said.message, reason)

    def _progressing(self) -> None:
        if self.status.step == 0:
            self._await_candidate()
            return
        routed = routed_step(self.spec, self.status, self.obs)
        if routed is not None:
            self._start_step(routed)
            held = f"the route already held step {routed}'s {requested_weight(self.status)}%"
            self.events.append(Event("Normal", "StepResumed", f"{held}; continuing from there"))
            return
        if not self._judge_measurement():
            return
        self._keep_weight()
        if self.obs.action == "pause":
            self._pause("User", "paused by a person")
        elif self.obs.action == "promote" or (
            self._quality_checked() and self._obey(step_served(self.spec, self.status, self.obs))
        ):
            self._advance()

    def _await_candidate(self) -> None:
        deployed = self._obey(candidate_deployed(self.spec, self.status, self.obs))
        if deployed and self._quality_checked() and self._capacity_measured():
            self._start_step(1)

    def _capacity_measured(self) -> bool:
        """spec.capacityTest's gate (engine/capacity_gate.py), recorded and applied."""
        obs = self.obs
        self.status, verdict = capacity_gate(self.spec, self.status, obs.capacity_test, obs.now)
        return self._obey(verdict)

    def _quality_checked(self) -> bool:
        """spec.quality's gate (engine/quality/gate.py): this step's prompt-set check passed, or
        none is asked; its verdict recorded and applied (fail, roll back, pause or wait)."""
        self.status, verdict = quality_gate(self.spec, self.status, self.obs.quality, self.obs.now)
        return self._obey(verdict)

    def _paused(self) -> None:
        if not self._judge_measurement():
            return
        self._keep_weight()
        awaiting = self.status.pause_reason == "AwaitingApproval"
        if awaiting and self.obs.action in ("approve", "promote"):
            if self._obey(enough_evidence(self.spec, self.status)):
                self._promote()
        elif not awaiting and self.obs.action == "resume":
            counts = self.status.counts or AnalysisCounts()
            # Resuming grants a fresh allowance of inconclusive measurements, and asks an
            # inconclusive quality check or capacity sweep again.
            if self.status.pause_reason == "QualityInconclusive":
                self._update(quality=None)
            if self.status.pause_reason == "CapacityInconclusive":
                self._update(capacity_test=None)
            self._update(pause_reason=None, counts=counts.model_copy(update={"inconclusive": 0}))
            # A bake paused on missing data resumes as a bake: all traffic is still there.
            baking = requested_weight(self.status) == 100
            self._enter("BakingIn" if baking else "Progressing", "resumed by a person")
        elif not awaiting and self.obs.action == "promote":
            self._update(pause_reason=None)
            self._advance()

    def _promoting(self) -> None:
        promotion = self.status.promotion
        if promotion is None:
            replicas, why = promotion_replicas(
                self.spec, self.status.economics, self.obs.autoscaler
            )
            promotion = PromotionStatus(replicas=replicas, reason=why)
            self._update(promotion=promotion, step_started_at=self.obs.now)
        if not self._obey(candidate_scaled(self.spec, self.status, promotion, self.obs)):
            return
        self.actions.append(SetWeight(100))
        # Never scaled down: the replicas router's last step may have run more pods.
        serving = max(promotion.replicas, self.obs.candidate_available_replicas)
        if self.status.original is not None and self.status.original.hpa is not None:
            self.actions.append(RetargetAutoscaler())
        self._update(canary_weight=100, requested_weight=100, step_started_at=self.obs.now,
                     counts=AnalysisCounts())  # fmt: skip
        self._enter(
            "BakingIn",
            f"all traffic on the candidate ({_replicas(serving)}); baking for "
            f"{self.spec.promotion.bake_time}",
        )

    def _baking(self) -> None:
        # A promotion whose status write was lost: finish it, never judge (the baseline may
        # already be at zero, with nothing to measure) nor roll back a handed-over candidate.
        handed_over = self.obs.candidate_handed_over
        if not handed_over and not self._judge_measurement():
            return
        self._keep_weight()
        ready = baked(self.spec, self.status, self.obs.now)
        if not handed_over and ready and not self._obey(enough_evidence(self.spec, self.status)):
            return
        if handed_over or ready:
            # Handed over first: from then on nothing the trial leaves behind can remove it.
            self.actions += [HandOverCandidate(), ScaleBaselineToZero()]
            promotion = self.status.promotion or PromotionStatus(
                replicas=self.spec.candidate.replicas, reason="candidate.replicas"
            )
            evidence = judged_on(self.spec.analysis.criteria, self.status.evidence or [])
            why = "every step and the bake passed" + (f"; {evidence}" if evidence else "")
            self._update(
                decision=self._decision("promote", PROMOTED, why),
                promotion=promotion.model_copy(update={"handed_over_at": self.obs.now}),
            )
            self._enter(
                "Promoted",
                "promoted; the candidate is handed over (owned by nobody) and the baseline is "
                "scaled to zero, not deleted",
            )

    def _rolling_back(self) -> None:
        self.actions += list(undo(self.status))
        # The candidate had no share before the trial; status.original holds the rest.
        self._update(canary_weight=0, requested_weight=0)
        self._enter(*rolled_back(self.status))

    def _judge_measurement(self) -> bool:
        """Record this tick's measurement; False when it ended the step (rollback or pause)."""
        measurement = self.obs.measurement
        if measurement is None:
            return True
        self.status, verdict = measurement_recorded(
            self.spec, self.status, measurement, self.obs.now
        )
        return self._obey(verdict)

    # -- transitions -----------------------------------------------------------------------

    def _advance(self) -> None:
        step = self.status.step or 0
        if step < len(self.spec.steps):
            self._start_step(step + 1)
        elif self.obs.action != "promote" and not self._obey(
            pooled_over_the_steps(self.spec, self.status)
        ):
            return  # a person's promote skips the analysis, as Argo Rollouts' promote --full
        elif self.spec.promotion.mode == "manual":
            self._pause("AwaitingApproval", "the last step passed; waiting for approve")
        else:
            self._promote()

    def _start_step(self, number: int) -> None:
        step = self.spec.steps[number - 1]
        self.actions.append(SetWeight(step.share, step.mirrored))
        share = share_of(self.status, step.share)
        self._update(step=number, canary_weight=share, requested_weight=step.share,
                     step_started_at=self.obs.now, counts=AnalysisCounts())  # fmt: skip
        what = (
            f"{step.mirrored}% of requests mirrored to the candidate, its answers discarded"
            if step.mirrored
            else f"{share_text(share, step.share)} of traffic"
        )
        self._enter("Progressing", f"step {number}/{len(self.spec.steps)}: {what}")

    def _follow_share(self) -> None:
        """Keep ``canaryWeight`` at the share the router reads (the replicas router: the ready
        pods behind the Service). When it changes within a step (a candidate pod became ready,
        or left), the step's traffic is the new share's from now: the step restarts its clock,
        as a replica-based canary counts a step from when its pods are available, and this
        tick's measurement, whose window straddles the change, is not judged."""
        share = self.obs.observed_share
        if share is None or share == self.status.canary_weight:
            return
        self._update(canary_weight=share)
        if self.status.step:
            self._update(step_started_at=self.obs.now)
            self.obs = replace(self.obs, measurement=None)

    def _promote(self) -> None:
        self._update(pause_reason=None, promotion=None, step_started_at=self.obs.now)
        self._enter("Promoting", "promoting: the candidate is scaled for all traffic")

    def _obey(self, verdict: GateVerdict) -> bool:
        """Apply a gate's verdict (engine/verdict.py); True when the tick's work goes on."""
        self.actions += verdict.actions
        self.events += verdict.events
        if verdict.roll_back is not None:
            self._roll_back("rollback", verdict.roll_back, verdict.reason)
        elif verdict.fail is not None:
            self._update(decision=self._decision("none", verdict.fail, verdict.reason))
            self._enter("Failed", verdict.message)
        elif verdict.pause is not None:
            self._pause(verdict.pause, verdict.message)
        elif verdict.message:
            self._update(message=verdict.message)  # what the trial waits for
        return verdict.passed

    def _pause(self, why: PauseReason, text: str) -> None:
        self._update(pause_reason=why)
        self._enter("Paused", text)

    def _roll_back(
        self, verdict: Literal["rollback", "abort"], code: ReasonCode, reason: str
    ) -> None:
        self._update(decision=self._decision(verdict, code, reason), pause_reason=None)
        self._enter("RollingBack", f"rolling back: {reason}")

    def _keep_weight(self) -> None:
        """Re-apply the weight when the cluster no longer holds what the trial set."""
        drift = set_back(self.spec, self.status, self.obs)
        if drift is not None:
            self._set_back_at = len(self.actions)
            self.actions.append(drift[0])
            self.events.append(drift[1])

    def _hold_for_spec_change(self) -> None:
        if self.obs.action == "abort":
            self._roll_back("abort", ABORTED, "aborted by a person (acceltrial.dev/action: abort)")
        self._set_condition(SPEC_CHANGE_REJECTED, "True", SPEC_CHANGE_HELD, SPEC_CHANGE_REJECTED)

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
        self,
        verdict: Literal["promote", "rollback", "abort", "none"],
        code: ReasonCode,
        reason: str,
    ) -> Decision:
        return Decision(verdict=verdict, reason=reason, reason_code=code, at=self.obs.now)

    def _spec_changed(self) -> bool:
        frozen = self.status.criteria_hash
        return frozen is not None and frozen != criteria_hash(self.spec)

    def _set_condition(
        self, type_: str, status: ConditionStatus, message: str, reason: str
    ) -> None:
        conditions = set_condition(
            self.status.conditions or [],
            type_=type_,
            status=status,
            reason=reason,
            message=message,
            generation=self.obs.generation,
            now=self.obs.now,
        )
        self._update(conditions=conditions)

    def _remove_condition(self, type_: str) -> None:
        self._update(conditions=remove_condition(self.status.conditions or [], type_))


def _replicas(count: int) -> str:
    return "1 replica" if count == 1 else f"{count} replicas"
