"""How much evidence a verdict needs, and how sure each figure is.

Pure. A criterion's figure is only as good as the requests behind it: a p99 of twelve requests
is their largest one, an error ratio of 0 of 40 allows anything up to 7%. This module owns

- **the need**: how many of the candidate's requests a criterion's measure implies
  (:func:`need_of`): a quantile at least 100 (one request in a hundred lies above a p99; fewer
  than 30 for any quantile tells nothing), a ratio limit ``L`` (errors) at least ``1/L`` requests
  (100 for 1%), a mean or a rate at least 30 (where a mean's sampling error is roughly normal).
  A user's ``minRequests`` overrides it; ``minRequests: 0`` turns it off. Utilization is read
  from the accelerator's exporter, not from requests: it has no request need.
- **thin windows** (the rule engine/weighing.py applies): a window holding fewer requests
  than the need neither passes nor fails its criterion, unless the breach is already
  decisive: an error ratio whose errors are improbable under the limit (one-sided exact
  binomial test at ``analysis.alpha``), or a mean or rate beyond its limit by
  :data:`CLEAR_BREACH` times (a quantile of a few requests is never decisive: a histogram's
  quantile of 45 requests is their largest one or two, and read 1.8x by chance; nor is a cost,
  which harms no user while the trial runs and joins a few seconds' utilization to a few
  requests' tokens). A window
  with no request at all is no data (Inconclusive), as ever.
- **the promotion's evidence** (:func:`shortfalls`): each criterion's candidate requests counted
  over every window the trial judged it on, against its need; and an absolute error limit met
  by the errors over those windows (errors above it, even within chance, do not promote).
- **the forecast** (:func:`evidence_forecast`): before anything changes, whether the steps and
  the bake can bring that many requests at the baseline's traffic today.
- **intervals** (:func:`error_ratio_interval`, :func:`rate_interval`): exact (Clopper-Pearson)
  bounds for a proportion and exact (Garwood) bounds for a Poisson count, as the report states
  them ("0 of 175 failed; 95% upper bound 1.7%").
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import special  # type: ignore[import-untyped]

from acceltrial.api.durations import duration_seconds
from acceltrial.api.spec import Criterion, TrialSpec
from acceltrial.api.status import CriterionEvidence, CriterionResult
from acceltrial.engine.metrics import COST_METRICS, UTILIZATION_METRIC

QUANTILES = {
    "latency_p50": 0.50,
    "latency_p90": 0.90,
    "latency_p99": 0.99,
    "ttft_p99": 0.99,
    "itl_p99": 0.99,
}
"""The preset metrics that are quantiles, and which."""
MEAN_METRICS = frozenset({"latency_mean", "request_rate", "token_rate", *COST_METRICS})
"""Means and rates: figures whose error shrinks as one over the square root of the requests."""
ERROR_METRIC = "error_ratio"
MEAN_NEED = 30
"""Requests behind a mean before its sampling error is roughly normal."""
RATIO_NEED_WITHOUT_LIMIT = 100
"""An error ratio judged relative to the baseline's, or against 0, needs what a 1% limit needs."""
CLEAR_BREACH = 1.5
"""A thin window fails its criterion when its figure is beyond the limit by this factor."""
CONFIDENCE = 0.95
"""The confidence of the intervals the report states."""


@dataclass(frozen=True)
class Need:
    """How many of the candidate's requests a criterion rests on before it can promote."""

    requests: int
    why: str
    """In words: 'a p99 needs 100 requests'."""


def need_of(criterion: Criterion) -> Need | None:
    """The evidence ``criterion`` needs, or None when it is not counted in requests."""
    if criterion.min_requests is not None:
        wanted = math.ceil(criterion.min_requests)
        return Need(wanted, f"minRequests asks for {wanted}") if wanted > 0 else None
    metric = criterion.metric or UTILIZATION_METRIC
    # The user's own query, or an exporter's gauge (utilization): not counted in requests.
    if metric in QUANTILES:
        quantile = QUANTILES[metric]
        wanted = max(MEAN_NEED, math.ceil(round(1 / (1 - quantile), 6)))
        return Need(wanted, f"a p{quantile * 100:g} needs {wanted} requests")
    if metric == ERROR_METRIC:
        return _ratio_need(criterion)
    return Need(MEAN_NEED, f"a mean needs {MEAN_NEED} requests") if metric in MEAN_METRICS else None


