"""The receiver each ``spec.notifications[]`` entry names, its URL read from a Secret where the
spec says so (only a Secret labelled ``acceltrial.dev/trial-readable: "true"``)."""

from __future__ import annotations

from collections.abc import Callable

from acceltrial.api.spec.common import SecretKeyRef
from acceltrial.api.spec.notifications import Notification
from acceltrial.providers.notifications.port import DeliveryError, Receiver
from acceltrial.providers.notifications.sns import SnsTopic
from acceltrial.providers.notifications.webhook import Webhook, slack

SecretReader = Callable[[SecretKeyRef], str]
"""A Secret key's value, or DeliveryError saying why it cannot be read."""


def receiver_for(notification: Notification, secret: SecretReader) -> Receiver:
    """The receiver ``notification`` names; DeliveryError (permanent) when its Secret cannot be
    read."""
    if notification.webhook is not None:
        target = notification.webhook
        url = target.url if target.url is not None else secret(_ref(target.url_secret_ref))
        return Webhook(url)
    if notification.slack is not None:
        return slack(secret(notification.slack.webhook_secret_ref))
    if notification.sns is not None:
        return SnsTopic(notification.sns.topic_arn, notification.sns.region)
    raise DeliveryError(f"notification {notification.name} names no receiver", temporary=False)


def _ref(ref: SecretKeyRef | None) -> SecretKeyRef:
    assert ref is not None  # the API requires url or urlSecretRef
    return ref
