"""Many namespaces' simulated servers at once, the cluster read once per tick for all of them.

A test or benchmark that runs dozens of trials side by side (each in its own namespace, with its
own serving profiles) would load the API server with one :class:`Fleet` per namespace: each
would follow pods, Services, routes and grants with watches of its own. :class:`Fleets` follows
each kind once across namespaces (``watching``) and hands every fleet its cut on each tick. Each
fleet stays its own collector, to be served as its own scrape target: one target for dozens of
namespaces' pods would take longer to render than Prometheus' scrape timeout on a busy machine.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from acceltrial_testbed.sandbox.access import Access, as_access
from acceltrial_testbed.sandbox.fleet.exporter import Fleet, FleetSpec
from acceltrial_testbed.sandbox.fleet.ticking import Ticking
from acceltrial_testbed.sandbox.fleet.traffic import (
    ClusterReading,
    ClusterView,
    Entry,
)
from acceltrial_testbed.sandbox.fleet.watching import WatchedCollections, watched_namespaces


class Fleets:
    """One :class:`Fleet` per spec (one namespace each), advanced together."""

    def __init__(
        self,
        cluster: Access | str,
        specs: Sequence[FleetSpec],
        *,
        clock: Callable[[], float] = time.monotonic,
        reader: Callable[[Access], ClusterReading] | None = None,
    ) -> None:
        namespaces = [spec.entry.namespace for spec in specs]
        doubled = sorted({n for n in namespaces if namespaces.count(n) > 1})
        if doubled:
            raise ValueError(f"one spec per namespace: {', '.join(doubled)} given twice")
        self.access = as_access(cluster)
        self._watched: WatchedCollections | None = None
        if reader is None:  # every kind followed by one cluster-wide watch
            self._watched = WatchedCollections(self.access)
            reader = watched_namespaces(self._watched)
        self._read = reader
        self._reading = ClusterReading({}, {}, {}, {})
        self.fleets = {
            spec.entry.namespace: Fleet(self.access, spec, clock=clock, reader=self._view)
            for spec in specs
        }
        self._ticking = Ticking(self.advance, "fleets")

    def __getitem__(self, namespace: str) -> Fleet:
        return self.fleets[namespace]

    def _view(self, _access: Access, entry: Entry) -> ClusterView:
        return self._reading.view(entry)

    def advance(self) -> None:
        """Read the cluster once, then advance every fleet on what it holds now."""
        self._reading = self._read(self.access)
        for fleet in self.fleets.values():
            fleet.advance()

    def start(self, tick_seconds: float = 0.25) -> Fleets:
        self._ticking.start(tick_seconds)
        return self

    def stop(self) -> None:
        self._ticking.stop()
        if self._watched is not None:
            self._watched.stop()
