"""Webhooks over HTTP(S): the event's JSON POSTed as it is (``webhook``), or a Slack incoming
webhook's ``{"text": ...}`` with the same facts in words (``slack``). The URL may carry a token
(a Slack webhook's path is one): it never appears in an error or a log line, only its scheme and
host do."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from acceltrial.engine.notifications import slack_text
from acceltrial.providers.notifications.port import DeliveryError

TIMEOUT_SECONDS = 5.0
"""Per request: a receiver that hangs holds one delivery thread this long, never a tick."""


def as_json(body: Mapping[str, Any]) -> dict[str, Any]:
    return dict(body)


def as_slack_message(body: Mapping[str, Any]) -> dict[str, Any]:
    return {"text": slack_text(dict(body))}


@dataclass
class Webhook:
    """POSTs each event to ``url``: its JSON (``webhook``), or a Slack message (``slack``)."""

    url: str
    kind: str = "webhook"
    render: Callable[[Mapping[str, Any]], dict[str, Any]] = as_json
    timeout: float = TIMEOUT_SECONDS

    def deliver(self, body: Mapping[str, Any]) -> None:
        post(self.url, self.render(body), self.timeout)


def slack(url: str) -> Webhook:
    """A Slack incoming webhook: the same facts as a message."""
    return Webhook(url, "slack", as_slack_message)


def where(url: str) -> str:
    """The URL as an error may show it: scheme and host only."""
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or '?'}"


def post(url: str, body: dict[str, Any], timeout: float) -> None:
    data = json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            reply.read()
    except urllib.error.HTTPError as error:
        temporary = error.code >= 500 or error.code in (408, 429)
        raise DeliveryError(f"{where(url)} answered {error.code}", temporary) from None
    except (TimeoutError, urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", None) or type(error).__name__
        raise DeliveryError(f"{where(url)} did not answer: {reason}") from None
    except ValueError:
        raise DeliveryError(f"{where(url)} is not a usable URL", temporary=False) from None
