"""The capacity gate (``spec.capacityTest``): before step 1, once the candidate is Available and
its answers passed ``spec.quality`` (if asked), record ``status.capacityTest`` from the sweep
of its pods and say what the trial does. Pure.

No user's request, not even a mirrored copy, has reached the candidate yet, so a candidate that
breaks the SLO at the sweep's lowest concurrency, or whose cost at its measured capacity already
fails a cost criterion, ends the trial ``Failed`` (``CriterionFailed``) with the candidate
removed and the route never changed. The baseline's side is its temporary replica's sweep when
there was one that met the SLO (``spec.capacityTest.baseline: replica``, a GPU node with room),
else its production operating point, and ``status.capacityTest.baselineFrom`` says which. Once
measured, the cost model uses the capacities instead of the utilization projection
(engine/measurement.py's ``measured_capacity``). A sweep that cannot measure (the
Service unreachable) is inconclusive and goes the way ``analysis.onInconclusive`` says: pause
(``CapacityInconclusive``: resume sweeps again, promote goes on without it) or end the trial
``Failed`` (``Inconclusive``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from acceltrial.api.capacity_test import (
    MAX_STAIRS,
    BaselineFrom,
    CapacityCost,
    CapacityTestSpec,
    CapacityTestStatus,
    SweepStair,
    SweptRequests,
    VariantCapacityTest,
)
from acceltrial.api.durations import duration_seconds
from acceltrial.api.reasons import CRITERION_FAILED, INCONCLUSIVE
from acceltrial.api.spec import TrialSpec
from acceltrial.api.status import TrialStatus
from acceltrial.engine.analysis import Judgement, judge_cost
from acceltrial.engine.capacity_sweep import (
    Bounds,
    Slo,
    Stair,
    SweepOutcome,
    SweepShape,
    best_stair,
    breach,
)
from acceltrial.engine.economics import Comparison, Throughput, cost_criterion_values
from acceltrial.engine.metrics import COST_METRICS
from acceltrial.engine.ticks import Event, RemoveCandidate
from acceltrial.engine.verdict import PASSED, GateVerdict

MEASURING = "measuring how much one candidate pod carries (capacityTest)"
LEFT = "; the candidate is removed, the route was never changed"


def sweep_settings(settings: CapacityTestSpec) -> tuple[Slo, Bounds]:
    """The engine's SLO and bounds of ``spec.capacityTest``."""
    slo = settings.slo

    def seconds(value: str | None) -> float | None:
        return None if value is None else duration_seconds(value)

    return (
        Slo(seconds(slo.latency_p99), seconds(slo.ttft_p99), seconds(slo.itl_p99),
            slo.error_ratio),
        Bounds(settings.start_concurrency, settings.max_concurrency,
               duration_seconds(settings.stair_duration), duration_seconds(settings.max_duration)),
    )  # fmt: skip


def capacity_due(spec: TrialSpec, status: TrialStatus, candidate_available: bool) -> bool:
    """Whether the world should sweep (or keep sweeping) the candidate on this tick: before
    step 1, once it is Available and its answers passed spec.quality (if asked)."""
    if spec.capacity_test is None or status.capacity_test is not None or not candidate_available:
        return False
    quality = status.quality
    answered = spec.quality is None or (quality is not None and quality.verdict == "Pass")
    return status.phase == "Progressing" and not status.step and answered


def capacity_gate(
    spec: TrialSpec, status: TrialStatus, outcome: SweepOutcome | None, now: datetime
) -> tuple[TrialStatus, GateVerdict]:
    """The status with the sweep recorded, and the verdict: go on once it measured, else wait,
    fail or pause."""
    settings = spec.capacity_test
    if settings is None or (status.capacity_test and status.capacity_test.verdict == "Pass"):
        return status, PASSED
    if outcome is None:
        return status, GateVerdict(message=MEASURING)
    if outcome.problem is not None:
        return _unmeasured(spec, status, outcome.problem, now)
    recorded, verdict = _measured(spec, outcome, now)
    return status.model_copy(update={"capacity_test": recorded}), verdict


def _unmeasured(
    spec: TrialSpec, status: TrialStatus, problem: str, now: datetime
) -> tuple[TrialStatus, GateVerdict]:
    why = f"the capacity sweep cannot measure: {problem}"
    recorded = status.model_copy(update={"capacity_test": _status("Inconclusive", why, now)})
    if spec.analysis.on_inconclusive == "pause":
        message = f"{why}; resume sweeps again, promote goes on without it"
        return recorded, GateVerdict(pause="CapacityInconclusive", message=message)
    return recorded, _failed(INCONCLUSIVE, why)


