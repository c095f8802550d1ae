"""The gates a trial passes to move on: pure rules, each returning a ``GateVerdict``
(engine/verdict.py) that the state machine (``lifecycle``) applies.

- the API server's word (``api_refusal``): a request it refused for good ends the trial;
- preflight, cleared (``preflight_cleared``): nothing prevents the trial from starting, and
  nothing it waits for has lasted past ``progressDeadline``;
- the candidate, compiled (``compiled``): the compile gate (engine/compile_gate.py);
- a measurement, recorded in the status and judged (``measurement_recorded``): a failed or
  errored one rolls the trial back, too many inconclusive ones pause it or roll it back, as
  ``analysis.onInconclusive`` says;
- the candidate, Available before the first step (``candidate_deployed``);
- a step, served (``step_served``): with the replicas router the candidate pods its share needs
  Available and counted by the router first, then a harmless measurement covering the step to
  its end (its duration counted from its last share change);
- the promotion's evidence (``enough_evidence``): engine/evidence.py's rule;
- the candidate, scaled for all traffic (``candidate_scaled``) before it takes it;
- the bake, done (``baked``).

What does not come within ``progressDeadline`` (the candidate, its pods, the replicas all
traffic needs) rolls the trial back; before anything is routed (what preflight waits for), the
trial fails instead.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from acceltrial.api.reasons import (
    API_REFUSED,
    CANDIDATE_NOT_AVAILABLE,
    CANDIDATE_NOT_SCALED,
    COMPILE_FAILED,
    CRITERION_FAILED,
    INCONCLUSIVE,
    MEASUREMENT_ERRORED,
    PREFLIGHT_FAILED,
    PREFLIGHT_TIMED_OUT,
    ReasonCode,
)
from acceltrial.api.spec import TrialSpec
from acceltrial.api.status import (
    AnalysisCounts,
    Phase,
    PromotionStatus,
    ReplicasOriginal,
    TrialStatus,
)
from acceltrial.engine.analysis import StepStatus, assess, tally
from acceltrial.engine.compile_gate import compile_gate
from acceltrial.engine.evidence import record, shortfalls
from acceltrial.engine.routing import replicas_for_share, share_text
from acceltrial.engine.schedule import (
    as_timedelta,
    elapsed,
    measured_to_end,
    mirror_at,
    requested_weight,
)
from acceltrial.engine.ticks import Measurement, Observation, RemoveCandidate, ScaleCandidate
from acceltrial.engine.verdict import PASSED, WAIT, GateVerdict
from acceltrial.engine.weighing import pooled_failures

RECENT_RESULTS = 64
"""How many criterion results ``status.analysis`` keeps, the latest last."""


def api_refusal(phase: Phase, seen: Observation) -> GateVerdict:
    """A request the API server refused for good ends the trial instead of retrying forever;
    a rollback under way completes."""
    if seen.refused is None or phase == "RollingBack":
        return PASSED
    reason = f"the API server refused a request (retrying cannot help): {seen.refused}"
    if phase not in ("Pending", "Preflight"):
        return GateVerdict(roll_back=API_REFUSED, reason=reason)
    # Nothing was routed yet; a candidate half-created by the refused tick goes.
    never = f"{reason}; routing was never changed"
    return GateVerdict(fail=API_REFUSED, reason=reason, message=never, actions=(RemoveCandidate(),))


def preflight_cleared(spec: TrialSpec, status: TrialStatus, seen: Observation) -> GateVerdict:
    """Nothing prevents the trial from starting (else it fails, nothing changed), and what it
    waits for (the baseline still rolling out, say) has not lasted past ``progressDeadline``."""
    if seen.preflight_problems:
        reason = "; ".join(seen.preflight_problems)
        return GateVerdict(
            fail=PREFLIGHT_FAILED,
            reason=f"preflight failed: {reason}",
            message=f"preflight failed, nothing was changed: {reason}",
        )
    if not seen.preflight_waits:
        return PASSED
    reason = "; ".join(seen.preflight_waits)
    if not elapsed(status.started_at or seen.now, spec.progress_deadline, seen.now):
        return GateVerdict(message=f"waiting before anything changes: {reason}")
    why = f"preflight failed after waiting {spec.progress_deadline}: {reason}"
    return GateVerdict(fail=PREFLIGHT_TIMED_OUT, reason=why, message=f"{why}; nothing was changed")


def compiled(
    spec: TrialSpec, status: TrialStatus, seen: Observation
) -> tuple[TrialStatus, GateVerdict]:
    """``status`` with the compile gate's record (engine/compile_gate.py), and its verdict: the
    trial waits while the compile Job runs, and fails, the candidate never created, when it
    failed."""
    gate = compile_gate(spec, status.compile, seen.compile_job, seen.now)
    if gate.status is not None:
        status = status.model_copy(update={"compile": gate.status})
    if gate.verdict == "fail":
        never = f"{gate.message}; the candidate was never created"
        verdict = GateVerdict(fail=COMPILE_FAILED, reason=gate.message, message=never)
    elif gate.verdict == "wait":
        verdict = GateVerdict(message=gate.message)
    else:
        verdict = PASSED
    return status, replace(verdict, actions=gate.actions)


def measurement_recorded(
    spec: TrialSpec, status: TrialStatus, measurement: Measurement, now: datetime
) -> tuple[TrialStatus, GateVerdict]:
    """``status`` with ``measurement`` recorded (counts, recent results, evidence, economics),
    and the verdict on the step it measured."""
    counts = tally(status.counts or AnalysisCounts(), measurement.outcome)
    recent = [*(status.analysis or []), *measurement.results][-RECENT_RESULTS:]
    evidence = record(status.evidence or [], measurement.results)
    recorded = {"counts": counts, "analysis": recent, "evidence": evidence}
    status = status.model_copy(update={**recorded, "last_measurement_at": now})
    if measurement.economics is not None:
        status = status.model_copy(update={"economics": measurement.economics})
    step_status: StepStatus = assess(counts, spec.analysis)
    mirror = mirror_at(spec, status)
    share = share_text(status.canary_weight or 0, requested_weight(status))
    where = (
        f"at step {status.step} ({mirror}% of requests mirrored, no user served)"
        if mirror
        else f"at {share}"
    )
    if step_status in ("Failed", "Errored"):
        code: ReasonCode = CRITERION_FAILED if step_status == "Failed" else MEASUREMENT_ERRORED
        return status, GateVerdict(roll_back=code, reason=f"{measurement.reason} {where}")
    if step_status == "Inconclusive" and status.phase != "Paused":
        if spec.analysis.on_inconclusive == "rollback":
            why = f"inconclusive: {measurement.reason} {where}"
            return status, GateVerdict(roll_back=INCONCLUSIVE, reason=why)
        why = f"too many inconclusive measurements: {measurement.reason} {where}"
        return status, GateVerdict(pause="Inconclusive", message=why)
    return status, PASSED


def candidate_deployed(spec: TrialSpec, status: TrialStatus, seen: Observation) -> GateVerdict:
    """Step 0: the candidate just deployed is Available, within ``progressDeadline``."""
    if seen.candidate_available:
        return PASSED
    if not elapsed(status.step_started_at or seen.now, spec.progress_deadline, seen.now):
        return WAIT
    why = f"the candidate was not Available within {spec.progress_deadline}"
    return GateVerdict(roll_back=CANDIDATE_NOT_AVAILABLE, reason=why)


def step_served(spec: TrialSpec, status: TrialStatus, seen: Observation) -> GateVerdict:
    """The current step has served: its pods (``_step_pods``), then its latest measurement,
    taken at or after its end (engine/schedule.py's ``stage_end``: its duration from its last
    share change), harmless. So a step never passes on what a smaller share showed, nor on a
    window a busy operator took well before its end."""
    ready = seen.candidate_available_replicas
    if seen.candidate_serving_replicas is not None:
        # Available by the Deployment and counted by the router: the two are read apart.
        ready = min(ready, seen.candidate_serving_replicas)
    pods = _step_pods(spec, status, ready, seen.now)
    if not pods.passed:
        return pods
    served = measured_to_end(spec, status) and _latest_passed(status)
    return PASSED if served else WAIT


def _step_pods(spec: TrialSpec, status: TrialStatus, available: int, now: datetime) -> GateVerdict:
    """Whether the step runs at the share it asked for. The replicas router gives a share
    by the candidate's pods: a step whose pods are not all Available yet runs at a smaller
    share, and passing it would judge 50% on what 33% showed (as a replica-based canary
    waits for its pods before a step counts). Pods that do not come within
    ``progressDeadline`` of the step's last share change roll the trial back."""
    original = status.original
    if not isinstance(original, ReplicasOriginal) or not original.baseline_replicas:
        return PASSED
    step_number = status.step or 1
    step = spec.steps[step_number - 1]
    wanted = replicas_for_share(original.baseline_replicas, step.share)
    if available >= wanted:
        return PASSED
    if not elapsed(status.step_started_at or now, spec.progress_deadline, now):
        return WAIT
    why = (
        f"the candidate did not reach the {wanted} Available replicas step "
        f"{step_number}'s {step.share}% needs within {spec.progress_deadline} "
        f"({available} were)"
    )
    return GateVerdict(roll_back=CANDIDATE_NOT_SCALED, reason=why)