def _ratio_need(criterion: Criterion) -> Need:
    limit = criterion.absolute.max if criterion.absolute is not None else None
    if limit is None or limit <= 0:
        return Need(RATIO_NEED_WITHOUT_LIMIT, f"an error ratio needs {RATIO_NEED_WITHOUT_LIMIT}")
    wanted = min(100_000, math.ceil(round(1 / limit, 6)))
    return Need(wanted, f"an error ratio limited to {limit:.3g} needs {wanted} requests (1/limit)")


def error_ratio_p_value(errors: int, requests: int, limit: float) -> float:
    """P(at least ``errors`` errors in ``requests``) were the true ratio ``limit``: the exact
    one-sided binomial test."""
    if requests <= 0 or errors <= 0:
        return 1.0
    # P(X >= k) for X ~ Binomial(n, p) is the regularized incomplete beta I_p(k, n - k + 1).
    return float(special.betainc(errors, requests - errors + 1, limit))


def share_above_p_value(
    slower: int, requests: int, other_slower: int, other_requests: int
) -> float:
    """P(at least ``slower`` of ``requests``) were their share no greater than the other
    sample's (``other_slower`` of ``other_requests``): Fisher's exact test, one-sided, the
    upper tail of the hypergeometric law of ``slower`` given both margins."""
    if requests <= 0 or other_requests <= 0 or slower <= 0:
        return 1.0
    total, events = requests + other_requests, slower + other_slower
    k = np.arange(slower, min(events, requests) + 1)
    log_pmf = (
        _log_choose(events, k)
        + _log_choose(total - events, requests - k)
        - _log_choose(total, requests)
    )
    return float(min(1.0, np.exp(special.logsumexp(log_pmf))))


def _log_choose(n: float, k: Any) -> Any:
    return special.gammaln(n + 1) - special.gammaln(k + 1) - special.gammaln(n - k + 1)


def error_ratio_interval(
    errors: int, requests: int, confidence: float = CONFIDENCE
) -> tuple[float, float]:
    """Two-sided exact (Clopper-Pearson) bounds of a proportion; with no error, the one-sided
    upper bound ``1 - (1 - confidence) ** (1 / n)`` (0 of 175: 1.7%)."""
    if requests <= 0:
        return 0.0, 1.0
    if errors <= 0:
        return 0.0, 1 - (1 - confidence) ** (1 / requests)
    tail = (1 - confidence) / 2
    # The beta quantiles of Clopper and Pearson (1934).
    low = float(special.betaincinv(errors, requests - errors + 1, tail))
    if errors >= requests:
        return low, 1.0
    return low, float(special.betaincinv(errors + 1, requests - errors, 1 - tail))


def rate_interval(
    count: float, seconds: float, confidence: float = CONFIDENCE
) -> tuple[float, float]:
    """Exact (Garwood) bounds of a Poisson rate from ``count`` events in ``seconds``."""
    if seconds <= 0:
        return 0.0, math.inf
    n = max(0, round(count))
    tail = (1 - confidence) / 2
    # Garwood (1936): chi2(q, 2n) / 2, which is the gamma quantile gammaincinv(n, q).
    low = 0.0 if n == 0 else float(special.gammaincinv(n, tail))
    high = float(special.gammaincinv(n + 1, 1 - tail))
    return low / seconds, high / seconds


# -- accumulating what each criterion was judged on ----------------------------------------------


