"""A trial's spec (or, for any kind, its problems), validated once per generation.

Every tick used to run the whole validation (the CRD's schema and its CEL rules, about 60 ms)
and parse the spec again, though the spec of a running trial changes only with a new
``metadata.generation`` (the name, the only metadata the rules read, never changes). The result
is kept per trial UID and generation, for a bounded number of trials.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from acceltrial.api.spec import TrialSpec
from acceltrial.api.validation import validate_trial
from acceltrial.bounded import BoundedMap

KEPT = 4096
"""Trials whose result is kept: well above what one replica runs."""
_validated: BoundedMap[tuple[str, int], tuple[TrialSpec | None]] = BoundedMap(KEPT)
"""(uid, generation) -> the spec, or None for an invalid trial (in a tuple: found or not)."""
_problems: BoundedMap[tuple[str, int], tuple[str, ...]] = BoundedMap(KEPT)
"""(uid, generation) -> what is wrong with a trial of any kind (empty: nothing)."""


def valid_spec(raw: Mapping[str, Any]) -> TrialSpec | None:
    """The trial's spec when the whole trial is valid, else None."""
    metadata = raw.get("metadata") or {}
    uid, generation = metadata.get("uid"), metadata.get("generation")
    if not isinstance(uid, str) or not isinstance(generation, int):
        return _validate(raw)
    key = (uid, generation)
    known = _validated.get(key)
    if known is not None:
        return known[0]
    spec = _validate(raw)
    _validated.put(key, (spec,))
    return spec


def _validate(raw: Mapping[str, Any]) -> TrialSpec | None:
    if validate_trial({k: v for k, v in raw.items() if k != "status"}):
        return None
    try:
        return TrialSpec.model_validate(raw["spec"])
    except ValidationError:
        return None


def spec_problems(raw: Mapping[str, Any]) -> tuple[str, ...]:
    """What is wrong with the trial (an AcceleratorTrial or a TrainingTrial), as ``acceltrial
    validate`` says it, found once per UID and generation."""
    metadata = raw.get("metadata") or {}
    uid, generation = metadata.get("uid"), metadata.get("generation")
    if not isinstance(uid, str) or not isinstance(generation, int):
        return _problems_of(raw)
    known = _problems.get((uid, generation))
    if known is None:
        known = _problems_of(raw)
        _problems.put((uid, generation), known)
    return known


def _problems_of(raw: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(str(p) for p in validate_trial({k: v for k, v in raw.items() if k != "status"}))
