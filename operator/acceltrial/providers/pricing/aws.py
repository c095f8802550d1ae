"""Prices from the AWS Price List API (``pricing.get_products``), cached, with a catalog fallback.

The response is parsed in its real shape: ``PriceList`` is a list of JSON *strings*, one product
each, whose on-demand price is ``terms.OnDemand.*.priceDimensions.*.pricePerUnit.USD``. When AWS
cannot be reached, refuses, or answers with nothing usable, the fallback source (the bundled
catalog) answers instead, with a logged warning, and the returned price's ``source`` says so.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from datetime import date
from typing import Any, Protocol, cast

from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from botocore.session import Session
from pydantic import BaseModel, ConfigDict, ValidationError

from acceltrial.providers.pricing.port import HourlyPrice, PriceSource, PriceUnavailable

LOG = logging.getLogger(__name__)

# The Price List API is served from a few regions only; it prices every region from there.
PRICING_ENDPOINT_REGION = "us-east-1"
SERVICE_CODE = "AmazonEC2"
MAX_PAGES = 5  # the filters select one product; more pages mean the filters are wrong
CACHE_SECONDS = 24 * 3600.0  # on-demand prices change rarely
RETRY_SECONDS = 15 * 60.0  # after a failure, the fallback answers this long before AWS is tried


class PricingClient(Protocol):
    """The one call of botocore's ``pricing`` client used here."""

    def get_products(self, **kwargs: Any) -> Mapping[str, Any]: ...


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class PriceDimension(_Lenient):
    """A price dimension of an on-demand term."""

    unit: str
    pricePerUnit: dict[str, str]  # noqa: N815 (the wire name)


class OnDemandTerm(_Lenient):
    """An on-demand offer term of a product."""

    effectiveDate: str | None = None  # noqa: N815
    priceDimensions: dict[str, PriceDimension]  # noqa: N815


class Terms(_Lenient):
    """The terms of a product; reserved terms are not read."""

    OnDemand: dict[str, OnDemandTerm] = {}


class Product(_Lenient):
    """The part of a product's attributes that tells what it is."""

    attributes: dict[str, str]
    sku: str | None = None


class PriceListItem(_Lenient):
    """One element of ``PriceList``, once its JSON string is decoded."""

    product: Product
    terms: Terms
    publicationDate: str | None = None  # noqa: N815


def product_filters(instance_type: str, region: str) -> list[dict[str, str]]:
    """The filters that select the Linux, shared-tenancy, on-demand product of one type."""
    fields = {
        "instanceType": instance_type,
        "regionCode": region,
        "operatingSystem": "Linux",
        "tenancy": "Shared",
        "preInstalledSw": "NA",
        "capacitystatus": "Used",
    }
    return [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in fields.items()]


def hourly_prices(item: PriceListItem) -> list[tuple[float, str | None]]:
    """The non-zero hourly USD prices of a product's on-demand terms, with their dates."""
    found = []
    for term in item.terms.OnDemand.values():
        for dimension in term.priceDimensions.values():
            usd = dimension.pricePerUnit.get("USD")
            if dimension.unit != "Hrs" or usd is None:
                continue
            value = float(usd)
            if value > 0:  # zero-priced dimensions belong to reservations, not to on-demand use
                found.append((value, term.effectiveDate))
    return found


def parse_price(pages: list[Mapping[str, Any]], instance_type: str, region: str) -> HourlyPrice:
    """The one on-demand price in ``get_products`` pages; PriceUnavailable if none or several."""
    prices: list[tuple[float, str | None]] = []
    skus: list[str] = []
    for page in pages:
        for text in page.get("PriceList", []):
            item = PriceListItem.model_validate(json.loads(text))
            prices.extend(hourly_prices(item))
            skus.append(item.product.sku or "?")
    distinct = sorted({usd for usd, _ in prices})
    if not distinct:
        raise PriceUnavailable(f"the Price List API has no on-demand price for {instance_type}")
    if len(distinct) > 1:
        raise PriceUnavailable(
            f"the Price List API has several on-demand prices for {instance_type}: {distinct}"
        )
    effective = next((d for _, d in prices if d), None)
    return HourlyPrice(
        instance_type,
        region,
        distinct[0],
        f"AWS Price List API ({SERVICE_CODE} {region}, sku {', '.join(sorted(set(skus)))})",
        date.fromisoformat(effective[:10]) if effective else None,
    )


def pricing_client(session: Session | None = None) -> PricingClient:
    """A botocore ``pricing`` client with the default credential chain (IRSA on EKS).

    ``max_attempts`` counts retries: one retry rides out a throttle; more would only delay the
    fallback, which answers anyway.
    """
    config = Config(retries={"max_attempts": 1}, connect_timeout=5, read_timeout=10)
    client = (session or Session()).create_client(
        "pricing", region_name=PRICING_ENDPOINT_REGION, config=config
    )
    return cast(PricingClient, client)


class AwsPriceList:
    """A :class:`PriceSource` on the Price List API, cached per (instance type, region)."""

    def __init__(
        self,
        client: PricingClient,
        fallback: PriceSource,
        *,
        cache_seconds: float = CACHE_SECONDS,
        retry_seconds: float = RETRY_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._fallback = fallback
        self._cache_seconds = cache_seconds
        self._retry_seconds = retry_seconds
        self._clock = clock
        self._cache: dict[tuple[str, str], tuple[HourlyPrice, float]] = {}

    def hourly_price(self, instance_type: str, region: str) -> HourlyPrice:
        """The price from AWS, from the cache, or from the fallback when AWS fails."""
        key = (instance_type, region)
        cached = self._cache.get(key)
        if cached is not None and self._clock() < cached[1]:
            return cached[0]
        try:
            price = parse_price(self._pages(instance_type, region), instance_type, region)
        except (BotoCoreError, ClientError, PriceUnavailable, ValidationError, ValueError) as err:
            price = self._fall_back(instance_type, region, err)
            # A failure is kept for a shorter time, so AWS is asked again soon but not per call.
            self._cache[key] = (price, self._clock() + self._retry_seconds)
            return price
        self._cache[key] = (price, self._clock() + self._cache_seconds)
        return price

    def _pages(self, instance_type: str, region: str) -> list[Mapping[str, Any]]:
        request: dict[str, Any] = {
            "ServiceCode": SERVICE_CODE,
            "Filters": product_filters(instance_type, region),
            "FormatVersion": "aws_v1",
            "MaxResults": 100,
        }
        pages = []
        for _ in range(MAX_PAGES):
            page = self._client.get_products(**request)
            pages.append(page)
            token = page.get("NextToken")
            if not token:
                break
            request["NextToken"] = token
        return pages

    def _fall_back(self, instance_type: str, region: str, error: Exception) -> HourlyPrice:
        reason = f"{type(error).__name__}: {error}"
        LOG.warning(
            "AWS Price List API failed for %s in %s (%s); using the fallback price source",
            instance_type,
            region,
            reason,
        )
        try:
            price = self._fallback.hourly_price(instance_type, region)
        except PriceUnavailable as fallback_error:
            raise PriceUnavailable(
                f"AWS Price List API failed ({reason}) and {fallback_error}"
            ) from error
        return HourlyPrice(
            price.instance_type,
            price.region,
            price.usd_per_hour,
            f"{price.source} (fallback: AWS Price List API failed: {reason})",
            price.as_of,
        )
