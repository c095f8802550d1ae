"""The price sources an operator process shares across trials and ticks.

The catalog is parsed once; the Price List API client is made only when a trial asks for
``pricing: aws``, and then reused so its cache spares AWS a call per tick.
"""

from __future__ import annotations

from functools import cache

from acceltrial.providers.pricing.aws import AwsPriceList, pricing_client
from acceltrial.providers.pricing.catalog import Catalog, bundled_catalog
from acceltrial.providers.pricing.port import PriceSource


@cache
def shared_catalog() -> Catalog:
    return bundled_catalog()


@cache
def _shared_aws() -> AwsPriceList:
    return AwsPriceList(pricing_client(), fallback=shared_catalog())


def price_sources(pricing: str) -> tuple[Catalog, PriceSource | None]:
    """The catalog (always needed for instance specs) and the source ``pricing`` names."""
    catalog = shared_catalog()
    if pricing == "aws":
        return catalog, _shared_aws()
    if pricing == "catalog":
        return catalog, catalog
    return catalog, None
