"""How far a trial got, as a bar: shared by `acceltrial status -w` and the demo, so the trial
commands need nothing of the demo or the local cluster."""

from __future__ import annotations

from typing import Any

Manifest = dict[str, Any]
BAR_WIDTH = 20


def bar(done: float) -> str:
    filled = max(0, min(BAR_WIDTH, round(done * BAR_WIDTH)))
    return "[" + "#" * filled + "." * (BAR_WIDTH - filled) + "]"


def progress(status: Manifest, steps: int) -> float:
    """How far the trial got: steps passed, the bake counting as one more. A trial that rolls
    back keeps the position it had reached, so the bar never goes backwards."""
    phase = status.get("phase")
    if phase in ("Promoted",):
        return 1.0
    baked = phase in ("BakingIn", "Promoting") or any(
        result.get("weight") == 100 for result in status.get("analysis") or []
    )
    if baked:
        return steps / (steps + 1)
    return max(0, (status.get("step") or 1) - 1) / (steps + 1)
