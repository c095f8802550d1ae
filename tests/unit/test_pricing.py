"""Pricing: the bundled catalog, the AWS Price List adapter (botocore Stubber), trial prices."""

from __future__ import annotations

import json
import logging
import re
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from botocore.config import Config
from botocore.session import Session
from botocore.stub import Stubber

from acceltrial.api.spec import CandidateSpec, EconomicsSpec
from acceltrial.engine.economics import Throughput, VariantInput, compare
from acceltrial.providers.pricing.aws import AwsPriceList, pricing_client, product_filters
from acceltrial.providers.pricing.catalog import (
    GPU_RESOURCE,
    NEURON_DEVICE_RESOURCE,
    NEURONCORE_RESOURCE,
    bundled_catalog,
    parse_catalog,
)
from acceltrial.providers.pricing.port import HourlyPrice, PriceUnavailable
from acceltrial.providers.pricing.trial import candidate_accelerators, select_source, trial_prices

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


# --- the AWS Price List API, through botocore's Stubber -------------------------------------

# A get_products page in the API's recorded shape: PriceList holds JSON strings, one product
# each, with on-demand and reserved terms. The price is the reference table's inf2.8xlarge one.
PAGE_FILE = (
    Path(__file__).resolve().parent.parent
    / "fixtures"
    / "pricing"
    / ("get_products_inf2.8xlarge_us-east-1.json")
)


def _page() -> dict[str, Any]:
    page: dict[str, Any] = json.loads(PAGE_FILE.read_text(encoding="utf-8"))
    return page


def _session() -> Session:
    session = Session()
    session.set_credentials("AKIDEXAMPLE", "not-a-secret")
    return session


def _client(endpoint_url: str | None = None) -> Any:
    config = Config(retries={"max_attempts": 1}, connect_timeout=1, read_timeout=1)
    return _session().create_client(
        "pricing", region_name="us-east-1", config=config, endpoint_url=endpoint_url
    )


def _request(instance_type: str = "inf2.8xlarge", region: str = "us-east-1") -> dict[str, Any]:
    return {
        "ServiceCode": "AmazonEC2",
        "Filters": product_filters(instance_type, region),
        "FormatVersion": "aws_v1",
        "MaxResults": 100,
    }


class Unpriced:
    """A fallback that knows no price, to show where an answer came from."""

    def hourly_price(self, instance_type: str, region: str) -> HourlyPrice:
        raise PriceUnavailable(f"no fallback price for {instance_type}")


def test_filters_select_linux_shared_on_demand() -> None:
    assert {f["Field"]: f["Value"] for f in product_filters("inf2.8xlarge", "us-east-1")} == {
        "instanceType": "inf2.8xlarge",
        "regionCode": "us-east-1",
        "operatingSystem": "Linux",
        "tenancy": "Shared",
        "preInstalledSw": "NA",
        "capacitystatus": "Used",
    }
    assert {f["Type"] for f in product_filters("g5.xlarge", "eu-west-1")} == {"TERM_MATCH"}


def test_price_list_page_is_parsed_and_cached(caplog: pytest.LogCaptureFixture) -> None:
    client = _client()
    with Stubber(client) as stub:
        stub.add_response("get_products", _page(), _request())
        source = AwsPriceList(client, Unpriced())
        price = source.hourly_price("inf2.8xlarge", "us-east-1")
        # cached: a second call must not reach the (now empty) stub
        again = source.hourly_price("inf2.8xlarge", "us-east-1")
        stub.assert_no_pending_responses()
    assert price.usd_per_hour == 1.96786  # the on-demand term, not the reserved one
    assert price.as_of == date(2026, 7, 1)
    assert price.source == "AWS Price List API (AmazonEC2 us-east-1, sku 7XQ8HJ3M4PDDKJ2A)"
    assert again is price
    assert not caplog.records


def test_cache_is_per_instance_type_and_region() -> None:
    client = _client()
    with Stubber(client) as stub:
        stub.add_response("get_products", _page(), _request())
        stub.add_response("get_products", _page(), _request(region="us-west-2"))
        source = AwsPriceList(client, Unpriced())
        source.hourly_price("inf2.8xlarge", "us-east-1")
        source.hourly_price("inf2.8xlarge", "us-west-2")
        source.hourly_price("inf2.8xlarge", "us-east-1")
        stub.assert_no_pending_responses()


def test_cache_expires() -> None:
    now = [0.0]
    client = _client()
    with Stubber(client) as stub:
        stub.add_response("get_products", _page(), _request())
        stub.add_response("get_products", _page(), _request())
        source = AwsPriceList(client, Unpriced(), cache_seconds=60, clock=lambda: now[0])
        source.hourly_price("inf2.8xlarge", "us-east-1")
        now[0] = 61
        source.hourly_price("inf2.8xlarge", "us-east-1")
        stub.assert_no_pending_responses()