@dataclass(frozen=True)
class BaselineSide:
    """The baseline's side of the comparison: its replica's sweep, or production's operating
    point and why."""

    swept: VariantCapacityTest | None
    source: BaselineFrom
    note: str | None

    @property
    def described(self) -> str:
        if self.source == "sweep" and self.swept is not None and self.swept.rps_per_pod:
            return (
                f"the baseline's replica at {self.swept.rps_per_pod:.3g} requests/s per pod, "
                "swept alike"
            )
        return "the baseline at its production operating point"


def baseline_side(spec: TrialSpec, outcome: SweepOutcome) -> BaselineSide:
    """Where the baseline's capacity comes from: its replica's sweep when that measured a stair
    within the SLO, else production's operating point (and why)."""
    assert spec.capacity_test is not None  # judged only when the spec asks for a sweep
    swept = outcome.baseline
    if swept is None:
        asked = spec.capacity_test.baseline == "production"
        note = "spec.capacityTest.baseline is production" if asked else outcome.baseline_unswept
        return BaselineSide(None, "production", note or "the baseline was not swept")
    if swept.problem is not None:
        return BaselineSide(None, "production", f"its replica could not be swept: {swept.problem}")
    result = variant_result(swept, sweep_settings(spec.capacity_test)[0])
    if result.rps_per_pod is None:
        return BaselineSide(
            result, "production", f"its replica met no stair within the SLO: {swept.why}"
        )
    return BaselineSide(result, "sweep", None)


def _measured(
    spec: TrialSpec, outcome: SweepOutcome, now: datetime
) -> tuple[CapacityTestStatus, GateVerdict]:
    """A finished sweep: the candidate breaks its SLO alone, already costs more than its cost
    criteria allow, or passes."""
    assert spec.capacity_test is not None  # judged only when the spec asks for a sweep
    slo, _ = sweep_settings(spec.capacity_test)
    measured = variant_result(outcome, slo)
    side = baseline_side(spec, outcome)
    best = best_stair(outcome.stairs, slo)
    if best is None:
        why = f"the candidate breaks its capacityTest SLO at the lowest concurrency: {outcome.why}"
        return _status("Fail", why, now, measured, side=side, shape=outcome.requests), _failed(
            CRITERION_FAILED, why
        )
    dearer = _costlier(spec, outcome, measured, side)
    if dearer:
        failed = _status(
            "Fail", dearer, now, measured, side=side, cost=outcome.cost, shape=outcome.requests
        )
        return failed, _failed(CRITERION_FAILED, dearer)
    baseline = (
        f"; {side.described}" if side.source == "sweep"
        else f"; the baseline's figure is production's operating point ({side.note})"
    )  # fmt: skip
    why = (
        f"one candidate pod carries {measured.rps_per_pod:.3g} requests/s within its SLO "
        f"(concurrency {best.concurrency}); the sweep stopped: {outcome.why}{baseline}"
        f"{_unjudged_cost(spec, outcome)}"
    )
    told = Event("Normal", "CapacityMeasured", why[:1024])
    passed = _status(
        "Pass", why, now, measured, side=side, cost=outcome.cost, shape=outcome.requests
    )
    return passed, GateVerdict(passed=True, events=(told,))


def _costlier(
    spec: TrialSpec, outcome: SweepOutcome, measured: VariantCapacityTest, side: BaselineSide
) -> str:
    """Why the cost criteria already fail at the measured capacity (whatever their
    ``fromWeight``: no user needs to reach a candidate known to cost more), or ""."""
    failed = [f"{name}: {judged.reason}" for name, judged in _cost_judgements(spec, outcome)
              if judged.verdict == "Fail"]  # fmt: skip
    if not failed:
        return ""
    return (
        f"at the capacity measured before any user's request reached it "
        f"({measured.rps_per_pod:.3g} requests/s per pod within its SLO, {side.described}): "
        f"{'; '.join(failed)}"
    )


def _unjudged_cost(spec: TrialSpec, outcome: SweepOutcome) -> str:
    """Why a cost criterion could not be judged before exposure (the steps judge it), or ""."""
    unsure = [f"{name}: {judged.reason}" for name, judged in _cost_judgements(spec, outcome)
              if judged.verdict != "Pass"]  # fmt: skip
    return "; cost not judged before exposure: " + "; ".join(unsure) if unsure else ""


