"""The capacity port: can the candidate's pods be scheduled in this cluster?"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from acceltrial.api.spec import CandidateSpec


class CapacityProvider(Protocol):
    """Answers preflight's question: is there room for one candidate pod?"""

    def problems(self, candidate: CandidateSpec, nodes: Sequence[dict[str, Any]]) -> list[str]:
        """Why the candidate cannot be scheduled (empty when it can), from the Nodes as read
        once this tick."""
        ...
