"""The fault suite's short run with a fixed seed (CI): trials through 409s on writes, 503s,
410 Gone on watch resumption and failing Prometheus answers end as the fault-free run does or in
a documented safe state, or are still under way at the deadline on a slow machine (printed, not
asserted); asserted: no weight is set twice or skipped, every rollback restores the route
exactly, nothing is promoted on missing data and no route is left without replicas. The
longer run is ``make bench-faults``; docs/reliability.md has its figures."""

from __future__ import annotations

import os

import pytest
from bench.faults import KINDS, run, table

pytestmark = [
    pytest.mark.slow,
    # About a minute on 2 cores: CI runs it (CI=1), `make test` elsewhere only with
    # ACCELTRIAL_FAULT_SUITE=1; `make bench-faults` is the longer run. Its "stuck" figure depends
    # on the machine's load, so it is printed, not asserted (docs/reliability.md).
    pytest.mark.skipif(
        not os.environ.get("CI") and os.environ.get("ACCELTRIAL_FAULT_SUITE") != "1",
        reason="the fault suite runs in CI or with ACCELTRIAL_FAULT_SUITE=1 (or make bench-faults)",
    ),
]
SHORT = ("api-409-on-writes", "api-503", "watch-410-gone", "prom-500-503-429")


def test_a_short_seeded_fault_run_keeps_every_guarantee() -> None:
    rows = run([k for k in KINDS if k.name in SHORT], seed=1, parallel=4, deadline=240)
    print(table(rows))
    for row in rows:
        figures = row.figures()
        assert figures["trials"] == 3, row.kind
        assert figures["promotions on missing data"] == 0, row.kind
        assert figures["routes not restored"] == 0, row.kind
        assert figures["weights twice/skipped"] == 0, row.kind
        assert figures["left without serving"] == 0, row.kind
        assert figures["faults injected"] > 0, f"{row.kind}: the schedule injected nothing"
