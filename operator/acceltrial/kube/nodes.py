"""The Nodes the operator reads, kept between ticks of every trial in the process.

:class:`NodeCache` holds the Nodes a measurement's queries need; :class:`NodeList` every Node as
a capacity check reads it, one listing shared by the trials that ask while another is in flight.

A measurement needs a pod's Node only for its EC2 instance id (``spec.providerID``), which a Node
keeps for its whole life. Listing every Node on every measurement made each tick cost grow with
the cluster (two nodes per trial in the scale benchmark: at 100 trials, 200 Nodes parsed ten times
a second). The cache reads a Node the first time a pod runs on it and again after ``max_age``
(a name can come back as another instance); a Node that is gone is asked for again next time.
Only the fields the queries use are kept (name, labels, providerID).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from acceltrial.bounded import BoundedMap

Manifest = dict[str, Any]
MAX_AGE_SECONDS = 300.0
KEPT = 16384
"""Nodes remembered at most (the least recently used go first)."""


LIST_MAX_AGE_SECONDS = 0.0
"""How much older than the ask a shared listing may be: none. Trials that ask while a listing is
in flight wait and share the next one, which starts after they asked; a listing from before the
ask could still show a Node that was going away (a capacity check would then count a node group
as up while it scales to zero)."""


class NodeReader(Protocol):
    def node(self, name: str) -> Manifest | None: ...


class NodeLister(Protocol):
    def nodes(self) -> list[Manifest]: ...


class NodeCache:
    """Nodes by name as last read (see the module docstring)."""

    def __init__(
        self, max_age_seconds: float = MAX_AGE_SECONDS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.max_age_seconds = max_age_seconds
        self._clock = clock
        self._read_at: BoundedMap[str, tuple[float, Manifest]] = BoundedMap(KEPT)

    def named(self, reader: NodeReader, names: Iterable[str | None]) -> list[Manifest]:
        """The Nodes of ``names`` that exist, from the cache or read now."""
        found = []
        for name in sorted({n for n in names if n}):
            node = self._fresh(name) or self._read(reader, name)
            if node is not None:
                found.append(node)
        return found

    def _fresh(self, name: str) -> Manifest | None:
        entry = self._read_at.get(name)
        if entry is None or self._clock() - entry[0] > self.max_age_seconds:
            return None
        return entry[1]

    def _read(self, reader: NodeReader, name: str) -> Manifest | None:
        node = reader.node(name)
        if node is None:
            self._read_at.pop(name)
            return None
        kept = _identity(node)
        self._read_at.put(name, (self._clock(), kept))
        return kept


class NodeList:
    """Every Node, trimmed to what capacity and Neuron checks read (name, labels, taints,
    allocatable and capacity). One thread lists while the others that ask wait; they share the
    next listing that started at most ``max_age_seconds`` before they asked (so N trials
    starting together list about twice, not N times). A failed listing is not kept."""

    def __init__(
        self,
        max_age_seconds: float = LIST_MAX_AGE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_age_seconds = max_age_seconds
        self._clock = clock
        self._listed: tuple[float, list[Manifest]] | None = None
        self._lock = threading.Lock()

    def all(self, lister: NodeLister) -> list[Manifest]:
        """Every Node from a listing that started no earlier than ``max_age_seconds`` before
        this call (read-only: shared by trials)."""
        asked = self._clock()
        with self._lock:
            if self._listed is not None and self._listed[0] >= asked - self.max_age_seconds:
                return self._listed[1]
            started = self._clock()
            nodes = [_capacity_view(node) for node in lister.nodes()]
            self._listed = (started, nodes)
            return nodes


def _capacity_view(node: Manifest) -> Manifest:
    return _trimmed(node, ("taints", "unschedulable", "providerID"), ("allocatable", "capacity"))


def _identity(node: Manifest) -> Manifest:
    return _trimmed(node, ("providerID",), ())


def _trimmed(node: Manifest, spec_keys: tuple[str, ...], status_keys: tuple[str, ...]) -> Manifest:
    """The Node's name and labels, and only the given keys of its spec and status."""
    metadata, spec, status = (node.get(k) or {} for k in ("metadata", "spec", "status"))
    trimmed: Manifest = {
        "metadata": {"name": metadata.get("name"), "labels": dict(metadata.get("labels") or {})},
        "spec": {key: spec[key] for key in spec_keys if key in spec},
    }
    if status_keys:
        trimmed["status"] = {key: status[key] for key in status_keys if key in status}
    return trimmed