def _latest_passed(status: TrialStatus) -> bool:
    """The latest measurement saw no harm: it passed, or was thin (too few requests to
    judge; the promotion then asks for the evidence all windows add up to)."""
    counts = status.counts
    return counts is not None and counts.last_outcome in ("Pass", "Thin")


def pooled_over_the_steps(spec: TrialSpec, status: TrialStatus) -> GateVerdict:
    """Before the promotion begins (the candidate scaled for all traffic, or an approval asked
    for): a criterion only ever judged on thin windows is judged on all of them pooled, and a
    clear failure (1.5 times beyond its limit) rolls back; a nearer one is left to the bake,
    which adds evidence. A candidate dearer in every thin window (2.4 and 2.7 times the
    baseline's cost on 12 and 22 requests) is not scaled up first."""
    failed = pooled_failures(
        spec.analysis.criteria, status.evidence or [], spec.analysis.alpha, clear_only=True
    )
    if failed:
        return GateVerdict(roll_back=CRITERION_FAILED, reason="; ".join(failed) + " (the steps)")
    return PASSED


def enough_evidence(spec: TrialSpec, status: TrialStatus) -> GateVerdict:
    """The promotion's evidence rule (engine/evidence.py): a criterion never judged on
    enough requests in one step is judged on all its windows pooled, and rolls back when
    that fails; when its requests fall short, the trial is Inconclusive and
    ``onInconclusive`` applies."""
    evidence = status.evidence or []
    failed = pooled_failures(spec.analysis.criteria, evidence, spec.analysis.alpha)
    if failed:
        why = "; ".join(failed) + " (the promotion)"
        return GateVerdict(roll_back=CRITERION_FAILED, reason=why)
    short = shortfalls(spec.analysis.criteria, evidence)
    if not short:
        return PASSED
    why = "not enough evidence to promote: " + "; ".join(short)
    if spec.analysis.on_inconclusive == "rollback":
        return GateVerdict(roll_back=INCONCLUSIVE, reason=why)
    if status.phase == "Paused" and status.pause_reason == "Inconclusive":
        return WAIT  # paused for it already
    why = f"{why}; resume once more traffic has been judged"
    return GateVerdict(pause="Inconclusive", message=why)


