"""The savings and the payback in words, as a careful analyst states them, from
``status.economics``: at today's replicas and at the projected replicas, both, each with the
replica counts and the rounding named ("3 g5.xlarge (2.07 rounded up)"), a range where the
utilization's uncertainty moves a count, and every figure labelled with the measurement window it
comes from. Shared by the report pages and the demo's closing lines.

For a trial that did not promote, the same figures are what the candidate would have saved or
cost: the verbs say so ("would have cost $702 more per month"), never a bare "costs".
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from acceltrial.api.report import Report
from acceltrial.api.status import EconomicsStatus, VariantEconomics
from acceltrial.engine.economics import UTILIZATION_BAND, payback_months
from acceltrial.engine.routing import share_text

_TOLERANCE = 1e-6


@dataclass(frozen=True)
class Verbs:
    """How a saving is said: as made (a promotion, a running trial) or as it would have been."""

    saves: str
    costs: str
    or_costs: str
    """The second verb of 'saves up to $767 or costs up to $1,405 more'."""
    pays_back: str
    never: str


MADE = Verbs("saves", "costs", "costs", "pays back", "never pays back")
WOULD_HAVE = Verbs(
    "would have saved",
    "would have cost",
    "cost",
    "would have paid back",
    "would never have paid back",
)


def window_of(
    step: int | None, weight: int | None, at: datetime | None, requested: int | None = None
) -> str:
    """Which measurement window figures come from, in words (the share the routing gave, with
    the step's asked weight beside it where they differ)."""
    if at is None:
        return "never measured with traffic"
    where = "the bake" if step == 0 or weight == 100 else f"step {step}"
    share = share_text(weight or 0, requested)
    return f"{where} ({share} to the candidate), window ending {at.strftime('%H:%M:%S')} UTC"


def economics_window(economics: EconomicsStatus, variant: str | None = None) -> str:
    """The window of ``status.economics`` (of one variant's figures, or of both); figures kept
    before windows were recorded say so."""
    if economics.measured_at is None:
        return "the latest measurement with traffic (its window was not recorded)"
    said = window_of(economics.step, economics.weight, economics.measured_at)
    if variant == "candidate" or not baking(economics):
        return said
    # During the bake the baseline serves nothing: it is read over its last window of traffic.
    before = "its last window with traffic, before the bake"
    return (
        f"{before} (priced in {said})"
        if variant == "baseline"
        else f"{said}; the baseline's from {before}"
    )


def baking(economics: EconomicsStatus) -> bool:
    return economics.step == 0 or economics.weight == 100


def dollars(value: float) -> str:
    return f"${abs(value):,.0f}"


def saving(value: float, verbs: Verbs) -> str:
    """'saves $32' or 'costs $702 more' (or their 'would have' forms), per month."""
    if round(value) >= 0:
        return f"{verbs.saves} {dollars(value)} per month"
    return f"{verbs.costs} {dollars(value)} more per month"


def saving_range(low: float, high: float, verbs: Verbs) -> str:
    """A saving that is a range: both ends with their sign in words."""
    if round(low) == round(high):
        return saving(high, verbs)
    if round(low) >= 0:
        return f"{verbs.saves} {dollars(low)} to {dollars(high)} per month"
    if round(high) < 0:
        return f"{verbs.costs} {dollars(high)} to {dollars(low)} more per month"
    return (
        f"{verbs.saves} up to {dollars(high)} per month or {verbs.or_costs} up to "
        f"{dollars(low)} more"
    )


def _fleet(replicas: int | None, instance: str, per_hour: float | None) -> str:
    counted = f"{replicas} {instance}" if replicas is not None else f"{instance} (replicas unknown)"
    return counted if per_hour is None else f"{counted} (${per_hour:,.3f}/h)"


def rounding(figures: VariantEconomics) -> str:
    """How the projected replicas were rounded: '2.07 rounded up; 2 to 3 with utilization 5
    points either way'; empty when not known."""
    count, needed = figures.projected_replicas, figures.replicas_needed
    parts = []
    if count is not None and needed is not None:
        rounded = count > needed + _TOLERANCE
        parts.append(f"{needed:.2f} rounded up" if rounded else f"{needed:.2f} needed")
    low, high = figures.projected_replicas_low, figures.projected_replicas_high
    if low is not None and high is not None and low != high:
        parts.append(
            f"{low} to {high} with utilization {UTILIZATION_BAND * 100:g} points either way"
        )
    return "; ".join(parts)


def projected_count(figures: VariantEconomics | None) -> str:
    """'3 (2.07 rounded up)', or n/a."""
    if figures is None or figures.projected_replicas is None:
        return "n/a"
    how = rounding(figures)
    return f"{figures.projected_replicas} ({how})" if how else str(figures.projected_replicas)


def projected_fleet(figures: VariantEconomics, instance: str) -> str:
    """'3 g5.xlarge (2.07 rounded up; 2 to 3 with utilization 5 points either way)'."""
    if figures.projected_replicas is None:
        return f"{instance} (replicas unknown)"
    how = rounding(figures)
    said = f"{figures.projected_replicas} {instance}"
    return f"{said} ({how})" if how else said


def savings_lines(
    economics: EconomicsStatus,
    instances: tuple[str, str],
    target: float | None,
    verbs: Verbs = MADE,
) -> list[str]:
    """At today's replicas and at the projected replicas: the counts, then what the candidate
    saves (a range where the utilization band moves a count). Empty without any figure."""
    base = economics.baseline or VariantEconomics()
    cand = economics.candidate or VariantEconomics()
    lines = []
    today = economics.current_monthly_savings
    if today is not None:
        lines.append(
            f"At today's replicas, {_fleet(base.replicas, instances[0], base.cost_per_hour)} "
            f"against {_fleet(cand.replicas, instances[1], cand.cost_per_hour)}: the candidate "
            f"{saving(today, verbs)}."
        )
    projected = economics.projected_monthly_savings
    if projected is not None:
        ranged = _projected_range(economics)
        said = saving(projected, verbs) if ranged is None else saving_range(*ranged, verbs)
        at_measured = (
            "" if ranged is None else f" ({_signed(projected)} at the measured utilization)"
        )
        goal = f"{target:.0%} utilization" if target is not None else "the target utilization"
        lines.append(
            f"At the replicas all traffic needs at {goal}, {projected_fleet(base, instances[0])} "
            f"against {projected_fleet(cand, instances[1])}: the candidate {said}{at_measured}."
        )
    if lines:
        lines.append(f"Cost figures from {economics_window(economics)}.")
    return lines


def _projected_range(economics: EconomicsStatus) -> tuple[float, float] | None:
    """The projected savings' (lowest, highest) when the utilization band moves a count."""
    low, high = economics.projected_monthly_savings_low, economics.projected_monthly_savings_high
    if low is None or high is None or round(low) == round(high):
        return None
    return low, high


def _signed(value: float) -> str:
    return f"{dollars(value)} saved" if round(value) >= 0 else f"{dollars(value)} more"


def payback_line(
    economics: EconomicsStatus, migration: float | None, verbs: Verbs = MADE
) -> str | None:
    """Migration cost / monthly saving, at today's and at the projected replicas (a range where
    the saving is one); None without a migration cost."""
    if migration is None:
        return None
    parts = []
    today = economics.current_monthly_savings
    if today is not None:
        parts.append(f"at today's replicas, {_payback(migration, today, today, verbs)}")
    projected = economics.projected_monthly_savings
    low, high = _projected_range(economics) or (projected, projected)
    if projected is not None and low is not None and high is not None:
        parts.append(f"at the projected replicas, {_payback(migration, low, high, verbs)}")
    effort = f"Migration effort {dollars(migration)}"
    if not parts:
        return f"{effort}: payback unknown (no cost figures were measured)."
    return f"{effort}: {'; '.join(parts)}."


def _payback(migration: float, low: float, high: float, verbs: Verbs) -> str:
    """Payback over savings from ``low`` to ``high``: fastest at the highest, slowest at the
    lowest."""
    fastest, slowest = payback_months(migration, high), payback_months(migration, low)
    if fastest is None:
        return f"{verbs.never} (nothing saved)"
    if slowest is None:
        at_best = f"{verbs.pays_back} in {fastest:.1f} months at best"
        return f"{at_best}, never at worst (it may save nothing)"
    if f"{fastest:.1f}" == f"{slowest:.1f}":
        return f"{verbs.pays_back} in {fastest:.1f} months"
    return f"{verbs.pays_back} in {fastest:.1f} to {slowest:.1f} months"


def payoff_lines(report: Report) -> list[str]:
    """Savings and payback: as made for a promoted (or still running) trial; otherwise as what
    the candidate would have saved or cost, beside the reason of the decision."""
    decision = report.decision
    verdict = decision.verdict if decision else None
    if verdict == "none":
        return ["Economics unknown: the trial ended before anything was deployed or measured."]
    verbs = WOULD_HAVE if verdict in ("rollback", "abort") else MADE
    econ = report.economics
    instances = (report.variants.baseline.instance_type, report.variants.candidate.instance_type)
    lines = savings_lines(econ, instances, report.target_utilization, verbs) if econ else []
    payback = payback_line(econ, report.migration_cost, verbs) if econ and lines else None
    lines += [payback] if payback else []
    if not lines:
        lines = ["No cost figures: no measurement had the traffic and the prices they need."]
    if verbs is WOULD_HAVE and decision is not None:
        what = "rolled back" if verdict == "rollback" else "was aborted"
        lines.append(f"Nothing is saved: the trial {what} ({decision.reason}).")
    return lines
