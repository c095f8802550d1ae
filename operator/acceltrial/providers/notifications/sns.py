"""Amazon SNS: each event's JSON published to a topic with the operator's AWS identity (IRSA:
``sns:Publish`` on the topic), the event as the subject and as a message attribute, so
subscribers can filter on it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from botocore.session import Session

from acceltrial.providers.notifications.port import DeliveryError

PERMANENT_CODES = frozenset({"AuthorizationError", "NotFound", "InvalidParameter"})


def region_of(topic_arn: str) -> str:
    """The region an SNS topic ARN names (arn:aws:sns:REGION:ACCOUNT:NAME)."""
    return topic_arn.split(":")[3]


@dataclass
class SnsTopic:
    topic_arn: str
    region: str | None = None
    kind: str = "sns"

    def deliver(self, body: Mapping[str, Any]) -> None:
        # botocore's default chain: IRSA on EKS; AWS_ENDPOINT_URL_SNS points elsewhere.
        region = self.region or region_of(self.topic_arn)
        client: Any = Session().create_client("sns", region_name=region)
        subject = f"acceltrial {body.get('event')}: {body.get('namespace')}/{body.get('trial')}"
        try:
            client.publish(
                TopicArn=self.topic_arn,
                Message=json.dumps(dict(body)),
                Subject=subject[:100],
                MessageAttributes={
                    "event": {"DataType": "String", "StringValue": str(body.get("event"))}
                },
            )
        except ClientError as error:
            code = str(error.response.get("Error", {}).get("Code", ""))
            raise DeliveryError(f"SNS {code}: {error}", code not in PERMANENT_CODES) from None
        except BotoCoreError as error:
            raise DeliveryError(f"SNS: {error}") from None
