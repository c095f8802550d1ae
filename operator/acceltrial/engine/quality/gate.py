"""The quality gate (``spec.quality``): on the tick a prompt-set run comes back, record
``status.quality`` and say what the trial does. Pure.

Before step 1 (no user request, not even a mirrored copy, has reached the candidate) a failure
ends the trial ``Failed`` with ``QualityFailed`` and the candidate removed; the route was never
changed. At a later step (``quality.everyStep``) users are exposed, so a failure rolls back.
A check that cannot tell pauses (``QualityInconclusive``): ``resume`` asks again, ``promote``
goes on without it, as a person decides on an inconclusive analysis in Argo Rollouts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from acceltrial.api.quality import QualityCriterionResult, QualityStatus, QualityVerdict
from acceltrial.api.reasons import QUALITY_FAILED
from acceltrial.api.spec import TrialSpec
from acceltrial.api.status import TrialStatus
from acceltrial.engine.quality.check import QualityCheck
from acceltrial.engine.quality.compare import QualityJudgement, judge_quality
from acceltrial.engine.schedule import elapsed
from acceltrial.engine.ticks import Event, RemoveCandidate
from acceltrial.engine.verdict import PASSED, GateVerdict


def quality_gate(
    spec: TrialSpec, status: TrialStatus, check: QualityCheck | None, now: datetime
) -> tuple[TrialStatus, GateVerdict]:
    """The status with this tick's check recorded, and the verdict: go on once the current
    step's check passed (or none is asked), else wait, fail, roll back or pause."""
    settings = spec.quality
    if settings is None or _passed(status, settings.every_step):
        return status, PASSED
    if check is None:
        return status, GateVerdict(message="checking the candidate's answers to the prompt set")
    if check.unreachable is not None:
        if not elapsed(status.step_started_at or now, spec.progress_deadline, now):
            return status, GateVerdict(message=f"the quality check waits: {check.unreachable}")
        check = QualityCheck(problem=f"{check.unreachable} for {spec.progress_deadline}")
    return _judged(spec, status, check, now)


def _judged(
    spec: TrialSpec, status: TrialStatus, check: QualityCheck, now: datetime
) -> tuple[TrialStatus, GateVerdict]:
    settings = spec.quality
    assert settings is not None  # judged only when the spec asks for quality
    step = status.step or 0
    if check.problem is not None:
        why = f"the quality check cannot run: {check.problem}"
        recorded = _status("Fail", Checked(step, now, check), why, ())
        return status.model_copy(update={"quality": recorded}), _failed(step, why)
    judgements = judge_quality(
        settings.criteria,
        check.scores,
        settings.max_tokens,
        spec.analysis.alpha,
        unanswered=check.unanswered,
        max_unanswered=settings.max_unanswered,
    )
    verdict, why = _overall(judgements, len(check.scores) + check.unanswered)
    recorded = _status(verdict, Checked(step, now, check), why, judgements)
    status = status.model_copy(update={"quality": recorded})
    if verdict == "Pass":
        return status, GateVerdict(
            passed=True, events=(Event("Normal", "QualityPassed", why[:1024]),)
        )
    if verdict == "Fail":
        return status, _failed(step, why)
    message = f"{why}; resume asks the prompt set again, promote goes on without it"
    return status, GateVerdict(pause="QualityInconclusive", message=message)


def _passed(status: TrialStatus, every_step: bool) -> bool:
    """Whether no check is asked at this step, or this step's check passed."""
    step, recorded = status.step or 0, status.quality
    if step > 0 and not every_step:
        return True
    return recorded is not None and recorded.step >= step and recorded.verdict == "Pass"


@dataclass(frozen=True)
class Checked:
    """Where and when a check ran, and what it brought back."""

    step: int
    at: datetime
    check: QualityCheck


def _failed(step: int, why: str) -> GateVerdict:
    if step == 0:
        left = "; the candidate is removed, the route was never changed"
        return GateVerdict(
            fail=QUALITY_FAILED, reason=why, message=why + left, actions=(RemoveCandidate(),)
        )
    return GateVerdict(roll_back=QUALITY_FAILED, reason=why)


def _overall(judgements: Sequence[QualityJudgement], asked: int) -> tuple[QualityVerdict, str]:
    failed = [j for j in judgements if j.verdict == "Fail"]
    if failed:
        return "Fail", "quality " + "; ".join(f"{j.criterion}: {j.reason}" for j in failed)
    unsure = [j for j in judgements if j.verdict == "Inconclusive"]
    if unsure:
        return "Inconclusive", "quality inconclusive: " + "; ".join(
            f"{j.criterion}: {j.reason}" for j in unsure
        )
    said = "; ".join(f"{j.criterion}: {j.reason}" for j in judgements)
    return "Pass", f"the candidate answers like the baseline on {asked} prompts: {said}"


def _status(
    verdict: QualityVerdict, checked: Checked, why: str, judgements: Sequence[QualityJudgement]
) -> QualityStatus:
    check = checked.check
    return QualityStatus(
        verdict=verdict,
        step=checked.step,
        checked_at=checked.at,
        prompts=len(check.scores) + check.unanswered,
        unanswered=check.unanswered,
        scoring=check.scoring,
        reprompted=check.reprompted,
        reason=why[:4096],
        criteria=[_result(j) for j in judgements],
        examples=list(check.examples),
    )


def _result(judgement: QualityJudgement) -> QualityCriterionResult:
    figure = judgement.figure
    return QualityCriterionResult(
        name=judgement.criterion,
        metric=judgement.metric,
        verdict=judgement.verdict,
        value=figure.value if figure else None,
        low=figure.low if figure else None,
        high=figure.high if figure else None,
        confidence=figure.confidence if figure else None,
        reason=judgement.reason[:1024],
    )
