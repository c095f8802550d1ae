"""A trial's prices: which source ``spec.economics.pricing`` picks, explicit prices, discounts.

``priceFactors`` apply on top of every source, explicit prices included: the factor says what the
account pays (Savings Plans, reserved, spot) against the price given. A price no source has stays
unknown (None, with the reason), so the cost model leaves the figures it would feed empty.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date
from typing import Any

from acceltrial.api.spec import CandidateSpec, EconomicsSpec, TrialSpec
from acceltrial.api.training import TrainingEconomicsSpec
from acceltrial.engine.costing import VariantResources
from acceltrial.engine.metrics import Variant
from acceltrial.providers.pricing.catalog import (
    GPU_RESOURCE,
    NEURON_DEVICE_RESOURCE,
    NEURONCORE_RESOURCE,
    Catalog,
)
from acceltrial.providers.pricing.port import PriceSource, PriceUnavailable

EXPLICIT_SOURCE = "spec.economics.prices"


@dataclass(frozen=True)
class VariantPrice:
    """The price of one instance hour of a variant, as the cost model uses it."""

    usd_per_hour: float | None
    """The price after the discount factor; None when no source has one."""
    on_demand_usd_per_hour: float | None
    factor: float
    source: str
    """Where the price comes from, or why it is unknown."""
    as_of: date | None


@dataclass(frozen=True)
class TrialPrices:
    """Both variants' prices."""

    baseline: VariantPrice
    candidate: VariantPrice


def select_source(
    economics: EconomicsSpec, catalog: Catalog, aws: Callable[[], PriceSource]
) -> PriceSource | None:
    """The source ``pricing`` names; None for explicit prices. ``aws`` is built only if asked."""
    if economics.pricing == "aws":
        return aws()
    if economics.pricing == "catalog":
        return catalog
    return None


def _priced(source: PriceSource, instance_type: str, region: str, factor: float) -> VariantPrice:
    try:
        price = source.hourly_price(instance_type, region)
    except PriceUnavailable as error:
        return VariantPrice(None, None, factor, str(error), None)
    return VariantPrice(
        price.usd_per_hour * factor,
        price.usd_per_hour,
        factor,
        _with_factor(price.source, factor),
        price.as_of,
    )


def _explicit(usd: float, factor: float) -> VariantPrice:
    return VariantPrice(usd * factor, usd, factor, _with_factor(EXPLICIT_SOURCE, factor), None)


def _with_factor(source: str, factor: float) -> str:
    return source if factor == 1 else f"{source}, x {factor:g} (spec.economics.priceFactors)"


def trial_prices(
    economics: EconomicsSpec | TrainingEconomicsSpec,
    baseline_instance: str,
    candidate_instance: str,
    source: PriceSource | None,
) -> TrialPrices:
    """Both variants' prices in ``economics.region``, discounts applied."""
    factors = economics.price_factors
    base_factor = factors.baseline if factors else 1.0
    cand_factor = factors.candidate if factors else 1.0
    if economics.pricing == "explicit" or source is None:
        prices = economics.prices
        if prices is None:  # admission refuses this; still, say so rather than crash
            unknown = "pricing: explicit without spec.economics.prices"
            return TrialPrices(
                VariantPrice(None, None, base_factor, unknown, None),
                VariantPrice(None, None, cand_factor, unknown, None),
            )
        return TrialPrices(
            _explicit(prices.baseline_per_hour, base_factor),
            _explicit(prices.candidate_per_hour, cand_factor),
        )
    return TrialPrices(
        _priced(source, baseline_instance, economics.region, base_factor),
        _priced(source, candidate_instance, economics.region, cand_factor),
    )


def candidate_accelerators(
    candidate: CandidateSpec, catalog: Catalog
) -> tuple[int | None, int | None]:
    """NeuronCores (or devices) one candidate pod requests, and how many one instance has."""
    per_pod: int | None = candidate.neuron_cores
    resource = NEURONCORE_RESOURCE
    if per_pod is None:
        per_pod, resource = candidate.neuron_devices, NEURON_DEVICE_RESOURCE
    spec = catalog.spec(candidate.instance_type)
    return per_pod, None if spec is None else spec.per_instance(resource)


def baseline_accelerators(
    deployment: Mapping[str, Any], container: str | None, instance_type: str, catalog: Catalog
) -> tuple[int | None, int | None]:
    """GPUs (or Neuron resources) one baseline pod takes, and how many one instance has.

    Read from the model server container's limits (requests when no limit is set), as the
    device plugins allocate whole units.
    """
    spec = catalog.spec(instance_type)
    resources = _container(deployment, container).get("resources") or {}
    wanted = {**(resources.get("requests") or {}), **(resources.get("limits") or {})}
    for resource in (GPU_RESOURCE, NEURONCORE_RESOURCE, NEURON_DEVICE_RESOURCE):
        amount = wanted.get(resource)
        if amount is not None and str(amount).isdigit():
            return int(amount), None if spec is None else spec.per_instance(resource)
    return None, None


def _container(deployment: Mapping[str, Any], name: str | None) -> Mapping[str, Any]:
    pod = deployment.get("spec", {}).get("template", {}).get("spec", {})
    containers: list[Mapping[str, Any]] = pod.get("containers") or [{}]
    return next((c for c in containers if c.get("name") == name), containers[0])


def variant_resources(
    spec: TrialSpec, baseline: Mapping[str, Any], catalog: Catalog, source: PriceSource | None
) -> dict[Variant, VariantResources]:
    """Prices and accelerator shares of both variants, as the cost model takes them."""
    prices = trial_prices(
        spec.economics, spec.baseline.instance_type, spec.candidate.instance_type, source
    )
    base_pod, base_instance = baseline_accelerators(
        baseline, spec.baseline.container, spec.baseline.instance_type, catalog
    )
    cand_pod, cand_instance = candidate_accelerators(spec.candidate, catalog)
    return {
        "baseline": VariantResources(
            prices.baseline.usd_per_hour, prices.baseline.source, base_pod, base_instance
        ),
        "candidate": VariantResources(
            prices.candidate.usd_per_hour, prices.candidate.source, cand_pod, cand_instance
        ),
    }