def _cost_judgements(spec: TrialSpec, outcome: SweepOutcome) -> list[tuple[str, Judgement]]:
    criteria = [c for c in spec.analysis.criteria if c.metric in COST_METRICS]
    if not criteria:
        return []
    if outcome.cost is None:
        missing = Judgement("cost", "Inconclusive", "the baseline's figures could not be read")
        return [(c.name, missing) for c in criteria]
    judged = []
    for criterion in criteria:
        baseline, candidate = cost_criterion_values(outcome.cost, str(criterion.metric))
        judged.append((criterion.name, judge_cost(criterion, baseline, candidate, "not read")))
    return judged


def best_within_slo(spec: TrialSpec, outcome: SweepOutcome) -> Stair | None:
    """The sweep's best stair within spec.capacityTest's SLO; None when none met it."""
    if spec.capacity_test is None:
        return None
    return best_stair(outcome.stairs, sweep_settings(spec.capacity_test)[0])


def capacity_per_pod(spec: TrialSpec, outcome: SweepOutcome) -> Throughput | None:
    """What one pod carries within the SLO, by the sweep; None when no stair met it."""
    best = best_within_slo(spec, outcome)
    if best is None or best.goodput <= 0:
        return None
    pods = max(1, outcome.pods)
    return Throughput(best.goodput / pods, best.tokens_per_second / pods or None)


def variant_result(outcome: SweepOutcome, slo: Slo) -> VariantCapacityTest:
    """``status.capacityTest.<variant>`` of a finished sweep."""
    best = best_stair(outcome.stairs, slo)
    pods = max(1, outcome.pods)
    stairs = [
        SweepStair(
            concurrency=s.concurrency, rps=s.goodput, error_ratio=s.error_ratio,
            latency_p99=s.latency_p99, within_slo=breach(s, slo) is None,
        )
        for s in outcome.stairs[-MAX_STAIRS:]
    ]  # fmt: skip
    rps = None if best is None else best.goodput / pods
    busy = outcome.utilization
    return VariantCapacityTest(
        rps_per_pod=rps,
        utilization=busy,
        utilization_rps_per_pod=None if rps is None or not busy else rps / busy,
        tokens_per_second_per_pod=None if best is None else best.tokens_per_second / pods,
        concurrency=None if best is None else best.concurrency,
        latency_p50=None if best is None else best.latency_p50,
        latency_p99=None if best is None else best.latency_p99,
        ttft_p99=None if best is None else best.ttft_p99,
        itl_p99=None if best is None else best.itl_p99,
        error_ratio=None if best is None else best.error_ratio,
        pods=pods,
        stopped_because=outcome.stopped_because,
        reason=outcome.why[:1024],
        stairs=stairs,
        seconds=outcome.seconds,
    )


def _status(
    verdict: Literal["Pass", "Fail", "Inconclusive"],
    why: str,
    now: datetime,
    candidate: VariantCapacityTest | None = None,
    *,
    side: BaselineSide | None = None,
    cost: Comparison | None = None,
    shape: SweepShape | None = None,
) -> CapacityTestStatus:
    return CapacityTestStatus(
        verdict=verdict, reason=why[:4096], measured_at=now, candidate=candidate,
        requests=None if shape is None else SweptRequests(
            prompt_tokens=shape.prompt_tokens, generated_tokens=shape.generated_tokens,
            source=shape.source, baseline_requests=shape.baseline_requests),
        baseline=None if side is None else side.swept,
        baseline_from=None if side is None else side.source,
        baseline_note=None if side is None or side.note is None else side.note[:1024],
        cost=None if cost is None else _cost(cost),
    )  # fmt: skip


def _cost(comparison: Comparison) -> CapacityCost:
    baseline, candidate = comparison.baseline, comparison.candidate
    return CapacityCost(
        baseline_per_million_tokens=baseline.unit_per_million_tokens,
        candidate_per_million_tokens=candidate.unit_per_million_tokens,
        baseline_per_thousand_requests=baseline.unit_per_thousand_requests,
        candidate_per_thousand_requests=candidate.unit_per_thousand_requests,
        baseline_rps_per_pod=baseline.capacity_per_replica.requests_per_second,
    )


def _failed(code: Literal["CriterionFailed", "Inconclusive"], why: str) -> GateVerdict:
    return GateVerdict(fail=code, reason=why, message=why + LEFT, actions=(RemoveCandidate(),))