def candidate_scaled(
    spec: TrialSpec, status: TrialStatus, promotion: PromotionStatus, seen: Observation
) -> GateVerdict:
    """The candidate has the replicas all traffic needs; until then it is scaled (again:
    idempotent) and waited for, within ``progressDeadline``."""
    available = seen.candidate_available_replicas
    if available >= promotion.replicas:
        return PASSED
    if elapsed(status.step_started_at or seen.now, spec.progress_deadline, seen.now):
        why = (
            f"the candidate did not reach {promotion.replicas} Available replicas within "
            f"{spec.progress_deadline} ({available} were)"
        )
        return GateVerdict(roll_back=CANDIDATE_NOT_SCALED, reason=why)
    waiting = (
        f"scaling the candidate to {promotion.replicas} replicas before it takes all "
        f"traffic ({promotion.reason}); {available} Available"
    )
    return GateVerdict(message=waiting, actions=(ScaleCandidate(promotion.replicas),))


def baked(spec: TrialSpec, status: TrialStatus, now: datetime) -> bool:
    """The bake has lasted ``promotion.bakeTime`` and its latest measurement, taken at or after
    its end, saw no harm (none is asked of a bake shorter than one ``analysis.interval``)."""
    started = status.step_started_at or now
    if not elapsed(started, spec.promotion.bake_time, now):
        return False
    bake, interval = spec.promotion.bake_time, spec.analysis.interval
    if as_timedelta(bake) < as_timedelta(interval):
        return True
    return measured_to_end(spec, status) and _latest_passed(status)
