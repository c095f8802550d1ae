"""How cost per useful result is computed: ``spec.economics`` (where prices come from, discounts,
target utilization and the one-off migration cost)."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from acceltrial.api.base import ApiModel, cel, cel_rules
from acceltrial.api.spec.common import AwsRegion


class ExplicitPrices(ApiModel):
    """Prices you give, per instance hour, instead of a catalog."""

    baseline_per_hour: float = Field(gt=0)
    """Price of one baseline instance hour, in USD."""
    candidate_per_hour: float = Field(gt=0)
    """Price of one candidate instance hour, in USD."""


class PriceFactors(ApiModel):
    """Multipliers on the on-demand price for discounts (Savings Plans, reserved, spot)."""

    baseline: float = Field(default=1.0, gt=0, le=1)
    """Factor on the baseline's price, e.g. 0.72."""
    candidate: float = Field(default=1.0, gt=0, le=1)
    """Factor on the candidate's price."""


class MigrationCost(ApiModel):
    """One-off cost of moving the workload, for the payback time."""

    engineer_hours: float = Field(default=0, ge=0)
    """Engineering hours the migration takes."""
    hourly_rate: float = Field(default=0, ge=0)
    """Cost of one engineering hour, in USD."""
    other: float = Field(default=0, ge=0)
    """Other one-off costs, in USD."""


EXPLICIT_PRICES_RULE = cel(
    "self.pricing != 'explicit' || has(self.prices)",
    "pricing explicit needs prices.baselinePerHour and prices.candidatePerHour",
)


class EconomicsSpec(ApiModel):
    """How cost per useful result is computed."""

    model_config = ConfigDict(json_schema_extra=cel_rules(EXPLICIT_PRICES_RULE))

    pricing: Literal["catalog", "aws", "explicit"] = "catalog"
    """catalog: prices bundled with acceltrial (with source and date); aws: the AWS Price List
    API; explicit: the prices below."""
    region: AwsRegion = "us-east-1"
    """Region whose prices apply."""
    prices: ExplicitPrices | None = None
    """Prices for pricing: explicit."""
    price_factors: PriceFactors | None = None
    """Discount factors on the prices."""
    target_utilization: float = Field(default=0.7, gt=0, le=1)
    """Utilization each variant is projected to at its production share."""
    migration_cost: MigrationCost | None = None
    """One-off cost of the migration, for the payback time."""
