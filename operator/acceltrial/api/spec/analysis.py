"""How each step is judged: ``spec.analysis`` (interval, preset, criteria, the limits that fail
or pause a step, fixed or sequential mode) and its metrics source, the Prometheus that scrapes
both variants (address, authentication, TLS)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field

from acceltrial.api.base import ApiModel, Pattern, cel, cel_rules
from acceltrial.api.durations import Duration
from acceltrial.api.spec.common import AwsRegion, ObjectRef, SecretKeyRef
from acceltrial.api.spec.criteria import Criterion

MAX_CRITERIA = 32

HttpUrl = Annotated[
    str,
    Pattern(
        r"^https?://[^\s/]+(/\S*)?$",
        "an http:// or https:// address such as http://prometheus:9090",
        2048,
    ),
]

PresetName = Literal["vllm", "tgi", "custom"]


class SigV4Auth(ApiModel):
    """AWS SigV4 signing, as Amazon Managed Service for Prometheus requires, with the operator's
    own credentials (its IRSA role on EKS)."""

    region: AwsRegion
    """Region of the workspace."""
    service: str = Field(default="aps", min_length=1, max_length=32)
    """Service name to sign for."""


class PrometheusAuth(ApiModel):
    """How to authenticate to Prometheus: at most one method."""

    model_config = ConfigDict(
        json_schema_extra=cel_rules(
            cel(
                "[has(self.bearerTokenSecretRef), has(self.basicAuthSecretRef), has(self.sigv4)]"
                ".filter(x, x).size() <= 1",
                "choose one of bearerTokenSecretRef, basicAuthSecretRef or sigv4",
            ),
        )
    )

    bearer_token_secret_ref: SecretKeyRef | None = None
    """A Secret key holding a bearer token. The Secret must be labelled
    ``acceltrial.dev/trial-readable: "true"``."""
    basic_auth_secret_ref: ObjectRef | None = None
    """A Secret with the keys username and password, labelled
    ``acceltrial.dev/trial-readable: "true"``."""
    sigv4: SigV4Auth | None = None
    """Sign requests with AWS SigV4 (Amazon Managed Service for Prometheus)."""


class TlsConfig(ApiModel):
    """TLS settings for an https:// Prometheus."""

    ca_secret_ref: SecretKeyRef | None = None
    """A Secret key holding the PEM CA bundle that signs the server's certificate. The Secret
    must be labelled ``acceltrial.dev/trial-readable: "true"``."""
    insecure_skip_verify: bool = False
    """Skip certificate verification (never in production)."""


class PrometheusSpec(ApiModel):
    """Where the metrics come from."""

    address: HttpUrl
    """Base URL of the Prometheus HTTP API, e.g. http://prometheus.monitoring:9090."""
    timeout: Duration = "10s"
    """Timeout of one query."""
    auth: PrometheusAuth | None = None
    """Authentication, if Prometheus needs it."""
    tls: TlsConfig | None = None
    """TLS settings."""


class AnalysisSpec(ApiModel):
    """How each step is judged."""

    model_config = ConfigDict(
        json_schema_extra=cel_rules(
            cel(
                "self.preset != 'custom' || self.criteria.all(c, has(c.query))",
                "with preset custom every criterion needs its own query",
            ),
            cel(
                "self.preset != 'custom' || "
                "self.criteria.all(c, !has(c.minRequests) || has(c.requestsQuery))",
                "with preset custom a criterion with minRequests needs a requestsQuery",
            ),
        )
    )

    interval: Duration = "1m"
    """Time between two measurements, and the window each measurement covers."""
    source: Literal["prometheus"] = "prometheus"
    """Where the metrics come from; its settings are the field of the same name. Prometheus
    (any server with its HTTP API: Prometheus, Amazon Managed Service for Prometheus, Thanos,
    Mimir) is the one source today."""
    prometheus: PrometheusSpec
    """The Prometheus that scrapes both variants."""
    preset: PresetName = "vllm"
    """Default queries for the model server: vllm, tgi, or custom (every criterion has a query)."""
    criteria: list[Criterion] = Field(
        min_length=1,
        max_length=MAX_CRITERIA,
        json_schema_extra=cel_rules(
            cel(
                "self.all(c, self.exists_one(d, d.name == c.name))",
                "criterion names must be unique",
            )
        ),
    )
    """The success criteria; every one must pass for a step to advance."""
    failure_limit: int = Field(default=0, ge=0, le=1000)
    """Failed measurements tolerated per step; one more rolls the trial back."""
    inconclusive_limit: int = Field(default=3, ge=0, le=1000)
    """Inconclusive measurements tolerated per step; one more triggers onInconclusive."""
    consecutive_error_limit: int = Field(default=4, ge=0, le=1000)
    """Consecutive measurement errors (Prometheus unreachable, bad query) tolerated; one more
    rolls the trial back."""
    on_inconclusive: Literal["pause", "rollback"] = "pause"
    """What happens past inconclusiveLimit: pause for a person to decide, or roll back."""
    mode: Literal["fixed", "sequential"] = "fixed"
    """fixed: every criterion judges each measurement's window on its own. sequential: criteria
    on the preset's latency or error_ratio that fail when the candidate is worse are judged by an
    always-valid sequential test of the counts behind them over the step so far, which fails as
    soon as the evidence is clear and keeps false failures under alpha (docs/analysis.md)."""
    alpha: float = Field(default=0.01, gt=0, le=0.2)
    """sequential mode: the highest chance that a criterion fails a step for a candidate within
    its tolerance, however many measurements the step takes."""
