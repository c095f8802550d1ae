"""The vocabulary of one tick between the handlers and the state machine (``lifecycle``):
the ``Observation`` the handlers make of the cluster, with its ``Measurement`` already judged,
and the ``TickResult`` they get back: the next status, the actions to apply in order (each
idempotent) and the Events to post.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from acceltrial.api.actions import UserAction
from acceltrial.api.status import CriterionResult, EconomicsStatus, OriginalRouting, TrialStatus
from acceltrial.engine.analysis import RoundOutcome
from acceltrial.engine.capacity_sweep import SweepOutcome
from acceltrial.engine.compile_gate import CompileJobState, StartCompile
from acceltrial.engine.metrics import Variant
from acceltrial.engine.promotion import AutoscalerBounds
from acceltrial.engine.quality.check import QualityCheck


@dataclass(frozen=True)
class DeployCandidate:
    """Create or update the candidate Deployment and Service (server-side apply)."""


@dataclass(frozen=True)
class SetWeight:
    """Send ``weight`` percent of the traffic to the candidate and copy ``mirror`` percent of
    the requests to it (a shadow step: its answers are discarded); no mirror unless given."""

    weight: int
    mirror: int = 0


@dataclass(frozen=True)
class RestoreRouting:
    """Put the routing back exactly as recorded in ``status.original``."""


@dataclass(frozen=True)
class RemoveCandidate:
    """Delete the candidate Deployment and Service, releasing their capacity."""


@dataclass(frozen=True)
class ScaleBaselineToZero:
    """Scale the baseline Deployment to zero replicas (it is never deleted)."""


@dataclass(frozen=True)
class ScaleCandidate:
    """Scale the candidate Deployment to ``replicas`` (before it takes all traffic)."""

    replicas: int


@dataclass(frozen=True)
class RetargetAutoscaler:
    """Point the baseline's HorizontalPodAutoscaler at the candidate, bounds and metrics kept."""


@dataclass(frozen=True)
class RestoreAutoscaler:
    """Point the HorizontalPodAutoscaler back at what ``status.original.hpa`` recorded."""


@dataclass(frozen=True)
class HandOverCandidate:
    """Make the candidate Deployment and Service ordinary workloads: no owner, no field
    ownership by the operator, a label naming the trial that promoted them."""


@dataclass(frozen=True)
class ClearUserAction:
    """Remove the acceltrial.dev/action annotation: each action is handled once."""


Action = (
    DeployCandidate
    | SetWeight
    | RestoreRouting
    | RemoveCandidate
    | ScaleBaselineToZero
    | ScaleCandidate
    | RetargetAutoscaler
    | RestoreAutoscaler
    | HandOverCandidate
    | ClearUserAction
    | StartCompile
)


@dataclass(frozen=True)
class Event:
    """A Kubernetes Event to post on the trial."""

    type: Literal["Normal", "Warning"]
    reason: str
    message: str


@dataclass(frozen=True)
class Measurement:
    """One measurement of the current step, already judged."""

    outcome: RoundOutcome
    reason: str
    results: tuple[CriterionResult, ...] = ()
    economics: EconomicsStatus | None = None
    """The cost comparison of this measurement, kept in status.economics."""
    observed: Mapping[Variant, Mapping[str, float | None]] | None = None
    """Per variant, the figures the report shows side by side (request rate, latency, ...)."""
    queries: Mapping[str, Mapping[Variant, str]] | None = None
    """The query each reading used, by reading (a criterion, or ``economics:`` and a cost input)
    and variant, for the report."""


@dataclass(frozen=True)
class Observation:
    """What the handler saw in the cluster (and Prometheus) on this tick."""

    now: datetime
    generation: int
    preflight_problems: tuple[str, ...] = ()
    preflight_waits: tuple[str, ...] = ()
    """What the trial waits for before it can start (the baseline still rolling out, say); the
    trial fails only if it lasts past progressDeadline."""
    routing: OriginalRouting | None = None
    """Routing as the cluster holds it now, before any change by this trial."""
    observed_weight: int | None = None
    """The candidate weight the cluster holds now, as the router reads it back."""
    observed_share: int | None = None
    """The candidate's share of traffic the routing really gives now, when the router can tell
    and it may differ from the weight (the replicas router: ready pods behind the Service)."""
    routing_conflict: str | None = None
    """Another writer changed the routing since the trial's last write (who, and what)."""
    route_refused: str | None = None
    """The gateway's own reason for not using the routing as written (Accepted/ResolvedRefs)."""
    candidate_available: bool = False
    candidate_available_replicas: int = 0
    """Available replicas of the candidate Deployment."""
    candidate_serving_replicas: int | None = None
    """The candidate pods the router counts now (Ready, not terminating), read with
    ``observed_share`` in the same tick; None when the trial does not route."""
    autoscaler: AutoscalerBounds | None = None
    """Bounds of the HorizontalPodAutoscaler recorded in status.original.hpa (while promoting)."""
    measurement: Measurement | None = None
    action: UserAction | None = None
    compile_job: CompileJobState | None = None
    """The compile Job of candidate.compile, while in Preflight."""
    refused: str | None = None
    """A request the API server refused for good (400, 403, 404, 422), with what was being
    done: the trial ends instead of retrying forever."""
    baseline_request_rate: float | None = None
    """In Preflight, once nothing holds the trial: the baseline's requests/s over the last
    interval (None when it cannot be read), for the evidence forecast."""
    quality: QualityCheck | None = None
    """The prompt set's run when one was due (engine/quality/check.py's ``quality_due``)."""
    capacity_test: SweepOutcome | None = None
    """The candidate's capacity sweep once it finished (engine/capacity_gate.py's
    ``capacity_due``); None while it runs or when none is due."""
    candidate_handed_over: bool = False
    """While baking: the candidate already belongs to nobody, so a tick that promoted applied
    its actions but its status write was lost."""


@dataclass(frozen=True)
class TickResult:
    """The next status, the actions to apply (in order) and the Events to post."""

    status: TrialStatus
    actions: tuple[Action, ...] = ()
    events: tuple[Event, ...] = ()
