"""The recommendation of a training trial: each criterion judged on the figures and their
uncertainty, then one verdict. Pure.

Every figure is an interval (the mean and a 95% range): a run's cost and time follow from the
steady-state speed's interval, the loss gap carries its own. A criterion passes when the whole
interval meets its limits, fails when none of it does, and is inconclusive when the limit falls
inside (the trial ran too few steps to say). One failed criterion makes the trial
``NotRecommended`` (``CriterionFailed``); else one inconclusive makes it ``NotRecommended``
(``Inconclusive``); else it is ``Recommended``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from acceltrial.api.spec import Bounds, RelativeBounds
from acceltrial.api.training import TrainingCriterion

Verdict = Literal["Pass", "Fail", "Inconclusive"]
UNITS = {
    "cost_per_run": "USD per run",
    "time_per_run": "hours per run",
    "tokens_per_dollar": "tokens per USD",
    "loss_gap": "",
    "time_to_first_step": "s to the first step",
}


@dataclass(frozen=True)
class Figure:
    """A value with its 95% range (low == high == mean when it has no uncertainty)."""

    mean: float
    low: float
    high: float

    @classmethod
    def exact(cls, value: float) -> Figure:
        return cls(value, value, value)

    def ratio_to(self, other: Figure) -> Figure | None:
        """self / other, its range from the extremes; None when other may be 0."""
        if min(other.low, other.mean) <= 0:
            return None
        return Figure(self.mean / other.mean, self.low / other.high, self.high / other.low)


@dataclass(frozen=True)
class CriterionResult:
    name: str
    metric: str
    verdict: Verdict
    value: float | None
    message: str


@dataclass(frozen=True)
class Recommendation:
    verdict: Literal["Recommended", "NotRecommended"]
    reason_code: Literal["Recommended", "CriterionFailed", "Inconclusive"]
    reason: str
    criteria: tuple[CriterionResult, ...]


Figures = Mapping[str, Figure | None]
"""A variant's figures by metric name (None: not measured, with the reason in ``missing``)."""


def judge(
    criteria: Sequence[TrainingCriterion],
    baseline: Figures,
    candidate: Figures,
    missing: Mapping[str, str] | None = None,
) -> Recommendation:
    """Each criterion on the candidate's figures (and the baseline's, for relative ones)."""
    results = tuple(
        _criterion(c, baseline.get(c.metric), candidate.get(c.metric), (missing or {}))
        for c in criteria
    )
    failed = [r for r in results if r.verdict == "Fail"]
    unsure = [r for r in results if r.verdict == "Inconclusive"]
    if failed:
        reason = "; ".join(f"{r.name}: {r.message}" for r in failed)
        return Recommendation("NotRecommended", "CriterionFailed", reason, results)
    if unsure:
        reason = "; ".join(f"{r.name}: {r.message}" for r in unsure)
        return Recommendation("NotRecommended", "Inconclusive", reason, results)
    reason = "every criterion met: " + "; ".join(f"{r.name}: {r.message}" for r in results)
    return Recommendation("Recommended", "Recommended", reason, results)


def _criterion(
    criterion: TrainingCriterion,
    baseline: Figure | None,
    candidate: Figure | None,
    missing: Mapping[str, str],
) -> CriterionResult:
    metric = criterion.metric
    if candidate is None or (criterion.relative is not None and baseline is None):
        why = missing.get(metric, f"{metric} was not measured")
        return CriterionResult(criterion.name, metric, "Inconclusive", None, why)
    if criterion.relative is not None:
        assert baseline is not None
        ratio = candidate.ratio_to(baseline)
        if ratio is None:
            why = f"the baseline's {metric} is 0: no ratio"
            return CriterionResult(criterion.name, metric, "Inconclusive", None, why)
        verdict = _within(ratio, criterion.relative)
        limits = _limits(criterion.relative)
        text = (
            f"{metric} {_show(metric, candidate)} against the baseline's "
            f"{_show(metric, baseline)}: ratio {_range(ratio)}, limits {limits}"
        )
        return CriterionResult(criterion.name, metric, verdict, ratio.mean, text)
    assert criterion.absolute is not None
    verdict = _within(candidate, criterion.absolute)
    text = f"{metric} {_show(metric, candidate)}, limits {_limits(criterion.absolute)}"
    return CriterionResult(criterion.name, metric, verdict, candidate.mean, text)


def _within(value: Figure, bounds: Bounds | RelativeBounds) -> Verdict:
    low_ok = bounds.min is None or value.low >= bounds.min
    high_ok = bounds.max is None or value.high <= bounds.max
    if low_ok and high_ok:
        return "Pass"
    outside = (bounds.min is not None and value.high < bounds.min) or (
        bounds.max is not None and value.low > bounds.max
    )
    return "Fail" if outside else "Inconclusive"


def _show(metric: str, value: Figure) -> str:
    unit = UNITS.get(metric, "")
    text = _range(value, percent=metric == "loss_gap")
    return f"{text} {unit}".rstrip()


def _range(value: Figure, percent: bool = False) -> str:
    def fmt(x: float) -> str:
        return f"{x:+.1%}" if percent else f"{x:,.4g}"

    if value.low == value.high:
        return fmt(value.mean)
    return f"{fmt(value.mean)} (95%: {fmt(value.low)} to {fmt(value.high)})"


def _limits(bounds: Bounds | RelativeBounds) -> str:
    parts = [f"min {bounds.min:g}"] if bounds.min is not None else []
    parts += [f"max {bounds.max:g}"] if bounds.max is not None else []
    return ", ".join(parts)
