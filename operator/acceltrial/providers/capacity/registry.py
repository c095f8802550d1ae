"""The capacity providers by name.

The spec names none yet, so every trial uses ``nodes`` (the Nodes the cluster has); a provider
for node groups that scale from zero is one module in this folder and one entry in
:data:`CAPACITY_PROVIDERS`, chosen by the spec member that names it.
"""

from __future__ import annotations

from collections.abc import Callable

from acceltrial.providers.capacity.nodes import NodesCapacity
from acceltrial.providers.capacity.port import CapacityProvider

DEFAULT = "nodes"
CAPACITY_PROVIDERS: dict[str, Callable[[], CapacityProvider]] = {"nodes": NodesCapacity}
"""Each capacity provider's factory, by name."""


def capacity_provider(name: str = DEFAULT) -> CapacityProvider:
    """The capacity provider called ``name``."""
    return CAPACITY_PROVIDERS[name]()
