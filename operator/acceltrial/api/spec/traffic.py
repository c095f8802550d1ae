"""How traffic moves: ``spec.traffic`` (the router that splits it between the variants and its
settings) and the ``spec.steps`` that set the candidate's share (or mirrored copies) and how long
each is judged."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from acceltrial.api.base import ApiModel, ObjectName, cel, cel_rules
from acceltrial.api.durations import Duration
from acceltrial.api.spec.common import NamespacedRef

MAX_STEPS = 20


class GatewayApiRouting(ApiModel):
    """Traffic split through the weights of a Gateway API HTTPRoute rule."""

    http_route_ref: NamespacedRef
    """The HTTPRoute whose rule sends traffic to the baseline Service."""
    rule_index: int | None = Field(default=None, ge=0, le=63)
    """Split only this rule (index in spec.rules); by default every rule that references the
    baseline Service is split alike."""
    rule_names: list[ObjectName] | None = Field(default=None, min_length=1, max_length=16)
    """Split only the rules with these names (spec.rules[].name); by default every rule that
    references the baseline Service is split alike."""
    port: int | None = Field(default=None, ge=1, le=65535)
    """Port of the candidate backendRef; defaults to the baseline backendRef's port."""


class ReplicaRouting(ApiModel):
    """Traffic split by pod count: candidate pods join the baseline Service's endpoints."""


class TrafficSpec(ApiModel):
    """How traffic moves from the baseline to the candidate."""

    model_config = ConfigDict(
        json_schema_extra=cel_rules(
            cel(
                "self.router != 'gatewayapi' || has(self.gatewayapi)",
                "router gatewayapi needs gatewayapi.httpRouteRef",
            ),
            cel(
                "self.router == 'gatewayapi' || !has(self.gatewayapi)",
                "gatewayapi settings are only used with router gatewayapi",
            ),
        )
    )

    router: Literal["gatewayapi", "replicas"]
    """gatewayapi: weights on an HTTPRoute rule; replicas: share by pod count behind the
    baseline Service."""
    gatewayapi: GatewayApiRouting | None = None
    """Settings of the gatewayapi router."""
    replicas: ReplicaRouting | None = None
    """Settings of the replicas router (none yet)."""


class Step(ApiModel):
    """One step: the candidate's share of traffic (or of mirrored copies) and how long it is
    judged at that share."""

    model_config = ConfigDict(
        json_schema_extra=cel_rules(
            cel(
                "has(self.weight) != has(self.mirror)",
                "give a step either weight (users served by the candidate) or mirror (copies "
                "of requests, answers discarded), not both",
            ),
        )
    )

    weight: int | None = Field(default=None, ge=1, le=100)
    """Percentage of traffic sent to the candidate during this step (1..100)."""
    mirror: int | None = Field(default=None, ge=1, le=100)
    """A shadow step: percentage of the requests copied to the candidate (Gateway API
    RequestMirror filter) while the baseline answers every user; the candidate's answers are
    discarded. Judged like any step; mirror steps come before the weighted ones."""
    duration: Duration
    """How long the step lasts; analysis runs every analysis.interval during it."""

    @property
    def share(self) -> int:
        """The users' share the candidate serves at this step (0 for a mirror step)."""
        return self.weight or 0

    @property
    def mirrored(self) -> int:
        """The percentage of requests copied to the candidate at this step (0 if none)."""
        return self.mirror or 0