def test_next_token_is_followed() -> None:
    client = _client()
    with Stubber(client) as stub:
        stub.add_response(
            "get_products",
            {"FormatVersion": "aws_v1", "PriceList": [], "NextToken": "t1"},
            _request(),
        )
        stub.add_response("get_products", _page(), {**_request(), "NextToken": "t1"})
        price = AwsPriceList(client, Unpriced()).hourly_price("inf2.8xlarge", "us-east-1")
        stub.assert_no_pending_responses()
    assert price.usd_per_hour == 1.96786


def _fallback_price(client: Any, caplog: pytest.LogCaptureFixture) -> HourlyPrice:
    with caplog.at_level(logging.WARNING, logger="acceltrial.providers.pricing.aws"):
        return AwsPriceList(client, bundled_catalog()).hourly_price("inf2.8xlarge", "us-east-1")


def _assert_fell_back(price: HourlyPrice, caplog: pytest.LogCaptureFixture, why: str) -> None:
    assert price.usd_per_hour == 1.96786
    assert price.as_of == REFERENCE_DATE
    assert price.source.startswith("catalog: ")
    assert "fallback: AWS Price List API failed" in price.source
    assert why in price.source
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "AWS Price List API failed for inf2.8xlarge in us-east-1" in warnings[0].getMessage()
    assert why in warnings[0].getMessage()


def test_unreachable_aws_falls_back_to_the_catalog(caplog: pytest.LogCaptureFixture) -> None:
    # Nothing listens on the discard port of the loopback address: the connection is refused.
    price = _fallback_price(_client("http://127.0.0.1:9"), caplog)
    _assert_fell_back(price, caplog, "EndpointConnectionError")


@pytest.mark.parametrize("code", ["AccessDeniedException", "ThrottlingException"])
def test_an_aws_error_falls_back_to_the_catalog(
    code: str, caplog: pytest.LogCaptureFixture
) -> None:
    client = _client()
    with Stubber(client) as stub:
        stub.add_client_error("get_products", service_error_code=code, http_status_code=400)
        price = _fallback_price(client, caplog)
    _assert_fell_back(price, caplog, code)


@pytest.mark.parametrize(
    ("page", "why"),
    [
        ({"FormatVersion": "aws_v1", "PriceList": []}, "has no on-demand price"),
        ({"FormatVersion": "aws_v1", "PriceList": ["{not json"]}, "JSONDecodeError"),
        ({"FormatVersion": "aws_v1", "PriceList": ['{"terms": {}}']}, "ValidationError"),
    ],
)
def test_an_unusable_answer_falls_back(
    page: dict[str, Any], why: str, caplog: pytest.LogCaptureFixture
) -> None:
    client = _client()
    with Stubber(client) as stub:
        stub.add_response("get_products", page, _request())
        price = _fallback_price(client, caplog)
    _assert_fell_back(price, caplog, why)


def test_two_different_prices_are_ambiguous(caplog: pytest.LogCaptureFixture) -> None:
    page = _page()
    other = page["PriceList"][0].replace('"1.9678600000"', '"2.5000000000"')
    page["PriceList"].append(other)
    client = _client()
    with Stubber(client) as stub:
        stub.add_response("get_products", page, _request())
        price = _fallback_price(client, caplog)
    _assert_fell_back(price, caplog, "several on-demand prices for inf2.8xlarge: [1.96786, 2.5]")


