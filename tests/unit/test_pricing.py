"""Pricing: the bundled catalog, the AWS Price List adapter (botocore Stubber), trial prices."""

from __future__ import annotations

import re
from datetime import date

import pytest

from acceltrial.providers.pricing.catalog import (
    GPU_RESOURCE,
    NEURON_DEVICE_RESOURCE,
    NEURONCORE_RESOURCE,
    bundled_catalog,
    parse_catalog,
)
from acceltrial.providers.pricing.port import PriceUnavailable

REFERENCE_DATE = date(2026, 7, 20)

# us-east-1 on-demand prices of the project's reference table (AWS Pricing API via Karpenter's
# generated price file, 2026-07-20); the catalog must ship exactly these.
REFERENCE_PRICES = {
    "inf1.xlarge": 0.228,
    "inf2.xlarge": 0.7582,
    "inf2.8xlarge": 1.96786,
    "inf2.24xlarge": 6.49063,
    "inf2.48xlarge": 12.98127,
    "trn1.2xlarge": 1.34375,
    "trn1.32xlarge": 21.50,
    "trn1n.32xlarge": 24.78,
    "g5.xlarge": 1.006,
    "g5.12xlarge": 5.672,
    "g5.48xlarge": 16.288,
    "g6.xlarge": 0.8048,
    "g6e.xlarge": 1.861,
    "p4d.24xlarge": 21.957642,
    "p5.48xlarge": 55.04,
}


@pytest.mark.parametrize(("instance_type", "usd"), sorted(REFERENCE_PRICES.items()))
def test_catalog_prices_carry_source_and_date(instance_type: str, usd: float) -> None:
    price = bundled_catalog().hourly_price(instance_type, "us-east-1")
    assert price.usd_per_hour == usd
    assert price.as_of == REFERENCE_DATE
    assert price.source.startswith("catalog: AWS Price List API")
    assert "zz_generated.pricing_aws.go" in price.source


def test_catalog_has_every_family_the_trials_use() -> None:
    families = {t.split(".")[0] for t in bundled_catalog().instance_types()}
    assert {"inf1", "inf2", "trn1", "trn1n", "trn2", "g5", "g6", "g6e", "p4d", "p5"} <= families


@pytest.mark.parametrize("instance_type", ["g5.2xlarge", "trn2.48xlarge"])
def test_a_price_the_sources_lack_is_unknown_not_guessed(instance_type: str) -> None:
    with pytest.raises(
        PriceUnavailable, match=re.escape(f"no price for {instance_type} in us-east-1")
    ):
        bundled_catalog().hourly_price(instance_type, "us-east-1")


def test_g5_2xlarge_spec_is_there_with_its_source() -> None:
    spec = bundled_catalog().spec("g5.2xlarge")
    assert spec is not None
    assert (spec.accelerator.name, spec.accelerator.devices) == ("NVIDIA A10G", 1)
    assert (spec.accelerator_memory.total, spec.accelerator_memory.unit) == (24, "GB")
    assert (spec.vcpu, spec.memory_gib) == (8, 32)
    assert "G5" in spec.spec_source


def test_unknown_type_and_region_are_refused() -> None:
    catalog = bundled_catalog()
    with pytest.raises(PriceUnavailable, match="not in the bundled catalog"):
        catalog.hourly_price("m7i.large", "us-east-1")
    with pytest.raises(PriceUnavailable, match=re.escape("no eu-west-1 price for inf2.8xlarge")):
        catalog.hourly_price("inf2.8xlarge", "eu-west-1")
    assert catalog.spec("m7i.large") is None


@pytest.mark.parametrize(
    ("instance_type", "resource", "count"),
    [
        ("inf2.8xlarge", NEURONCORE_RESOURCE, 2),
        ("inf2.48xlarge", NEURONCORE_RESOURCE, 24),
        ("inf2.48xlarge", NEURON_DEVICE_RESOURCE, 12),
        ("inf1.xlarge", NEURONCORE_RESOURCE, 4),
        ("trn1.32xlarge", NEURONCORE_RESOURCE, 32),
        ("trn2.48xlarge", NEURONCORE_RESOURCE, 64),
        ("g5.xlarge", GPU_RESOURCE, 1),
        ("g5.12xlarge", GPU_RESOURCE, 4),
        ("p5.48xlarge", GPU_RESOURCE, 8),
    ],
)
def test_accelerators_per_instance(instance_type: str, resource: str, count: int) -> None:
    spec = bundled_catalog().spec(instance_type)
    assert spec is not None
    assert spec.per_instance(resource) == count


def test_a_resource_of_the_other_kind_has_no_count() -> None:
    inf2 = bundled_catalog().spec("inf2.8xlarge")
    g5 = bundled_catalog().spec("g5.xlarge")
    assert inf2 is not None
    assert g5 is not None
    assert inf2.per_instance(GPU_RESOURCE) is None
    assert g5.per_instance(NEURONCORE_RESOURCE) is None


def test_catalog_file_is_validated() -> None:
    bad = """
instances:
  - instanceType: inf2.8xlarge
    accelerator: {name: Inferentia2, kind: neuron, devices: 1, neuronCores: 2}
    acceleratorMemory: {total: 32, unit: GiB}
    vcpu: 32
    memoryGiB: 128
    specSource: x
    prices: [{region: us-east-1, usdPerHour: -1, source: x, asOf: 2026-07-20}]
"""
    with pytest.raises(ValueError, match="greater than 0"):
        parse_catalog(bad)