def record(
    kept: Sequence[CriterionEvidence], results: Iterable[CriterionResult]
) -> list[CriterionEvidence]:
    """The evidence after one more measurement: each judged result's requests added to its
    criterion's row for its step and weight (a result spanning the whole step replaces the
    step's count instead). Thin windows count: they were looked at and showed no clear harm."""
    rows = {(row.criterion, row.step, row.weight): row for row in kept}
    for result in results:
        if result.requests is None or (result.verdict == "Inconclusive" and not result.thin):
            continue  # a window with no data or an error judged nothing
        key = (result.criterion, result.step, result.weight)
        row = rows.get(key) or CriterionEvidence(
            criterion=result.criterion, step=result.step, weight=result.weight
        )
        rows[key] = _added(row, result)
    return list(rows.values())


def _added(row: CriterionEvidence, result: CriterionResult) -> CriterionEvidence:
    counted = result.requests
    assert counted is not None
    spans_step = counted.spans_step
    candidate = counted.candidate + (0.0 if spans_step else row.candidate_requests)
    baseline = None
    if counted.baseline is not None:
        baseline = counted.baseline + (0.0 if spans_step else (row.baseline_requests or 0.0))
    errors = row.candidate_errors
    if counted.candidate_errors is not None:
        errors = counted.candidate_errors + (0.0 if spans_step else (errors or 0.0))
    return row.model_copy(
        update={
            **_value_sums(row, result, spans_step),
            "windows": row.windows + 1,
            "thin_windows": row.thin_windows + result.thin,
            "candidate_requests": candidate,
            "baseline_requests": baseline,
            "candidate_errors": errors,
        }
    )


def _value_sums(
    row: CriterionEvidence, result: CriterionResult, spans_step: bool
) -> dict[str, float | None]:
    """Each variant's figure times its requests, added to the step's sums (none for a count
    spanning the step: a sequential test has no figure to pool)."""
    counted = result.requests
    assert counted is not None
    if spans_step:
        return {}
    sums: dict[str, float | None] = {}
    if result.candidate is not None:
        sums["candidate_value_sum"] = (row.candidate_value_sum or 0.0) + (
            result.candidate * counted.candidate
        )
    if result.baseline is not None and counted.baseline is not None:
        sums["baseline_value_sum"] = (row.baseline_value_sum or 0.0) + (
            result.baseline * counted.baseline
        )
    return sums


def candidate_requests(evidence: Sequence[CriterionEvidence], criterion: str) -> float:
    """The candidate's requests a criterion was judged on over the whole trial."""
    return sum(row.candidate_requests for row in evidence if row.criterion == criterion)


def shortfalls(criteria: Sequence[Criterion], evidence: Sequence[CriterionEvidence]) -> list[str]:
    """Each criterion whose judged requests fall short of its need, in words (empty: enough)."""
    short = []
    for criterion in criteria:
        need = need_of(criterion)
        if need is None:
            continue
        rows = [row for row in evidence if row.criterion == criterion.name]
        if not rows:
            continue  # never counted (its requests cannot be read): nothing to hold it to
        held = candidate_requests(evidence, criterion.name)
        if held < need.requests:
            short.append(
                f"{criterion.name} was judged on {held:.0f} of the candidate's requests; {need.why}"
            )
            continue
        compared = _compared_cost(criterion, rows)
        if compared is not None and compared < need.requests:
            short.append(
                f"{criterion.name} was compared with the baseline's cost on {compared:.0f} of its "
                f"requests; {need.why}"
            )
            continue
        above = _errors_above_limit(criterion, rows, need)
        if above is not None:
            short.append(above)
    return short


def _compared_cost(criterion: Criterion, rows: Sequence[CriterionEvidence]) -> float | None:
    """The baseline's requests behind the figures a relative cost was compared with, or None
    for any other criterion: a candidate's cost never set beside the baseline's (every step
    window unsound, the bake with nothing to compare) shows no saving."""
    if criterion.metric not in COST_METRICS or criterion.relative is None:
        return None
    return sum(row.baseline_requests or 0.0 for row in rows if row.baseline_value_sum is not None)


