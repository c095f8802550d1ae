"""What a person can ask of a running trial: the ``acceltrial.dev/action`` annotation, its values.

The operator reads the annotation once per tick and removes it; the CLI (``kubectl acceltrial
pause`` and friends), the demo's scripted user and the tests all write it through these names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal, get_args

ACTION_ANNOTATION: Final = "acceltrial.dev/action"

UserAction = Literal["pause", "resume", "abort", "promote", "approve"]
USER_ACTIONS: Final[tuple[UserAction, ...]] = get_args(UserAction)


def requested_action(annotations: Mapping[str, str] | None) -> UserAction | None:
    """The action a trial's annotations ask for; None when none does (an unknown value is
    ignored, as kubectl lets anyone write any annotation)."""
    value = (annotations or {}).get(ACTION_ANNOTATION)
    return value if value in USER_ACTIONS else None


def action_annotation(action: UserAction | None) -> dict[str, dict[str, dict[str, str | None]]]:
    """A merge patch that asks for ``action`` (None removes the request)."""
    return {"metadata": {"annotations": {ACTION_ANNOTATION: action}}}
