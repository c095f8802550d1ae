"""Machine-readable reason codes of a trial's decision (``status.decision.reasonCode``).

``status.decision.reason`` says why in prose, with the numbers; the code beside it names the kind
of reason, so dashboards, alerts, the demo and tests can tell outcomes apart without matching
text. A new code is added here; existing ones keep their meaning.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

ReasonCode = Literal[
    "Promoted",
    "Aborted",
    "PreflightFailed",
    "PreflightTimedOut",
    "ApiRefused",
    "CandidateNotAvailable",
    "CandidateNotScaled",
    "CriterionFailed",
    "MeasurementErrored",
    "Inconclusive",
    "RouteRefused",
    "CompileFailed",
    "QualityFailed",
]
REASON_CODES: Final[tuple[ReasonCode, ...]] = get_args(ReasonCode)

PROMOTED: Final = "Promoted"
"""Every step and the bake passed; the candidate took over."""
ABORTED: Final = "Aborted"
"""A person asked to abort (acceltrial.dev/action: abort)."""
PREFLIGHT_FAILED: Final = "PreflightFailed"
"""Something prevented the trial from starting (a missing baseline, route, capacity, another
trial on the same baseline); nothing was changed."""
PREFLIGHT_TIMED_OUT: Final = "PreflightTimedOut"
"""What the trial waited for before starting did not come within spec.progressDeadline."""
API_REFUSED: Final = "ApiRefused"
"""The API server refused a request for good (forbidden, invalid); retrying cannot help."""
CANDIDATE_NOT_AVAILABLE: Final = "CandidateNotAvailable"
"""The candidate Deployment was not Available within spec.progressDeadline."""
CANDIDATE_NOT_SCALED: Final = "CandidateNotScaled"
"""Before promotion the candidate did not reach the replicas for all traffic in time."""
CRITERION_FAILED: Final = "CriterionFailed"
"""A criterion of spec.analysis failed (latency, errors, cost, ...)."""
MEASUREMENT_ERRORED: Final = "MeasurementErrored"
"""Measurements errored too often (a query failed or could not be rendered)."""
INCONCLUSIVE: Final = "Inconclusive"
"""Too many measurements lacked the data to judge, and onInconclusive is rollback."""
ROUTE_REFUSED: Final = "RouteRefused"
"""The gateway does not accept the route with the candidate (its Accepted or ResolvedRefs
condition is False); routing was restored."""
COMPILE_FAILED: Final = "CompileFailed"
"""The Neuron compile Job of candidate.compile failed or ran past its deadline; the candidate
was never created."""
QUALITY_FAILED: Final = "QualityFailed"
"""The candidate's answers did not meet spec.quality (or the check could not ask both variants):
before any user request it ends Failed with the candidate removed; at a later step
(quality.everyStep) it rolls back."""
