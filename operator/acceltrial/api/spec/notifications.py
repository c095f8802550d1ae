"""``spec.notifications``: who hears of a trial's events (a webhook, a Slack channel, an SNS
topic) and which events (docs/notifications.md). Delivery never changes a decision."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from acceltrial.api.base import ApiModel, DnsLabel, cel, cel_rules
from acceltrial.api.spec.common import AwsRegion, SecretKeyRef

NotificationEvent = Literal[
    "Started",
    "StepCompleted",
    "Paused",
    "AwaitingApproval",
    "RolledBack",
    "Promoted",
    "Failed",
    "Aborted",
]
"""What a notification tells: the trial started moving (its candidate deployed), a step passed,
it paused (a person, inconclusive data, a route changed by another writer, a quality check that
cannot tell), it waits for approve, or it ended."""
ENDINGS = ("RolledBack", "Promoted", "Failed", "Aborted")
URL_PATTERN = r"^https?://[^\s]+$"
SECRET_READABLE_LABEL = "acceltrial.dev/trial-readable"
"""The label a Secret must carry (value ``"true"``) for a trial to name it: the operator reads
Secrets on a trial author's behalf, so only those their owners opted in."""


class WebhookTarget(ApiModel):
    """An HTTP(S) endpoint that receives each event as a JSON POST."""

    model_config = ConfigDict(
        json_schema_extra=cel_rules(
            cel(
                "has(self.url) != has(self.urlSecretRef)",
                "give exactly one of url or urlSecretRef",
            )
        )
    )

    url: str | None = Field(default=None, max_length=2048, pattern=URL_PATTERN)
    """The endpoint, http or https (an in-cluster receiver is often plain http)."""
    url_secret_ref: SecretKeyRef | None = None
    """A Secret key holding the URL, for one that carries a token (the Secret must be labelled
    acceltrial.dev/trial-readable: "true"); it is never logged."""


class SlackTarget(ApiModel):
    """A Slack incoming webhook."""

    webhook_secret_ref: SecretKeyRef
    """A Secret key holding the incoming webhook's URL (labelled
    acceltrial.dev/trial-readable: "true")."""


class SnsTarget(ApiModel):
    """An Amazon SNS topic, published to with the operator's AWS identity (IRSA)."""

    topic_arn: str = Field(max_length=256, pattern=r"^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[\w-]+$")
    region: AwsRegion | None = None
    """The topic's region; default: the one in its ARN."""


class Notification(ApiModel):
    """One receiver of a trial's events."""

    model_config = ConfigDict(
        json_schema_extra=cel_rules(
            cel(
                "(has(self.webhook) ? 1 : 0) + (has(self.slack) ? 1 : 0) + (has(self.sns) ? 1 : 0)"
                " == 1",
                "give exactly one of webhook, slack or sns",
            )
        )
    )

    name: DnsLabel
    """Unique name, shown in the operator's metrics and logs."""
    webhook: WebhookTarget | None = None
    slack: SlackTarget | None = None
    sns: SnsTarget | None = None
    events: list[NotificationEvent] | None = Field(default=None, min_length=1, max_length=8)
    """The events it hears of; default all: Started, StepCompleted, Paused, AwaitingApproval,
    RolledBack, Promoted, Failed, Aborted."""
