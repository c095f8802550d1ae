"""The report's evidence: per criterion and step, the requests it was judged on, and how sure
each figure is. Pure.

Each row comes from ``status.evidence`` (engine/evidence.py). The sentence on how sure a figure
is depends on its measure: an error ratio gets its exact 95% interval ("0 of 175 failed; 95%
upper bound 1.7%"); a rate its exact Poisson interval; a cost its interval from the requests it
rests on (:func:`cost_spread`); a quantile or a mean how many requests it rests on against what it
needs, since a histogram's quantile has no interval without the samples.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

from acceltrial.api.durations import duration_seconds
from acceltrial.api.report import EvidenceRow
from acceltrial.api.spec import Criterion, TrialSpec
from acceltrial.api.status import CriterionEvidence
from acceltrial.engine.evidence import (
    CONFIDENCE,
    ERROR_METRIC,
    QUANTILES,
    Need,
    candidate_requests,
    error_ratio_interval,
    need_of,
    rate_interval,
)
from acceltrial.engine.metrics import COST_METRICS
from acceltrial.engine.sequential import sequential_check

RATE_METRICS = frozenset({"request_rate", "token_rate"})


def evidence_rows(spec: TrialSpec, evidence: Sequence[CriterionEvidence]) -> list[EvidenceRow]:
    """One row per criterion and step it was judged in, in the order of the steps (the bake,
    step 0, last)."""
    criteria = {c.name: c for c in spec.analysis.criteria}
    interval = duration_seconds(spec.analysis.interval)
    ordered = sorted(evidence, key=lambda row: (row.step == 0, row.step, row.weight))
    return [
        EvidenceRow(
            criterion=row.criterion,
            step=row.step,
            weight=row.weight,
            windows=row.windows,
            thin_windows=row.thin_windows,
            candidate_requests=row.candidate_requests,
            baseline_requests=row.baseline_requests,
            how_sure=how_sure(
                criteria.get(row.criterion),
                row,
                interval,
                sequential=_sequential(spec, criteria.get(row.criterion)),
            ),
        )
        for row in ordered
    ]


def _sequential(spec: TrialSpec, criterion: Criterion | None) -> bool:
    return criterion is not None and sequential_check(spec.analysis, criterion) is not None


def how_sure(
    criterion: Criterion | None,
    row: CriterionEvidence,
    interval_seconds: float,
    sequential: bool = False,
) -> str:
    """How sure the candidate's figure of one criterion in one step is, in words."""
    served = round(row.candidate_requests)
    metric = criterion.metric if criterion is not None else None
    if sequential and metric != ERROR_METRIC:
        # The sequential test is valid at any count: its evidence is what it says.
        return f"a sequential test on {served} requests (valid at any count)"
    if metric == ERROR_METRIC and row.candidate_errors is not None:
        failed = round(row.candidate_errors)
        low, high = error_ratio_interval(failed, served)
        if failed == 0:
            return f"0 of {served} failed; {CONFIDENCE:.0%} upper bound {high:.2%}"
        return f"{failed} of {served} failed; {CONFIDENCE:.0%} interval {low:.2%} to {high:.2%}"
    if metric in RATE_METRICS and row.windows:
        low, high = rate_interval(row.candidate_requests, row.windows * interval_seconds)
        return f"{served} requests; {CONFIDENCE:.0%} interval {low:.3g} to {high:.3g} requests/s"
    if metric in COST_METRICS and row.candidate_value_sum is not None and served > 0:
        return _cost_how_sure(row)
    need = need_of(criterion) if criterion is not None else None
    what = f"p{QUANTILES[metric] * 100:g}" if metric in QUANTILES else "figure"
    return f"a {what} of {served} requests" + _against(need, served)


def cost_spread(candidate_requests: float, baseline_requests: float | None = None) -> float:
    """The standard deviation of the logarithm of a unit cost (or of the ratio of two) from the
    requests behind it alone: a unit cost is a price times utilization over a rate, and a rate
    of n requests drawn at random varies by 1/sqrt(n). The utilization gauges' own noise is not
    in it: over the flagship's runs the pooled ratio's spread was 0.085 where the counts say
    0.089 (docs/demo.md), since utilization follows the same requests."""
    counts = [candidate_requests, *([baseline_requests] if baseline_requests else [])]
    return math.sqrt(sum(1 / count for count in counts))


def _cost_how_sure(row: CriterionEvidence) -> str:
    """A cost's figure in the step (the candidate's, over the baseline's when both were
    measured) with its interval from the counts."""
    served = round(row.candidate_requests)
    candidate = (row.candidate_value_sum or 0.0) / row.candidate_requests
    z = NormalDist().inv_cdf((1 + CONFIDENCE) / 2)
    base_served = row.baseline_requests or 0.0
    if row.baseline_value_sum and base_served > 0:
        ratio = candidate / (row.baseline_value_sum / base_served)
        width = math.exp(z * cost_spread(row.candidate_requests, base_served))
        low, high = ratio / width, ratio * width
        return (
            f"{ratio:.2f}x the baseline's on {served} and {round(base_served)} requests; "
            f"{CONFIDENCE:.0%} interval {low:.2f}x to {high:.2f}x from the counts"
        )
    width = math.exp(z * cost_spread(row.candidate_requests))
    return (
        f"{candidate:.4g} on {served} requests; {CONFIDENCE:.0%} interval "
        f"{candidate / width:.4g} to {candidate * width:.4g} from the count"
    )


def _against(need: Need | None, served: int) -> str:
    if need is None:
        return ""
    if served >= need.requests:
        return f" ({need.why}: enough)"
    return f" ({need.why}: thin)"


def judged_requests(criterion: Criterion, evidence: Sequence[CriterionEvidence]) -> float | None:
    """The candidate's requests a criterion was judged on over the trial; None if never
    counted."""
    if not any(row.criterion == criterion.name for row in evidence):
        return None
    return candidate_requests(evidence, criterion.name)
