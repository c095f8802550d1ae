"""Whether the trial kopf hands a tick already holds this process's last status write for it.

kopf hands each tick the trial as its watch last delivered it. When the API server is slow to
deliver watch events (a thousand trials on a busy control plane), a tick can get the trial from
before the previous tick's own status write: it would decide again from the old state and its
merge patch, computed against that old status, would mix old and new fields (seen at 1,000
trials: a phase of Preflight beside the step and message of a running trial). The process keeps
a digest of the last status it wrote for each trial; a tick whose trial does not hold it reads
the trial afresh (one GET, only then).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from acceltrial.bounded import BoundedMap

KEPT = 16384
"""Trials remembered at most (the least recently used go first)."""


class WrittenStatuses:
    """The last status this process wrote for each trial, by uid, as a digest."""

    def __init__(self, kept: int = KEPT) -> None:
        self._digests: BoundedMap[str, str] = BoundedMap(kept)

    def remember(self, uid: str, status: dict[str, Any]) -> None:
        """``status`` (as dumped from the model) is what the trial holds now."""
        self._digests.put(uid, _digest(status))

    def behind(self, uid: str, status: dict[str, Any]) -> bool:
        """Whether ``status`` (as dumped from the model) is not the last one written for the
        trial: kopf's copy is older than this process's own write. False for a trial this
        process has not written (just started, or another replica wrote last)."""
        written = self._digests.get(uid)
        return written is not None and written != _digest(status)

    def forget(self, uid: str) -> None:
        self._digests.pop(uid)


def _digest(status: dict[str, Any]) -> str:
    text = json.dumps(status, sort_keys=True, separators=(",", ":"))
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()
