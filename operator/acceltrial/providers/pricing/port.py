"""The pricing port: what the cost model needs from a price source, and its typed failure.

A source answers one question, the on-demand price of one instance hour of a type in a region,
and says where that number comes from and how old it is, so a report can show it beside the cost.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Protocol


@dataclass(frozen=True)
class HourlyPrice:
    """The on-demand price of one instance hour, with its provenance."""

    instance_type: str
    region: str
    usd_per_hour: float
    source: str
    """Where the number comes from, in words (and, for a fallback, why the first choice failed)."""
    as_of: date | None
    """The date the price is known to hold from, if any: the catalog's date of taking it, or the
    Price List term's effective date."""


class PriceUnavailable(Exception):
    """No price is known for an instance type in a region; the message says why, for a person."""


class PriceSource(Protocol):
    """Anything that can price an instance hour."""

    def hourly_price(self, instance_type: str, region: str) -> HourlyPrice:
        """The on-demand USD price of one hour of ``instance_type`` in ``region``.

        Raises :class:`PriceUnavailable` when it has none.
        """
        ...
