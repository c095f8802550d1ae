"""A window's judgement weighed by the requests behind it.

Pure. :func:`judge_window` judges a criterion on one measurement's readings (as
:func:`~acceltrial.engine.analysis.judge` does) and then weighs the verdict by the candidate's
requests in the window (:func:`weigh`). Fewer than the criterion needs (engine/evidence.py) are
judged on the step's windows pooled so far (:func:`judge_pooled`: each variant's figure averaged
over its requests) once those are enough; until then the window is *thin*, neither pass nor
fail, unless the breach is already decisive. A thin window is not inconclusive: it counts toward
no limit, and a step whose windows were thin advances at its end (a small step limits the blast
radius; it cannot prove parity). A latency quantile beyond its limit is then told from chance
by the candidate's requests slower than the limit (engine/tail.py). The promotion then asks for
the evidence every judged window added up to (:func:`~acceltrial.engine.evidence.shortfalls`)
and judges a criterion that was never judged on enough in a step on all its windows pooled.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from acceltrial.api.spec import AnalysisSpec, Criterion
from acceltrial.api.status import CriterionEvidence
from acceltrial.engine.analysis import Judgement, Reading, judge, judge_cost
from acceltrial.engine.evidence import (
    CLEAR_BREACH,
    ERROR_METRIC,
    QUANTILES,
    error_ratio_p_value,
    need_of,
)
from acceltrial.engine.metrics import COST_METRICS
from acceltrial.engine.tail import weigh_tail

DEFAULT_ALPHA = 0.01
"""The exact test's level for a decisive breach on few requests, when no analysis is given."""


def judge_window(
    criterion: Criterion,
    baseline: Reading | None,
    candidate: Reading | None,
    analysis: AnalysisSpec | None = None,
    step: Sequence[CriterionEvidence] = (),
    *,
    slower: Reading | None = None,
    baseline_slower: Reading | None = None,
) -> Judgement:
    """Judge one criterion on one window and weigh the verdict by its requests (and the
    ``step``'s earlier windows of it, from ``status.evidence``); a latency quantile beyond its
    limit by the candidate's requests slower than it in the step so far (``slower``: the
    histogram's counters, engine/tail.py)."""
    judged = judge(criterion, baseline, candidate, analysis)
    alpha = analysis.alpha if analysis is not None else DEFAULT_ALPHA
    if judged.spans_step:
        # A sequential test: valid at any count, its requests already counted.
        return _errors_in_the_step(judged, criterion, alpha)
    counted = replace(
        judged,
        baseline_requests=_requests(baseline),
        candidate_errors=_errors(criterion, judged, candidate),
    )
    if criterion.statistical is not None:
        # A rank-sum test has its own evidence rule (minSamples); its requests are counted.
        return replace(counted, candidate_requests=_requests(candidate))
    weighed = weigh(counted, criterion, _requests(candidate), alpha, step)
    if "Fail" in (counted.verdict, weighed.verdict):
        failed = weighed if weighed.verdict == "Fail" else counted
        return weigh_tail(
            weighed, failed, criterion, slower, alpha, baseline_counters=baseline_slower
        )
    return weighed


def _errors_in_the_step(judged: Judgement, criterion: Criterion, alpha: float) -> Judgement:
    """A sequential error test that has not failed yet, failed when the step's errors together
    are beyond chance under an absolute limit (the exact test the promotion applies to the
    bake's). The sequential test caps what one scrape interval adds, so a short step of a
    build failing 20% of its requests may end before it fails (3 intervals of 3 s); the step's
    whole count does not wait for that."""
    limit = criterion.absolute.max if criterion.absolute is not None else None
    requests, errors = judged.candidate_requests, judged.candidate_errors
    if judged.verdict == "Fail" or limit is None or requests is None or errors is None:
        return judged
    why = _beyond_chance(round(errors), round(requests), limit, alpha, "in this step")
    if why is None:
        return judged
    return replace(judged, verdict="Fail", reason=f"{why} ({judged.reason})")


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
    step: Sequence[CriterionEvidence] = (),
) -> Judgement:
    """The judgement of one window weighed by the candidate's requests in it: judged on the
    ``step``'s windows pooled with it when it holds fewer than the criterion needs, and thin
    (neither pass nor fail) while those are fewer too, unless the breach is decisive. A cost
    failure not clearly beyond its limit is thin whatever its requests (:func:`_cost_held`)."""
    return _cost_held(_weighed(judgement, criterion, requests, alpha, step), criterion)


def _cost_held(judgement: Judgement, criterion: Criterion) -> Judgement:
    """A cost that fails by less than :data:`CLEAR_BREACH` times its limit, thin: judged on every
    window pooled before the promotion (:func:`pooled_failures`). A window's cost joins a few
    seconds of utilization gauges to its requests' tokens; the flagship's candidate, 0.56x the
    baseline's cost by its profiles, read 0.99x on 39 requests on a busy machine (limit 0.9).
    A cost harms no user while the trial runs; a clearly dearer candidate still stops at once."""
    if criterion.metric not in COST_METRICS or judgement.verdict != "Fail":
        return judgement
    factor = breach_factor(judgement, criterion)
    if factor is not None and factor >= CLEAR_BREACH:
        return judgement
    why = (
        f"thin: {judgement.reason}; less than {CLEAR_BREACH:g}x its limit in one window, so "
        "judged on every window pooled before the promotion"
    )
    return replace(judgement, verdict="Inconclusive", thin=True, reason=why)


