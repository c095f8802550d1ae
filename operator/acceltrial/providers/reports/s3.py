"""The final report in S3 (``spec.report.s3``): ``<prefix><namespace>/<trial>/report.json``,
written with botocore and the default credential chain (IRSA on EKS). ``AWS_ENDPOINT_URL_S3`` points
it elsewhere (an S3-compatible store, or a test server)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from botocore.session import Session

from acceltrial.api.report import Report
from acceltrial.api.spec import S3Destination
from acceltrial.engine.candidate import TrialRef


class ReportUploadError(Exception):
    """The report could not be written to S3; the message says why."""


def report_key(destination: S3Destination, trial: TrialRef) -> str:
    return f"{destination.prefix}{trial.namespace}/{trial.name}/report.json"


def _client(region: str | None) -> Any:
    return Session().create_client("s3", region_name=region)


class S3Reports:
    """Uploads a trial's report to its S3 destination."""

    def __init__(self, client_for: Callable[[str | None], Any] = _client) -> None:
        self._client_for = client_for

    def upload(self, destination: S3Destination, trial: TrialRef, report: Report) -> str:
        """Write the report; return its s3:// URL. ReportUploadError when S3 refuses."""
        body = report.model_dump(mode="json", by_alias=True, exclude_none=True)
        key = report_key(destination, trial)
        try:
            self._client_for(destination.region).put_object(
                Bucket=destination.bucket,
                Key=key,
                Body=json.dumps(body, indent=1, sort_keys=True).encode(),
                ContentType="application/json",
            )
        except (BotoCoreError, ClientError) as error:
            raise ReportUploadError(f"s3://{destination.bucket}/{key}: {error}") from error
        return f"s3://{destination.bucket}/{key}"
