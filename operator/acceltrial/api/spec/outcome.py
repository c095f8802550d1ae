"""What happens once the steps pass: ``spec.promotion`` (how the candidate becomes the primary)
and ``spec.report`` (where the decision report goes besides its ConfigMap)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from acceltrial.api.base import ApiModel, Pattern
from acceltrial.api.durations import Duration
from acceltrial.api.spec.common import AwsRegion


class PromotionSpec(ApiModel):
    """How the candidate becomes the primary after the last step."""

    mode: Literal["automatic", "manual"] = "automatic"
    """automatic, or manual: wait for the approve action after the last step."""
    bake_time: Duration = "10m"
    """How long 100% of traffic stays on the candidate, with analysis running and the baseline
    warm, before the baseline is scaled to zero."""
    max_replicas: int | None = Field(default=None, ge=1, le=1000)
    """Upper bound on the candidate's replicas at promotion. Before all traffic moves, the
    candidate is scaled to the replicas production needs (projected from its measured capacity
    per replica and economics.targetUtilization) and at least candidate.replicas; this caps it."""


class S3Destination(ApiModel):
    """An S3 location for the final report (written with the operator's IRSA role, which needs
    s3:PutObject on it)."""

    bucket: Annotated[str, Pattern(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$",
                                   "an S3 bucket name (3-63 lowercase letters, digits, . and -)",
                                   63)]  # fmt: skip
    """Bucket name."""
    prefix: str = Field(default="", max_length=512)
    """Key prefix; the report is written to <prefix><namespace>/<trial>/report.json."""
    region: AwsRegion | None = None
    """The bucket's region; defaults to the operator's."""


class ReportSpec(ApiModel):
    """Where the decision report goes besides the <trial>-report ConfigMap."""

    s3: S3Destination | None = None
    """Upload the report to S3 when the trial ends."""