def _weighed(
    judgement: Judgement,
    criterion: Criterion,
    requests: float | None,
    alpha: float,
    step: Sequence[CriterionEvidence],
) -> Judgement:
    need = need_of(criterion)
    counted = replace(judgement, candidate_requests=requests)
    if requests is not None and requests <= 0 and not judgement.errored:
        # Its figure (NaN, or none) tells nothing: thin or inconclusive by engine/unserved.py.
        why = "no data: the candidate answered no request in the window"
        if judgement.verdict == "Inconclusive":
            why = f"{why} ({judgement.reason})"
        return replace(
            counted, verdict="Inconclusive", candidate=None, ratio=None, reason=why, unserved=True
        )
    if need is None or requests is None or judgement.verdict == "Inconclusive":
        return counted
    # A relative criterion also rests on the baseline's requests in the window.
    baseline = judgement.baseline_requests if criterion.relative is not None else None
    if baseline is not None and baseline < need.requests:
        held = f"the baseline's {baseline:.0f} requests in the window; {need.why}"
    elif requests < need.requests:
        held = f"{requests:.0f} of the candidate's requests in the window; {need.why}"
    else:
        return errors_told_from_chance(counted, criterion, [*step, _as_evidence(counted)], alpha)
    if judgement.verdict == "Fail":
        decisive = _decisive(judgement, criterion, requests, alpha)
        if decisive is not None:
            return replace(counted, reason=f"{judgement.reason}; decisive on {held}: {decisive}")
    pooled = judge_pooled(criterion, [*step, _as_evidence(counted)], alpha)
    if pooled is not None:
        # The window's own figures stay (the step's sums add them); the verdict is the step's.
        verdict, thin = pooled.verdict, pooled.thin
        return replace(counted, verdict=verdict, thin=thin, reason=f"{pooled.reason} in this step")
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
    if criterion.metric in QUANTILES:
        # A quantile of a few requests is their largest one or two: 1.8x on 45 requests
        # happens by chance (measured on a fleet drawing requests at random), so only pooled
        # evidence decides a quantile.
        return None
    if criterion.metric in COST_METRICS:
        # A cost harms no user while the trial runs, and a thin window's figure joins a
        # utilization gauge of a few seconds to the few requests' tokens: 1.7x beyond its limit
        # where the profiles imply 0.57x (a fleet drawing requests at random, 13 requests).
        # Only pooled evidence decides a cost.
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


def _as_evidence(judgement: Judgement) -> CriterionEvidence:
    """One window's judgement as a row of evidence, to pool with the step's."""
    served = judgement.candidate_requests or 0.0
    base_served = judgement.baseline_requests
    return CriterionEvidence(
        criterion=judgement.criterion,
        step=0,
        weight=0,
        windows=1,
        candidate_requests=served,
        baseline_requests=base_served,
        candidate_value_sum=None if judgement.candidate is None else judgement.candidate * served,
        baseline_value_sum=(
            None
            if judgement.baseline is None or base_served is None
            else judgement.baseline * base_served
        ),
    )


def judge_pooled(
    criterion: Criterion, rows: Sequence[CriterionEvidence], alpha: float = DEFAULT_ALPHA
) -> Judgement | None:
    """The criterion judged on the figures of ``rows`` pooled (each variant's figure averaged
    over its requests), or None while they hold fewer requests than it needs or cannot be
    pooled (a statistical test; a relative criterion without the baseline's). An error ratio
    above its absolute limit fails only beyond chance (:func:`errors_told_from_chance`)."""
    need = need_of(criterion)
    valued = [row for row in rows if row.candidate_value_sum is not None]
    served = sum(row.candidate_requests for row in valued)
    if criterion.statistical is not None or need is None or served < need.requests or not served:
        return None
    candidate = sum(row.candidate_value_sum or 0.0 for row in valued) / served
    baseline = None
    if criterion.relative is not None:
        paired = [r for r in rows if r.baseline_value_sum is not None and r.baseline_requests]
        base_served = sum(r.baseline_requests or 0.0 for r in paired)
        if base_served < need.requests or not base_served:
            return None
        baseline = sum(r.baseline_value_sum or 0.0 for r in paired) / base_served
    if criterion.metric in COST_METRICS:
        judged = judge_cost(criterion, baseline, candidate, "not pooled")
    else:
        judged = judge(
            criterion,
            None if baseline is None else Reading(values=(baseline,), series=1),
            Reading(values=(candidate,), series=1),
        )
    said = f"pooled over {served:.0f} of the candidate's requests: {judged.reason}"
    return errors_told_from_chance(replace(judged, reason=said), criterion, rows, alpha)


