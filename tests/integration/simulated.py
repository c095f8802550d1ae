"""The sandbox's simulated fleet as the end-to-end tests run it: one namespace per trial, each
with its own serving profiles, requests split by the namespace's HTTPRoute as the operator moves
it, series in the shape real vLLM servers export (:mod:`acceltrial_testbed.sandbox.fleet`).

The tests name profiles by ``(namespace, variant)``; a namespace without a candidate profile
sends its candidate nothing (a gateway that ignores weights), so the candidate's series stay
empty: the "missing metrics" case.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace

from acceltrial_testbed.sandbox.access import Access
from acceltrial_testbed.sandbox.fleet.exporter import FleetSpec
from acceltrial_testbed.sandbox.fleet.fleets import Fleets
from acceltrial_testbed.sandbox.fleet.model import ServingProfile
from acceltrial_testbed.sandbox.fleet.serving import metrics_endpoint
from acceltrial_testbed.sandbox.fleet.traffic import Entry

STEADY = ServingProfile(p50=0.25, p99=0.5, capacity_rps=150, error_ratio=0.001)
"""A replica far from its capacity: latency as profiled, one request in a thousand failing."""
RPS = 60.0
"""Requests per second users send each namespace's route: twice what the candidate needs to
answer the 100 requests a p99 and a 1% error ratio rest on over a trial's three 6 s steps
(about 290 over whole windows). A busy machine's late ticks leave gaps between the windows, and
at 30 requests/s a manual approval once came on 97 of them."""
ROUTE = "llama3"

Profiles = Mapping[tuple[str, str], ServingProfile]
"""By namespace and variant (``baseline``, ``candidate``)."""


def profile(**changes: float) -> ServingProfile:
    """:data:`STEADY` with ``changes`` (e.g. ``p50=0.45, p99=0.9`` or ``error_ratio=0.2``)."""
    return replace(STEADY, **changes)


def fleet_specs(profiles: Profiles) -> list[FleetSpec]:
    """One spec per namespace named in ``profiles``, entered through its route ``llama3``."""
    namespaces = sorted({namespace for namespace, _ in profiles})
    specs = []
    for namespace in namespaces:
        candidate = profiles.get((namespace, "candidate"))
        specs.append(
            FleetSpec(
                entry=Entry(namespace, route=ROUTE, honors_weights=candidate is not None),
                rps=RPS,
                prompt_tokens=256,
                generated_tokens=128,
                profiles={
                    "baseline": profiles[namespace, "baseline"],
                    "candidate": candidate or STEADY,
                },
            )
        )
    return specs


@contextmanager
def serving(cluster: Access | str, profiles: Profiles) -> Iterator[str]:
    """Run the fleet for ``profiles``, each namespace's servers on their own endpoint; yield
    the scrape configuration of a Prometheus job (``fleet``) that scrapes them all."""
    fleets = Fleets(cluster, fleet_specs(profiles)).start()
    try:
        with contextlib.ExitStack() as stack:
            urls = [stack.enter_context(metrics_endpoint(f)) for f in fleets.fleets.values()]
            targets = ", ".join(f"'{url.removeprefix('http://')}'" for url in urls)
            yield (
                "scrape_configs:\n  - job_name: fleet\n"
                f"    static_configs: [{{targets: [{targets}]}}]\n"
            )
    finally:
        fleets.stop()
