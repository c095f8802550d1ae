"""Preflight: the snapshot's objects, the router's and the capacity provider's findings, and the
baseline's metrics, put to the engine's preflight rules (engine/preflight.py). Nothing is
changed."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from acceltrial.engine.capacity import CapacityFinding
from acceltrial.engine.preflight import (
    baseline_missing,
    baseline_waits,
    competing_trials,
    service_problems,
)
from acceltrial.handlers.measure import metric_problems
from acceltrial.handlers.metrics_source import secret_findings
from acceltrial.handlers.snapshot import TickSnapshot
from acceltrial.providers.routing.port import Router


def preflight(
    snapshot: TickSnapshot, router: Router, check_capacity: Callable[[], CapacityFinding]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What prevents the trial from starting, and what it waits for (a baseline still rolling
    out, as when GitOps applies it together with the trial)."""
    namespace = snapshot.namespace
    baseline = snapshot.baseline
    if baseline is None:
        return (baseline_missing(namespace, snapshot.baseline_name),), ()
    waits = baseline_waits(baseline, snapshot.baseline_name)
    service_found = snapshot.baseline_service is not None
    problems = service_problems(namespace, snapshot.baseline_service_name, service_found)
    problems += router.problems()
    capacity = check_capacity()
    problems += list(capacity.problems)
    waits += tuple(capacity.waits)
    problems += competing_trials(snapshot.trials, snapshot.trial.uid, snapshot.baseline_name)
    secret_problems, secret_waits = secret_findings(
        snapshot.kube, namespace, snapshot.spec.analysis.prometheus
    )
    problems += secret_problems
    waits += tuple(secret_waits)
    if not problems and not waits:
        # Before any traffic moves: the criteria must be measurable on the baseline.
        waits = tuple(metric_problems(snapshot, datetime.now(UTC)))
    return tuple(problems), waits