def errors_told_from_chance(
    judgement: Judgement, criterion: Criterion, rows: Sequence[CriterionEvidence], alpha: float
) -> Judgement:
    """An error ratio above its absolute limit on enough requests, thin unless its errors are
    beyond chance: the exact one-sided binomial test at ``alpha`` of the window's own errors
    (``judgement``) or of the step's so far (``rows``, the window's among them). A candidate
    failing one request in a thousand against a 1% limit has 2 errors or more in 181 requests
    in 1.5% of such steps, and 2 of 181 reads 1.1%, above the limit (a 3 s window's ratio is
    extrapolated from its samples, so 2 may read 2.9): a point estimate on a few
    hundred requests would roll back that often an error ratio ten times inside its limit. A
    failure the test carries stands; the promotion still asks that the trial's errors together
    be within the limit (engine/evidence.py, ``shortfalls``)."""
    limit = criterion.absolute.max if criterion.absolute is not None else None
    if criterion.metric != ERROR_METRIC or limit is None or judgement.verdict != "Fail":
        return judgement
    counts = [_window_errors(judgement), _pooled_errors(rows)]
    tested = [(errors, requests) for errors, requests in counts if requests > 0]
    if not tested or any(
        error_ratio_p_value(errors, requests, limit) < alpha for errors, requests in tested
    ):
        return judgement
    errors, requests = max(tested, key=lambda count: count[1])
    p = error_ratio_p_value(errors, requests, limit)
    why = (
        f"thin: {judgement.reason}, but {errors} errors in {requests} requests may be chance "
        f"under {limit:.3g} (p = {p:.2g})"
    )
    return replace(judgement, verdict="Inconclusive", thin=True, reason=why)


def _window_errors(judgement: Judgement) -> tuple[int, int]:
    requests = judgement.candidate_requests
    if requests is None or judgement.candidate is None:
        return 0, 0
    return round(judgement.candidate * requests), round(requests)


def _pooled_errors(rows: Sequence[CriterionEvidence]) -> tuple[int, int]:
    valued = [row for row in rows if row.candidate_value_sum is not None]
    errors = sum(row.candidate_value_sum or 0.0 for row in valued)
    return round(errors), round(sum(row.candidate_requests for row in valued))


def pooled_failures(
    criteria: Sequence[Criterion],
    evidence: Sequence[CriterionEvidence],
    alpha: float = DEFAULT_ALPHA,
    *,
    clear_only: bool = False,
) -> list[str]:
    """Each criterion every window of which was thin (never judged on enough requests in a
    step), and each cost (thin by :func:`_cost_held` unless clearly beyond), that fails on
    all its windows pooled, and each error ratio whose bake errors an
    exact binomial test at ``alpha`` rejects (errors that crept up while a test gathered
    evidence), in words. ``clear_only`` (before the promotion begins, when the bake can still
    add evidence) keeps only pooled failures :data:`CLEAR_BREACH` times beyond their limit:
    the flagship's cost, 0.56x the baseline's by its profiles, read 0.92x pooled over 33
    requests of thin windows."""
    failed = []
    for criterion in criteria:
        rows = [row for row in evidence if row.criterion == criterion.name]
        crept = _errors_in_the_bake(criterion, rows, alpha)
        if crept is not None:
            failed.append(f"{criterion.name}: {crept}")
            continue
        judged_alone = any(row.windows > row.thin_windows for row in rows)
        if not rows or (judged_alone and criterion.metric not in COST_METRICS):
            continue
        pooled = judge_pooled(criterion, rows, alpha)
        if pooled is None or pooled.verdict != "Fail":
            continue
        factor = breach_factor(pooled, criterion)
        if not clear_only or (factor is not None and factor >= CLEAR_BREACH):
            failed.append(f"{criterion.name}: {pooled.reason}")
    return failed


def _errors_in_the_bake(
    criterion: Criterion, rows: Sequence[CriterionEvidence], alpha: float
) -> str | None:
    """Why the bake's errors, all its windows together, are above an absolute error limit
    beyond chance; None when they are not (or cannot be told)."""
    limit = criterion.absolute.max if criterion.absolute is not None else None
    if criterion.metric != ERROR_METRIC or limit is None:
        return None
    baked = [row for row in rows if row.step == 0 and row.candidate_errors is not None]
    served = round(sum(row.candidate_requests for row in baked))
    errors = round(sum(row.candidate_errors or 0.0 for row in baked))
    return _beyond_chance(errors, served, limit, alpha, "in the bake")


def _beyond_chance(
    errors: int, requests: int, limit: float, alpha: float, where: str
) -> str | None:
    """Why ``errors`` of ``requests`` are above an error ratio ``limit`` beyond chance (the
    exact one-sided binomial test at ``alpha``), in words; None when they may be chance."""
    p = error_ratio_p_value(errors, requests, limit)
    if requests <= 0 or p >= alpha:
        return None
    return (
        f"{errors} of the candidate's {requests} requests {where} failed; under an error "
        f"ratio of {limit:.3g} that happens with probability {p:.2g}"
    )
