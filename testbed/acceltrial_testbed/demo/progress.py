"""What the demo prints: one line per thing that happened, and the decision at the end.

Written for a person who has never seen the project: each line says what the operator is doing
and, for each measurement, what it measured on both variants against which limit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from acceltrial.api.reasons import CRITERION_FAILED, INCONCLUSIVE
from acceltrial.api.status import EconomicsStatus
from acceltrial.engine.metrics import COST_METRICS
from acceltrial.pages.progress_bar import bar, progress
from acceltrial.pages.savings import MADE, WOULD_HAVE, payback_line, savings_lines
from acceltrial_testbed.sandbox.fleet.exporter import FleetSnapshot

Manifest = dict[str, Any]

__all__ = ["PHASE_STORY", "bar", "progress"]  # the bar is the CLI's; the demo prints it too

PHASE_STORY = {
    "Pending": "the trial was accepted; it waits to start",
    "Preflight": "checking the baseline, the route and Neuron capacity; nothing is changed yet",
    "Progressing": "moving traffic to the candidate step by step, judging every interval",
    "Paused": "paused",
    "Promoting": "every step passed: sending all traffic to the candidate",
    "BakingIn": "all traffic on the candidate; watching it for the bake time before deciding",
    "Promoted": "promoted",
    "RollingBack": "a limit was crossed: restoring the routing exactly as it was found",
    "RolledBack": "rolled back",
    "Failed": "failed",
    "Aborted": "aborted",
}


def value(metric: str | None, number: float | None) -> str:
    """A measured value in the unit people read it in."""
    if number is None or not math.isfinite(number):
        return "n/a"
    if metric and metric.startswith(("latency", "ttft", "itl")):
        return f"{number:.3g}s"
    if metric in ("error_ratio", "accelerator_utilization"):
        return f"{number:.2%}"
    if metric == "cost_per_million_tokens":
        return f"${number:.3g}/1M tokens"
    if metric == "cost_per_thousand_requests":
        return f"${number:.3g}/1k requests"
    return f"{number:.4g}"


def criterion_line(result: Manifest, metric: str | None) -> str:
    """One criterion of one measurement: the numbers and the verdict."""
    verdict = {"Pass": "ok", "Fail": "FAIL", "Inconclusive": "?"}.get(result["verdict"], "?")
    if result.get("thin"):
        verdict = "thin"
    name = result["criterion"]
    candidate = value(metric, result.get("candidate"))
    if result.get("ratio") is not None:
        said = (
            f"candidate {candidate} vs baseline {value(metric, result.get('baseline'))} "
            f"({result['ratio']:.2f}x)"
        )
    elif result.get("candidate") is not None:
        said = f"candidate {candidate}"
    else:
        said = result.get("reason", "")
    served = (result.get("requests") or {}).get("candidate")
    on = f" on {served:.0f} of its requests" if served is not None else ""
    return f"{verdict:>4}  {name:<14} {said}{on}"


def traffic_line(snapshot: FleetSnapshot) -> str:
    parts = []
    for variant, traffic in snapshot.variants.items():
        pods = f"{traffic.pods} pod{'s' if traffic.pods != 1 else ''}"
        parts.append(f"{variant} {traffic.user_rps:.1f} req/s on {pods}")
    mirrored = snapshot.mirrored_rps
    copies = f", {mirrored:.1f} req/s mirrored to it" if mirrored > 0.05 else ""
    return (
        "traffic: "
        + ", ".join(parts)
        + f" ({snapshot.candidate_percent:.0f}% to the candidate{copies})"
    )


def latest_results(status: Manifest) -> list[Manifest]:
    at = status.get("lastMeasurementAt")
    return [r for r in status.get("analysis") or [] if r.get("at") == at]


def economics_lines(
    economics: Mapping[str, Any] | None,
    instance_types: Sequence[str],
    decision: Mapping[str, Any] | None = None,
    deciding: Mapping[str, str | None] | None = None,
    *,
    target: float | None = None,
    migration: float | None = None,
) -> list[str]:
    """The cost figures at the end of a trial: the savings at today's and at the projected
    replicas, with the counts and the rounding, and the payback. Told as made only when the
    candidate was promoted; otherwise as what the candidate would have saved or cost, beside the
    criteria ``deciding`` the outcome."""
    verdict = (decision or {}).get("verdict")
    if verdict == "none":
        return ["Economics: unknown (no user request reached the candidate: nothing was measured)"]
    if not economics:
        return ["Economics: no figures (no measurement had the traffic and prices they need)"]
    promoted = verdict in (None, "promote")
    lines = ["Economics:" if promoted else "Economics had it been promoted:"]
    per_token = "cost_per_million_tokens"
    for variant, instance in zip(("baseline", "candidate"), instance_types, strict=True):
        figures = economics.get(variant) or {}
        observed = value(per_token, figures.get("observedCostPerMillionTokens"))
        projected = value(per_token, figures.get("projectedCostPerMillionTokens"))
        busy = value("accelerator_utilization", figures.get("utilization"))
        lines.append(
            f"  {variant:<9} {instance:<13} pods ${_money(figures.get('costPerHour'))}/h, "
            f"utilization {busy}, observed {observed}, projected {projected}"
        )
    status = EconomicsStatus.model_validate(economics)
    verbs = MADE if promoted else WOULD_HAVE
    pair = (instance_types[0], instance_types[1])
    said = savings_lines(status, pair, target, verbs)
    payback = payback_line(status, migration, verbs) if said else None
    lines += [f"  {line}" for line in [*said, *([payback] if payback else [])]]
    if not promoted:
        lines.append(f"  {_not_promoted(str(verdict), deciding or {})}")
    return lines


def _not_promoted(verdict: str, deciding: Mapping[str, str | None]) -> str:
    what = "rolled back" if verdict == "rollback" else "was aborted"
    if not deciding:
        return f"nothing is saved: the trial {what} before any criterion failed"
    named = ", ".join(deciding)
    on_cost = [name for name, metric in deciding.items() if metric in COST_METRICS]
    if on_cost and len(on_cost) == len(deciding):
        return f"nothing is saved: the trial {what} on its cost criterion {named}"
    if on_cost:
        return f"nothing is saved: the trial {what} on {named} (cost among them)"
    return (
        f"nothing is saved: the trial {what} on {named}, not on cost;\n"
        "  the figures above are what the candidate would have saved or cost"
    )


def deciding_criteria(status: Manifest, metrics: Mapping[str, str | None]) -> dict[str, str | None]:
    """The criteria (name: metric) whose verdict in the last measurement rolled the trial back:
    the failed ones, else those that did not pass; none for an abort or a rollback for another
    reason (a candidate that never became Available, or was not scaled for all traffic)."""
    decision = status.get("decision") or {}
    if decision.get("verdict") != "rollback":
        return {}
    if decision.get("reasonCode") not in (CRITERION_FAILED, INCONCLUSIVE):
        return {}
    latest = latest_results(status)
    failed = [r["criterion"] for r in latest if r.get("verdict") == "Fail"]
    named = failed or [r["criterion"] for r in latest if r.get("verdict") != "Pass"]
    return {name: metrics.get(name) for name in named}


def _money(number: float | None) -> str:
    return "n/a" if number is None else f"{number:.3f}"
