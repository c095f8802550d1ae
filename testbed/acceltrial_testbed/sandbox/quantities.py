"""Kubernetes resource quantities (``500m``, ``30Gi``, ``2``) as numbers, for scheduling."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_SUFFIXES = {
    "": Decimal(1),
    "m": Decimal("0.001"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(m|k|M|G|T|Ki|Mi|Gi|Ti)?$")


def parse_quantity(value: str | int | float) -> Decimal:
    """The quantity's value in base units (cores, bytes, devices); ValueError when malformed."""
    if isinstance(value, int | float):
        return Decimal(str(value))
    match = _QUANTITY.match(value.strip())
    if match is None:
        raise ValueError(f"not a quantity: {value!r}")
    try:
        return Decimal(match[1]) * _SUFFIXES[match[2] or ""]
    except InvalidOperation as error:
        raise ValueError(f"not a quantity: {value!r}") from error
