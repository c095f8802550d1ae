"""A trial's spec, validated once per generation.

Every tick used to run the whole validation (the CRD's schema and its CEL rules, about 60 ms)
and parse the spec again, though the spec of a running trial changes only with a new
``metadata.generation`` (the name, the only metadata the rules read, never changes). The result
is kept per trial UID and generation, for a bounded number of trials.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from acceltrial.api.spec import TrialSpec
from acceltrial.api.validation import validate_trial

KEPT = 4096
"""Trials whose result is kept: well above what one replica runs."""
_validated: OrderedDict[tuple[str, int], TrialSpec | None] = OrderedDict()


def valid_spec(raw: Mapping[str, Any]) -> TrialSpec | None:
    """The trial's spec when the whole trial is valid, else None."""
    metadata = raw.get("metadata") or {}
    uid, generation = metadata.get("uid"), metadata.get("generation")
    if not isinstance(uid, str) or not isinstance(generation, int):
        return _validate(raw)
    key = (uid, generation)
    if key in _validated:
        _validated.move_to_end(key)
        return _validated[key]
    spec = _validate(raw)
    _validated[key] = spec
    while len(_validated) > KEPT:
        _validated.popitem(last=False)
    return spec


def _validate(raw: Mapping[str, Any]) -> TrialSpec | None:
    if validate_trial({k: v for k, v in raw.items() if k != "status"}):
        return None
    try:
        return TrialSpec.model_validate(raw["spec"])
    except ValidationError:
        return None
