"""Kubernetes-style duration strings (``30s``, ``10m``, ``1h30m``): their grammar and their value.

Durations stay strings in the API so that a manifest round-trips unchanged; code that needs a
number calls :func:`duration_seconds`.
"""

from __future__ import annotations

import re
from typing import Annotated

from acceltrial.api.base import Pattern

_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = r"[0-9]+(?:\.[0-9]+)?(?:ms|s|m|h)"
DURATION_PATTERN = rf"^(?:{_PART})+$"
_PARTS = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)")
_WHOLE = re.compile(DURATION_PATTERN)

DURATION_HINT = "a non-negative duration such as 30s, 10m or 1h30m (units: ms, s, m, h)"


def duration_seconds(text: str) -> float:
    """Return the length of a duration string in seconds; raise ValueError if it is malformed."""
    if not _WHOLE.match(text):
        raise ValueError(f"expected {DURATION_HINT}, got {text!r}")
    return sum(float(number) * _UNIT_SECONDS[unit] for number, unit in _PARTS.findall(text))


Duration = Annotated[str, Pattern(DURATION_PATTERN, DURATION_HINT, 32)]
"""A duration string; validated on input, kept as written."""
