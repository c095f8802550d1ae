"""``TrialSpec``, the root of the spec: its sections in the order they read, and the rules that
span sections (every step at least one analysis.interval; mirror steps only with a router that
can copy requests; step weights that increase)."""

from __future__ import annotations

from pydantic import ConfigDict, Field

from acceltrial.api.base import ApiModel, cel, cel_rules
from acceltrial.api.capacity import CapacitySpec
from acceltrial.api.capacity_test import CapacityTestSpec
from acceltrial.api.durations import Duration
from acceltrial.api.spec.analysis import AnalysisSpec
from acceltrial.api.spec.economics import EconomicsSpec
from acceltrial.api.spec.notifications import Notification
from acceltrial.api.spec.outcome import PromotionSpec, ReportSpec
from acceltrial.api.spec.quality import QualitySpec
from acceltrial.api.spec.traffic import MAX_STEPS, Step, TrafficSpec
from acceltrial.api.spec.variants import BaselineSpec, CandidateSpec


class TrialSpec(ApiModel):
    """What to trial, how to move traffic, how to judge it and what it costs."""

    model_config = ConfigDict(
        json_schema_extra=cel_rules(
            cel(
                "self.steps.all(s, duration(s.duration) >= duration(self.analysis.interval))",
                "every step must last at least one analysis.interval, or it could advance "
                "without a measurement",
                ".steps",
            ),
            cel(
                "!self.steps.exists(s, has(s.mirror)) || self.traffic.router == 'gatewayapi'",
                "mirror steps need traffic.router gatewayapi: the replicas router cannot copy "
                "requests",
                ".steps",
            ),
            cel(
                "!has(self.capacityTest) || self.traffic.router == 'gatewayapi'",
                "capacityTest needs traffic.router gatewayapi: with the replicas router the "
                "candidate's pods join the baseline Service as soon as they are ready, so users "
                "would reach it while it is load-tested",
                ".capacityTest",
            ),
            cel(
                "!has(self.quality) || self.traffic.router == 'gatewayapi'",
                "quality needs traffic.router gatewayapi: with the replicas router the "
                "candidate's pods join the baseline Service as soon as they are ready, so users "
                "would reach it before its answers are checked",
                ".quality",
            ),
        )
    )

    baseline: BaselineSpec
    """The GPU Deployment serving the model today."""
    candidate: CandidateSpec
    """The Neuron variant to trial."""
    traffic: TrafficSpec
    """How traffic moves between the two."""
    steps: list[Step] = Field(
        min_length=1,
        max_length=MAX_STEPS,
        json_schema_extra=cel_rules(
            cel(
                "["
                + ", ".join(str(i) for i in range(1, MAX_STEPS))
                + "].all(i, i >= size(self) || !has(self[i - 1].weight) || "
                "(has(self[i].weight) && self[i].weight > self[i - 1].weight))",
                "step weights must increase strictly from one step to the next, and mirror "
                "steps come before every weighted step",
            ),
            cel(
                "self.exists(s, has(s.weight))",
                "give at least one step with a weight: mirror steps alone never serve a user",
            ),
        ),
    )
    """Steps, in order: optional mirror (shadow) steps first, then traffic steps whose weights
    increase strictly within 1..100."""
    analysis: AnalysisSpec
    """How each step is judged."""
    promotion: PromotionSpec = PromotionSpec()
    """What happens after the last step passes."""
    economics: EconomicsSpec = EconomicsSpec()
    """How cost per useful result is computed."""
    quality: QualitySpec | None = None
    """A prompt set both variants answer once the candidate is Available, before any user
    request (or mirrored copy) reaches it, and the criteria the candidate's answers must meet
    (docs/quality.md)."""
    capacity_test: CapacityTestSpec | None = None
    """A load sweep of the candidate's pods once it is Available (and has passed quality),
    before any user's request reaches it: how much one pod carries at the SLO
    (docs/capacity-test.md)."""
    notifications: list[Notification] | None = Field(
        default=None,
        max_length=8,
        json_schema_extra=cel_rules(
            cel(
                "self.all(n, self.exists_one(m, m.name == n.name))",
                "notification names must be unique",
            )
        ),
    )
    """Who hears of the trial's events: a webhook, Slack or SNS (docs/notifications.md)."""
    report: ReportSpec | None = None
    """Where the decision report goes besides the <trial>-report ConfigMap."""
    progress_deadline: Duration = "10m"
    """How long the candidate may take to become Available before the trial rolls back."""
    capacity: CapacitySpec = CapacitySpec()
    """Where the candidate's nodes come from: existing Nodes, Karpenter or an EKS node group."""
