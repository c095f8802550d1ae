"""How long the lifecycle waits before retrying a tick that failed for a temporary reason.

A conflict, a throttled or failing API server, a timeout or no answer at all is retried with
exponential backoff from one tick interval, doubled per consecutive failure and capped, so a
struggling API server is not hammered while a single lost write costs no more than a tick.
"""

from __future__ import annotations

BACKOFF_CAP_TICKS = 8
"""The longest wait, in tick intervals (80 s with the default 10 s tick)."""


def backoff_seconds(retry: int, tick_seconds: float) -> float:
    """The wait before retry number ``retry + 1`` (kopf counts a handler's retries from 0)."""
    return tick_seconds * min(1 << min(max(0, retry), 16), BACKOFF_CAP_TICKS)
