"""The bundled instance catalog: specs and on-demand prices, each price with its source and date.

The data lives in ``catalog.yaml`` beside this module (package data) and is validated with pydantic
when first loaded. The catalog is also a :class:`~acceltrial.providers.pricing.port.PriceSource`;
a price the catalog marks unknown raises :class:`PriceUnavailable` rather than returning a guess.
"""

from __future__ import annotations

from datetime import date
from functools import cache
from importlib import resources
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from acceltrial.providers.pricing.port import HourlyPrice, PriceUnavailable

CATALOG_FILE = "catalog.yaml"
NEURONCORE_RESOURCE = "aws.amazon.com/neuroncore"
NEURON_DEVICE_RESOURCE = "aws.amazon.com/neuron"
GPU_RESOURCE = "nvidia.com/gpu"


class _CatalogModel(BaseModel):
    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True
    )


class Accelerator(_CatalogModel):
    """The accelerators of one instance."""

    name: str
    kind: Literal["neuron", "gpu"]
    devices: int = Field(ge=1)
    neuron_cores: int | None = Field(default=None, ge=1)


class AcceleratorMemory(_CatalogModel):
    """Accelerator memory of the whole instance, in the unit its source uses."""

    total: float = Field(gt=0)
    unit: Literal["GiB", "GB"]


class CatalogPrice(_CatalogModel):
    """One on-demand price; ``usd_per_hour`` is None when the sources give none."""

    region: str
    usd_per_hour: float | None = Field(gt=0)
    source: str = Field(min_length=1)
    as_of: date | None


class InstanceSpec(_CatalogModel):
    """What one instance type offers, and what it costs where known."""

    instance_type: str
    accelerator: Accelerator
    accelerator_memory: AcceleratorMemory
    vcpu: int = Field(ge=1)
    memory_gib: float = Field(gt=0, alias="memoryGiB")
    spec_source: str = Field(min_length=1)
    prices: tuple[CatalogPrice, ...] = ()

    def per_instance(self, resource: str) -> int | None:
        """How many of a pod's extended resource one instance has, or None if it has none."""
        kind = self.accelerator.kind
        if resource == NEURONCORE_RESOURCE and kind == "neuron":
            return self.accelerator.neuron_cores
        if (resource == NEURON_DEVICE_RESOURCE and kind == "neuron") or (
            resource == GPU_RESOURCE and kind == "gpu"
        ):
            return self.accelerator.devices
        return None


class CatalogFile(_CatalogModel):
    """The shape of ``catalog.yaml``."""

    anchors: dict[str, Any] = {}
    instances: tuple[InstanceSpec, ...]


class Catalog:
    """Look-ups in the bundled catalog."""

    def __init__(self, data: CatalogFile) -> None:
        self._specs = {spec.instance_type: spec for spec in data.instances}

    def spec(self, instance_type: str) -> InstanceSpec | None:
        """The spec of an instance type, or None if the catalog lacks it."""
        return self._specs.get(instance_type)

    def instance_types(self) -> list[str]:
        """Every instance type in the catalog, sorted."""
        return sorted(self._specs)

    def hourly_price(self, instance_type: str, region: str) -> HourlyPrice:
        """The catalog's on-demand price; raises PriceUnavailable when it is unknown."""
        spec = self._specs.get(instance_type)
        if spec is None:
            raise PriceUnavailable(f"{instance_type} is not in the bundled catalog")
        for price in spec.prices:
            if price.region != region:
                continue
            if price.usd_per_hour is None:
                raise PriceUnavailable(
                    f"the bundled catalog has no price for {instance_type} in {region}: "
                    f"{price.source}"
                )
            return HourlyPrice(
                instance_type, region, price.usd_per_hour, f"catalog: {price.source}", price.as_of
            )
        raise PriceUnavailable(f"the bundled catalog has no {region} price for {instance_type}")


def parse_catalog(text: str) -> Catalog:
    """A catalog from YAML text in the shape of ``catalog.yaml``."""
    return Catalog(CatalogFile.model_validate(yaml.safe_load(text)))


@cache
def bundled_catalog() -> Catalog:
    """The catalog shipped with acceltrial, loaded and validated once."""
    text = resources.files(__package__).joinpath(CATALOG_FILE).read_text(encoding="utf-8")
    return parse_catalog(text)
