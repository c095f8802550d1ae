"""A map that keeps at most a given number of entries, the least recently used going first, safe
to share between the threads kopf runs sync handlers on.

The operator keeps a few things per trial or per Node in memory (a validated spec, the last
status written, the report ConfigMap's version, a Node read a moment ago). Each must stay
bounded however many trials come and go, and each is read and written from several threads at
once: a plain dict evicted with ``next(iter(...))`` can raise while another thread inserts.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class BoundedMap(Generic[K, V]):
    """Up to ``kept`` entries; reading or writing an entry makes it the most recently used."""

    def __init__(self, kept: int) -> None:
        if kept < 1:
            raise ValueError(f"kept must be at least 1, not {kept}")
        self.kept = kept
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        """The entry of ``key``, or None when there is none."""
        with self._lock:
            if key not in self._entries:
                return None
            self._entries.move_to_end(key)
            return self._entries[key]

    def put(self, key: K, value: V) -> None:
        """Keep ``value`` for ``key``; the least recently used entries go past ``kept``."""
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.kept:
                self._entries.popitem(last=False)

    def pop(self, key: K) -> V | None:
        """Remove the entry of ``key`` and return it (None when there was none)."""
        with self._lock:
            return self._entries.pop(key, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