def test_a_failure_is_retried_only_after_a_while(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    client = _client()
    with Stubber(client) as stub:
        stub.add_client_error("get_products", service_error_code="ThrottlingException")
        stub.add_response("get_products", _page(), _request())
        source = AwsPriceList(client, bundled_catalog(), retry_seconds=900, clock=lambda: now[0])
        first = source.hourly_price("inf2.8xlarge", "us-east-1")
        now[0] = 899
        assert source.hourly_price("inf2.8xlarge", "us-east-1") is first
        now[0] = 901
        fresh = source.hourly_price("inf2.8xlarge", "us-east-1")
        stub.assert_no_pending_responses()
    assert "fallback" in first.source
    assert fresh.source.startswith("AWS Price List API")


def test_no_price_anywhere_says_both_reasons() -> None:
    client = _client()
    with Stubber(client) as stub:
        stub.add_client_error("get_products", service_error_code="AccessDeniedException")
        with pytest.raises(PriceUnavailable) as raised:
            AwsPriceList(client, bundled_catalog()).hourly_price("g5.2xlarge", "us-east-1")
    assert "AccessDeniedException" in str(raised.value)
    assert "no price for g5.2xlarge in us-east-1" in str(raised.value)


def test_the_production_client_retries_once() -> None:
    client: Any = pricing_client(_session())
    assert client.meta.region_name == "us-east-1"
    # botocore reads retries.max_attempts as retries: one retry is two attempts in all
    assert client.meta.config.retries["total_max_attempts"] == 2


# --- a trial's prices: source selection, explicit prices, discount factors ------------------


def _economics(**fields: Any) -> EconomicsSpec:
    return EconomicsSpec.model_validate(fields)


def test_catalog_prices_with_discount_factors() -> None:
    economics = _economics(pricing="catalog", priceFactors={"baseline": 0.72, "candidate": 0.5})
    prices = trial_prices(economics, "g5.xlarge", "inf2.8xlarge", bundled_catalog())
    # 1.006 x 0.72 = 0.72432; 1.96786 x 0.5 = 0.98393
    assert prices.baseline.usd_per_hour == pytest.approx(0.72432)
    assert prices.baseline.on_demand_usd_per_hour == 1.006
    assert prices.candidate.usd_per_hour == pytest.approx(0.98393)
    assert prices.candidate.as_of == REFERENCE_DATE
    assert prices.candidate.source.endswith("x 0.5 (spec.economics.priceFactors)")
    assert prices.candidate.source.startswith("catalog: AWS Price List API")


def test_explicit_prices_take_factors_too() -> None:
    economics = _economics(
        pricing="explicit",
        prices={"baselinePerHour": 1.5, "candidatePerHour": 2.0},
        priceFactors={"candidate": 0.8},
    )
    prices = trial_prices(economics, "g5.2xlarge", "inf2.8xlarge", None)
    assert (prices.baseline.usd_per_hour, prices.baseline.source) == (1.5, "spec.economics.prices")
    assert prices.candidate.usd_per_hour == pytest.approx(1.6)
    assert prices.candidate.on_demand_usd_per_hour == 2.0
    assert prices.candidate.source == "spec.economics.prices, x 0.8 (spec.economics.priceFactors)"


def test_an_unknown_catalog_price_stays_unknown_with_its_reason() -> None:
    prices = trial_prices(_economics(), "g5.2xlarge", "inf2.8xlarge", bundled_catalog())
    assert prices.baseline.usd_per_hour is None
    assert "no price for g5.2xlarge in us-east-1" in prices.baseline.source
    assert prices.candidate.usd_per_hour == 1.96786


def test_region_is_passed_to_the_source() -> None:
    prices = trial_prices(
        _economics(region="eu-west-1"), "g5.xlarge", "inf2.8xlarge", bundled_catalog()
    )
    assert prices.candidate.usd_per_hour is None
    assert "no eu-west-1 price for inf2.8xlarge" in prices.candidate.source


def test_select_source_builds_the_aws_client_only_when_asked() -> None:
    built: list[str] = []

    def aws() -> AwsPriceList:
        built.append("aws")
        return AwsPriceList(_client(), bundled_catalog())

    catalog = bundled_catalog()
    assert select_source(_economics(pricing="catalog"), catalog, aws) is catalog
    explicit = _economics(pricing="explicit", prices={"baselinePerHour": 1, "candidatePerHour": 1})
    assert select_source(explicit, catalog, aws) is None
    assert built == []
    assert isinstance(select_source(_economics(pricing="aws"), catalog, aws), AwsPriceList)
    assert built == ["aws"]


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"instanceType": "inf2.8xlarge", "neuronCores": 2}, (2, 2)),
        ({"instanceType": "inf2.8xlarge", "neuronCores": 1}, (1, 2)),
        ({"instanceType": "inf2.48xlarge", "neuronDevices": 4}, (4, 12)),
        ({"instanceType": "trn1.32xlarge", "neuronCores": 8}, (8, 32)),
        ({"instanceType": "inf2.4xlarge", "neuronCores": 2}, (2, None)),  # not in the catalog
    ],
)
def test_candidate_accelerators(
    fields: dict[str, Any], expected: tuple[int | None, int | None]
) -> None:
    candidate = CandidateSpec.model_validate({"image": "registry/model:neuron", **fields})
    assert candidate_accelerators(candidate, bundled_catalog()) == expected


def test_catalog_prices_feed_the_cost_model() -> None:
    economics = _economics(priceFactors={"candidate": 0.5})
    catalog = bundled_catalog()
    prices = trial_prices(economics, "g5.xlarge", "inf2.8xlarge", catalog)
    candidate = CandidateSpec.model_validate(
        {"image": "registry/model:neuron", "instanceType": "inf2.8xlarge", "neuronCores": 1}
    )
    per_pod, per_instance = candidate_accelerators(candidate, catalog)
    result = compare(
        VariantInput(4, prices.baseline.usd_per_hour, 1, 1, Throughput(9, 1800), 0.6),
        VariantInput(
            2, prices.candidate.usd_per_hour, per_pod, per_instance, Throughput(1, 200), 0.1
        ),
        economics,
    )
    # baseline 4 x 1.006 = $4.024/h; candidate 2 pods x half an inf2.8xlarge x 0.5 = $0.983930/h
    assert result.baseline.cost_per_hour == pytest.approx(4.024)
    assert result.candidate.cost_per_hour == pytest.approx(0.98393)
    # candidate capacity (200 / 2) / 0.1 = 1000 tok/s; ceil(2000 / 700) = 3 half instances
    assert result.candidate.projected_replicas == 3
