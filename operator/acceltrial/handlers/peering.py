"""Two or more replicas: kopf peering, so that exactly one replica acts at a time.

Every replica started without ``--standalone`` joins the peering object named by ``--peering``
(the chart: ``acceltrial``). kopf pauses every replica that sees a live peer of higher priority,
and pauses *all* replicas that share the highest priority; so each replica draws a distinct
random priority at start (unless ``--priority`` gave one). The highest acts; the others wait.
When it dies, its entry expires ``ACCELTRIAL_PEERING_LIFETIME_SECONDS`` after its last keepalive
and the next highest resumes: that bounds the handover. Peering is mandatory, so a replica that
cannot find the peering object waits instead of acting alone.
"""

from __future__ import annotations

import random

import kopf

PRIORITY_RANGE = (1, 2**30)


def configure_peering(settings: kopf.OperatorSettings, lifetime_seconds: int) -> None:
    """Make a non-standalone replica a well-behaved peer (see the module docstring)."""
    if settings.peering.standalone:
        return
    settings.peering.mandatory = True
    settings.peering.lifetime = lifetime_seconds
    if settings.peering.priority == 0:
        settings.peering.priority = random.SystemRandom().randint(*PRIORITY_RANGE)
