"""What a trial's notifications say: the events a tick's transition makes (``events_between``)
and the JSON each receiver gets (``payload``; docs/notifications.md), with the Slack text beside
it. Pure: statuses in, plain JSON out; delivering it is a provider's business."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from acceltrial.api.report import report_name
from acceltrial.api.spec import TrialSpec
from acceltrial.api.spec.notifications import ENDINGS, Notification, NotificationEvent
from acceltrial.api.status import TrialStatus
from acceltrial.engine.candidate import TrialRef

Payload = dict[str, Any]
SCHEMA = "acceltrial.dev/notification/v1"
"""The payload's ``schema``: a receiver tells versions apart by it."""


def events_between(before: TrialStatus, after: TrialStatus) -> list[NotificationEvent]:
    """The events a tick's transition from ``before`` to ``after`` makes, in the order they
    happened: a step completed comes before the pause or the ending it led to."""
    events: list[NotificationEvent] = []
    if before.phase == "Preflight" and after.phase == "Progressing":
        events.append("Started")
    if _completed_step(before, after) is not None:
        events.append("StepCompleted")
    awaiting = after.pause_reason == "AwaitingApproval"
    if after.phase == "Paused" and (
        before.phase != "Paused" or before.pause_reason != after.pause_reason
    ):
        events.append("AwaitingApproval" if awaiting else "Paused")
    if after.phase in ENDINGS and before.phase != after.phase:
        events.append(after.phase)  # type: ignore[arg-type]  # ENDINGS are events too
    return events


def _completed_step(before: TrialStatus, after: TrialStatus) -> int | None:
    """The step the transition left behind having passed it, if any: the next step began, or
    the last one led to the promotion or to waiting for approve."""
    step = before.step or 0
    if step < 1 or before.phase not in ("Progressing", "Paused"):
        return None
    awaited = before.pause_reason == "AwaitingApproval"  # its last step was told already
    moved_on = (after.step or 0) > step
    promoted = after.phase == "Promoting" and not awaited
    approval = after.pause_reason == "AwaitingApproval" and not awaited
    return step if moved_on or promoted or approval else None


def wanted(notification: Notification, event: NotificationEvent) -> bool:
    return notification.events is None or event in notification.events


@dataclass(frozen=True)
class Transition:
    """One tick's change of a trial's status, and when it was written."""

    before: TrialStatus
    after: TrialStatus
    at: datetime


def payload(
    event: NotificationEvent, trial: TrialRef, spec: TrialSpec, moved: Transition
) -> Payload:
    """The JSON object a webhook receives for ``event`` (docs/notifications.md)."""
    before, after, at = moved.before, moved.after, moved.at
    decision = after.decision
    step = _completed_step(before, after) if event == "StepCompleted" else after.step
    body: Payload = {
        "schema": SCHEMA,
        "trial": trial.name,
        "namespace": trial.namespace,
        "event": event,
        "phase": after.phase,
        "reasonCode": decision.reason_code if decision else None,
        "message": after.message,
        "step": step,
        "steps": len(spec.steps),
        "weight": after.canary_weight,
        "at": at.isoformat(),
        "report": {
            "configMap": report_name(trial.name),
            "command": f"kubectl acceltrial report {trial.name} -n {trial.namespace}",
        },
    }
    if event in ("Paused", "AwaitingApproval"):
        body["pauseReason"] = after.pause_reason
    if event in ENDINGS:
        body["decision"] = None if decision is None else {
            "verdict": decision.verdict, "reason": decision.reason,
        }  # fmt: skip
        body["economics"] = _economics(after)
    return body


def _economics(status: TrialStatus) -> Payload | None:
    economics = status.economics
    if economics is None:
        return None
    per_token = {
        variant: figures.projected_cost_per_million_tokens
        for variant, figures in (
            ("baseline", economics.baseline),
            ("candidate", economics.candidate),
        )
        if figures is not None
    }
    return {
        "projectedCostPerMillionTokens": per_token,
        "currentMonthlySavings": economics.current_monthly_savings,
        "projectedMonthlySavings": economics.projected_monthly_savings,
        "paybackMonths": economics.payback_months,
    }


def slack_text(body: Payload) -> str:
    """The same facts as a Slack message: one headline, then the details a person acts on."""
    headline = f"*{body['event']}*: AcceleratorTrial `{body['namespace']}/{body['trial']}`"
    lines = [headline, f"phase {body['phase']}" + _step(body)]
    if body.get("reasonCode"):
        lines.append(f"reason code {body['reasonCode']}")
    if body.get("message"):
        lines.append(str(body["message"]))
    savings = (body.get("economics") or {}).get("currentMonthlySavings")
    if savings is not None:
        lines.append(f"savings at today's replicas: ${savings:,.0f} per month")
    lines.append(f"report: `{body['report']['command']}`")
    return "\n".join(lines)


def _step(body: Payload) -> str:
    step, weight = body.get("step"), body.get("weight")
    if not step:
        return ""
    return f", step {step}/{body['steps']}" + (f" at {weight}%" if weight is not None else "")
