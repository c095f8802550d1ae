"""A window's judgement weighed by the requests behind it.

Pure. :func:`judge_window` judges a criterion on one measurement's readings (as
:func:`~acceltrial.engine.analysis.judge` does) and then weighs the verdict by the candidate's
requests in the window (:func:`weigh`): fewer than the criterion needs (engine/evidence.py) make
the window *thin*, neither pass nor fail, unless the breach is already decisive. A thin window is
not inconclusive: it counts toward no limit, and a step whose windows were thin advances at its
end (a small step limits the blast radius; it cannot prove parity). The promotion then asks for
the evidence every judged window added up to (:func:`~acceltrial.engine.evidence.shortfalls`).
"""

from __future__ import annotations

import math
from dataclasses import replace

from acceltrial.api.spec import AnalysisSpec, Criterion
from acceltrial.engine.analysis import Judgement, Reading, judge
from acceltrial.engine.evidence import (
    CLEAR_BREACH,
    ERROR_METRIC,
    error_ratio_p_value,
    need_of,
)

DEFAULT_ALPHA = 0.01
"""The exact test's level for a decisive breach on few requests, when no analysis is given."""


def judge_window(
    criterion: Criterion,
    baseline: Reading | None,
    candidate: Reading | None,
    analysis: AnalysisSpec | None = None,
) -> Judgement:
    """Judge one criterion on one window and weigh the verdict by its requests."""
    judged = judge(criterion, baseline, candidate, analysis)
    if judged.spans_step:
        return judged  # a sequential test: valid at any count, its requests already counted
    counted = replace(
        judged,
        baseline_requests=_requests(baseline),
        candidate_errors=_errors(criterion, judged, candidate),
    )
    if criterion.statistical is not None:
        # A rank-sum test has its own evidence rule (minSamples); its requests are counted.
        return replace(counted, candidate_requests=_requests(candidate))
    alpha = analysis.alpha if analysis is not None else DEFAULT_ALPHA
    return weigh(counted, criterion, _requests(candidate), alpha)


def _requests(reading: Reading | None) -> float | None:
    if reading is None or reading.requests is None or not math.isfinite(reading.requests):
        return None
    return max(0.0, reading.requests)


def _errors(criterion: Criterion, judged: Judgement, candidate: Reading | None) -> float | None:
    requests = _requests(candidate)
    if criterion.metric != ERROR_METRIC or requests is None or judged.candidate is None:
        return None
    return round(judged.candidate * requests)


def weigh(
    judgement: Judgement,
    criterion: Criterion,
    requests: float | None,
    alpha: float,
) -> Judgement:
    """The judgement of one window weighed by the candidate's requests in it: thin (neither
    pass nor fail) when they are fewer than the criterion needs, unless the breach is decisive."""
    need = need_of(criterion)
    counted = replace(judgement, candidate_requests=requests)
    if need is None or requests is None or judgement.verdict == "Inconclusive":
        return counted
    if requests <= 0:
        return replace(
            counted,
            verdict="Inconclusive",
            reason="no data: the candidate answered no request in the window",
        )
    # A relative criterion also rests on the baseline's requests in the window.
    baseline = judgement.baseline_requests if criterion.relative is not None else None
    if baseline is not None and baseline < need.requests:
        held = f"the baseline's {baseline:.0f} requests in the window; {need.why}"
    elif requests < need.requests:
        held = f"{requests:.0f} of the candidate's requests in the window; {need.why}"
    else:
        return counted
    if judgement.verdict == "Fail":
        decisive = _decisive(judgement, criterion, requests, alpha)
        if decisive is not None:
            return replace(counted, reason=f"{judgement.reason}; decisive on {held}: {decisive}")
    return replace(
        counted, verdict="Inconclusive", thin=True, reason=f"thin: {held} ({judgement.reason})"
    )


def _decisive(
    judgement: Judgement, criterion: Criterion, requests: float, alpha: float
) -> str | None:
    """Why a failure on few requests stands, or None when it may be chance."""
    limit = criterion.absolute.max if criterion.absolute is not None else None
    if criterion.metric == ERROR_METRIC and limit is not None and judgement.candidate is not None:
        errors = round(judgement.candidate * requests)
        p = error_ratio_p_value(errors, round(requests), limit)
        if p < alpha:
            return f"{errors} errors would happen with probability {p:.2g} under {limit:.3g}"
        return None
    factor = breach_factor(judgement, criterion)
    if factor is not None and factor >= CLEAR_BREACH:
        return f"{factor:.2g}x beyond its limit"
    return None


def breach_factor(judgement: Judgement, criterion: Criterion) -> float | None:
    """How far beyond its limit a failed figure lies (2.0: twice the maximum, half the
    minimum); None when it cannot be said."""
    bounds = criterion.absolute or criterion.relative
    value = judgement.candidate if criterion.absolute is not None else judgement.ratio
    if bounds is None or value is None:
        return None
    factors = []
    if bounds.max is not None and bounds.max > 0 and value > bounds.max:
        factors.append(value / bounds.max)
    if bounds.min is not None and bounds.min > 0 and value < bounds.min:
        factors.append(math.inf if value <= 0 else bounds.min / value)
    return max(factors) if factors else None
