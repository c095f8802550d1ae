"""The routing port: how traffic is split between the baseline and the candidate."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from acceltrial.api.status import OriginalRouting
from acceltrial.engine.metrics import Variant


class RoutingProblem(Exception):
    """The routing cannot be read or changed as the trial needs; the message says why."""


class Router(Protocol):
    """Moves traffic; every write is verified by reading it back."""

    def problems(self) -> list[str]:
        """What prevents this router from working (for preflight); empty when it can."""
        ...

    def unselected_labels(self) -> frozenset[str]:
        """Labels the candidate's pods must not carry, or the baseline's backend would take them
        in (an InferencePool's selector); empty when the router needs none dropped."""
        ...

    def snapshot(self) -> OriginalRouting:
        """The routing as found, to be recorded before the first change."""
        ...

    def set_weight(self, weight: int, original: OriginalRouting, mirror: int = 0) -> None:
        """Send ``weight`` percent of the baseline's traffic to the candidate, and copy
        ``mirror`` percent of the requests to it (its answers discarded; 0: no copies)."""
        ...

    def weight(self, original: OriginalRouting | None = None) -> int | None:
        """The candidate's percentage the cluster holds now (None: this router cannot tell)."""
        ...

    def share(self, serving: Callable[[], Mapping[Variant, int]]) -> int | None:
        """The candidate's share of traffic (%) the routing really gives now, when it can differ
        from the weight written (the replicas router shares by whole ready pods); None: the
        weight is the share. ``serving`` counts each variant's pods that take traffic (Ready,
        not terminating); a router that does not need them does not call it."""
        ...

    def conflict(self, weight: int, original: OriginalRouting, mirror: int = 0) -> str | None:
        """Who else changed the routing since the trial set ``weight`` (and ``mirror``), and
        how; None if nobody did."""
        ...

    def refusal(self) -> str | None:
        """Why the data plane does not use the routing as written (its own reason), if so."""
        ...

    def restore(self, original: OriginalRouting) -> None:
        """Put back exactly what ``original`` recorded."""
        ...

    def release(self) -> None:
        """After promotion: leave the routing as it is, no longer marked as the trial's."""
        ...

    def committed(self) -> dict[str, dict[str, Any]]:
        """After promotion: this router's objects a GitOps user commits, as they are now, by
        the report's key for them (``httpRoute``); empty when it owns none."""
        ...