def _errors_above_limit(
    criterion: Criterion, rows: Sequence[CriterionEvidence], need: Need
) -> str | None:
    """Why an absolute error limit is not shown met: the candidate's errors over every judged
    window whose errors were counted (at least the need of them) are above it, though not
    beyond chance (that rolls back). 7 failed of 244 at a 1% limit is p = 0.013, no failure
    at alpha 0.01, and no promotion either."""
    limit = criterion.absolute.max if criterion.absolute is not None else None
    counted = [row for row in rows if row.candidate_errors is not None]
    if criterion.metric != ERROR_METRIC or limit is None or not counted:
        return None
    requests = round(sum(row.candidate_requests for row in counted))
    errors = round(sum(row.candidate_errors or 0.0 for row in counted))
    if requests < max(1, need.requests) or errors / requests <= limit:
        return None
    low, high = error_ratio_interval(errors, requests)
    return (
        f"{criterion.name}: {errors} of the candidate's {requests} requests failed "
        f"({errors / requests:.1%}; {CONFIDENCE:.0%} interval {low:.1%} to {high:.1%}), above "
        f"its limit of {limit:.3g}: not shown within it"
    )


def judged_on(criteria: Sequence[Criterion], evidence: Sequence[CriterionEvidence]) -> str:
    """The promotion's evidence in words: each counted criterion's requests and need."""
    said = []
    for criterion in criteria:
        need = need_of(criterion)
        if need is None or not any(row.criterion == criterion.name for row in evidence):
            continue
        held = candidate_requests(evidence, criterion.name)
        said.append(f"{criterion.name} {held:.0f} (needs {need.requests})")
    if not said:
        return ""
    return "judged on the candidate's requests: " + ", ".join(said)


# -- before the trial starts: can these steps gather the evidence? --------------------------------


def expected_requests(spec: TrialSpec, requests_per_second: float, criterion: Criterion) -> float:
    """About how many of the candidate's requests the steps (at or above the criterion's
    ``fromWeight``; a mirror step's copies count) and the bake (at 100%) bring it, at today's
    traffic."""
    steps = sum(
        requests_per_second * (step.share or step.mirrored) / 100 * duration_seconds(step.duration)
        for step in spec.steps
        if step.share >= criterion.from_weight or (step.mirrored and not criterion.from_weight)
    )
    return steps + requests_per_second * duration_seconds(spec.promotion.bake_time)


def evidence_forecast(spec: TrialSpec, requests_per_second: float) -> list[str]:
    """Each criterion these steps cannot gather its evidence for at today's traffic, with the
    bake that would (empty: they can)."""
    short = []
    for criterion in spec.analysis.criteria:
        need = need_of(criterion)
        if need is None:
            continue
        expected = expected_requests(spec, requests_per_second, criterion)
        if expected >= need.requests:
            continue
        from_steps = expected - requests_per_second * duration_seconds(spec.promotion.bake_time)
        bake = math.ceil((need.requests - from_steps) / max(requests_per_second, 1e-9) / 60)
        short.append(
            f"at {requests_per_second:.3g} requests/s these steps and the bake bring the candidate "
            f"about {expected:.0f} requests; {criterion.name}: {need.why}: make "
            f"promotion.bakeTime at least {bake}m (or the steps longer)"
        )
    return short


EVIDENCE_EXPECTED = "EvidenceExpected"
"""Condition: whether the steps can bring the candidate the requests its promotion needs."""
TOO_LITTLE_TRAFFIC = "TooLittleTraffic"


@dataclass(frozen=True)
class Forecast:
    """What preflight says once of the evidence the steps can bring (condition
    EvidenceExpected; a warning when short, the trial still starts)."""

    enough: bool
    message: str


def forecast_once(
    spec: TrialSpec, conditions: Sequence[Any], requests_per_second: float | None
) -> Forecast | None:
    """The forecast at today's baseline traffic; None without a rate or once said."""
    said = any(c.type == EVIDENCE_EXPECTED for c in conditions)
    if requests_per_second is None or said:
        return None
    short = evidence_forecast(spec, requests_per_second)
    if short:
        return Forecast(False, "; ".join(short))
    enough = (
        f"at {requests_per_second:.3g} requests/s the steps and the bake can bring what it needs"
    )
    return Forecast(True, enough)
