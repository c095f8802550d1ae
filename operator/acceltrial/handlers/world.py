"""What one trial sees of the cluster and Prometheus, and how the engine's actions are applied.

:class:`TrialWorld` gathers an :class:`~acceltrial.engine.lifecycle.Observation` (preflight,
routing, candidate readiness, a measurement when due) and executes the actions the engine
returns, through the kube gateway and the routing, capacity and metrics ports. It decides
nothing itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cached_property
from typing import Any

from acceltrial.api.durations import duration_seconds
from acceltrial.api.spec import TrialSpec
from acceltrial.api.status import (
    TERMINAL_PHASES,
    CriterionResult,
    HpaOriginal,
    OriginalRouting,
    SampleCounts,
    TrialStatus,
)
from acceltrial.engine.analysis import (
    Judgement,
    MeasurementWindow,
    applicable,
    judge,
    plan,
    round_outcome,
)
from acceltrial.engine.candidate import (
    PROMOTED_BY_LABEL,
    TrialRef,
    candidate_labels,
    candidate_name,
    derive_deployment,
    derive_service,
)
from acceltrial.engine.costing import (
    CostWindow,
    VariantResources,
    cost_figures,
    economics_status,
    judge_cost_criterion,
    observed_values,
    plan_cost_inputs,
)
from acceltrial.engine.gitops import committable
from acceltrial.engine.lifecycle import (
    Action,
    DeployCandidate,
    HandOverCandidate,
    Measurement,
    Observation,
    RemoveCandidate,
    RestoreAutoscaler,
    RestoreRouting,
    RetargetAutoscaler,
    ScaleBaselineToZero,
    ScaleCandidate,
    SetWeight,
    UserAction,
    measurement_due,
)
from acceltrial.engine.metric_check import answers, plan_check, unjudgeable
from acceltrial.engine.promotion import AutoscalerBounds
from acceltrial.engine.queries import COST_METRICS, TemplateError, Variant, VariantTarget
from acceltrial.engine.report import ReportInputs, update_report
from acceltrial.engine.targets import baseline_pods, variant_target
from acceltrial.kube.gateway import Kube, KubeError
from acceltrial.providers.capacity.nodes import schedulable_problem
from acceltrial.providers.metrics.factory import ResolvedSecrets, client_for
from acceltrial.providers.metrics.port import collect
from acceltrial.providers.pricing.sources import price_sources
from acceltrial.providers.pricing.trial import variant_resources
from acceltrial.providers.reports.configmap import ConfigMapReports
from acceltrial.providers.reports.s3 import S3Reports
from acceltrial.providers.routing.gatewayapi import GatewayApiRouter
from acceltrial.providers.routing.port import Router
from acceltrial.providers.routing.replicas import ReplicasRouter

Manifest = dict[str, Any]


@dataclass
class TrialWorld:
    """The cluster and metrics as one trial sees them."""

    kube: Kube
    spec: TrialSpec
    trial: TrialRef
    measured_pods: dict[Variant, int] | None = field(default=None, init=False)
    """Pods each variant had when this tick's measurement ran, before any action scaled them."""

    @property
    def baseline_name(self) -> str:
        return self.spec.baseline.deployment_ref.name

    @property
    def baseline_service_name(self) -> str:
        ref = self.spec.baseline.service_ref
        return ref.name if ref is not None else self.baseline_name

    @cached_property
    def router(self) -> Router:
        routing = self.spec.traffic.gatewayapi
        if self.spec.traffic.router == "gatewayapi" and routing is not None:
            return GatewayApiRouter(
                self.kube,
                namespace=routing.http_route_ref.namespace or self.trial.namespace,
                route_name=routing.http_route_ref.name,
                rule_index=routing.rule_index,
                baseline_service=self.baseline_service_name,
                candidate_service=candidate_name(self.trial),
                port=routing.port,
                trial=f"{self.trial.namespace}/{self.trial.name}",
            )
        return ReplicasRouter(
            self.kube, self.trial.namespace, self.baseline_name, candidate_name(self.trial)
        )

    @cached_property
    def _nodes(self) -> list[Manifest]:
        """The Nodes, read once per tick (a world lives for one tick): preflight's capacity check
        and the variants' instance ids both need them."""
        return self.kube.nodes()

    # -- observing -------------------------------------------------------------------------

    def observe(
        self,
        status: TrialStatus,
        now: datetime,
        generation: int,
        action: UserAction | None,
    ) -> Observation:
        phase = status.phase
        problems, waits = self.preflight() if phase == "Preflight" else ((), ())
        routing = None
        if phase == "Preflight" and not problems and not waits and status.original is None:
            routing = self._snapshot()
        observed_weight = None
        if phase in ("Progressing", "Paused", "BakingIn") and status.step:
            observed_weight = self.router.weight()
        measurement = self.measure(status, now) if measurement_due(self.spec, status, now) else None
        candidate = self.kube.deployment(self.trial.namespace, candidate_name(self.trial))
        return Observation(
            now=now,
            generation=generation,
            preflight_problems=problems,
            preflight_waits=waits,
            routing=routing,
            observed_weight=observed_weight,
            candidate_available=candidate is not None and _available(candidate),
            candidate_available_replicas=_available_replicas(candidate),
            autoscaler=self._autoscaler(status) if phase == "Promoting" else None,
            measurement=measurement,
            action=action,
        )

    def _snapshot(self) -> OriginalRouting:
        """The routing as found, with the baseline's replicas and autoscaler to remember across
        promotion."""
        baseline = self.kube.deployment(self.trial.namespace, self.baseline_name) or {}
        replicas = baseline.get("spec", {}).get("replicas")
        routing = self.router.snapshot()
        if routing.baseline_replicas is None and isinstance(replicas, int):
            routing = routing.model_copy(update={"baseline_replicas": replicas})
        hpa = self._baseline_autoscaler()
        if hpa is not None:
            routing = routing.model_copy(update={"hpa": hpa})
        return routing

    def _baseline_autoscaler(self) -> HpaOriginal | None:
        """The HorizontalPodAutoscaler that scales the baseline Deployment, if one does."""
        for hpa in self.kube.autoscalers(self.trial.namespace):
            target = hpa.get("spec", {}).get("scaleTargetRef") or {}
            if target.get("kind") == "Deployment" and target.get("name") == self.baseline_name:
                return HpaOriginal(name=hpa["metadata"]["name"], scale_target_ref=target)
        return None

    def _autoscaler(self, status: TrialStatus) -> AutoscalerBounds | None:
        recorded = status.original.hpa if status.original else None
        if recorded is None:
            return None
        hpa = self.kube.autoscaler(self.trial.namespace, recorded.name)
        if hpa is None:
            return None
        spec = hpa.get("spec", {})
        return AutoscalerBounds(
            recorded.name, int(spec.get("minReplicas", 1)), int(spec.get("maxReplicas", 1))
        )

    def candidate_handed_over(self) -> bool:
        """Whether the candidate Deployment exists and no longer belongs to this trial."""
        deployment = self.kube.deployment(self.trial.namespace, candidate_name(self.trial))
        if deployment is None:
            return False
        owners = deployment.get("metadata", {}).get("ownerReferences") or []
        return all(owner.get("uid") != self.trial.uid for owner in owners)

    def preflight(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """What prevents the trial from starting, and what it waits for (a baseline still rolling
        out, as when GitOps applies it together with the trial); nothing is changed."""
        namespace = self.trial.namespace
        baseline = self.kube.deployment(namespace, self.baseline_name)
        if baseline is None:
            return (f"baseline Deployment {namespace}/{self.baseline_name} not found",), ()
        waits: tuple[str, ...] = ()
        if not _available(baseline):
            waits = (f"baseline Deployment {self.baseline_name} is not Available",)
        problems = []
        if self.kube.service(namespace, self.baseline_service_name) is None:
            problems.append(f"baseline Service {namespace}/{self.baseline_service_name} not found")
        problems += self.router.problems()
        problems += self._capacity_problems()
        problems += self._competing_trials()
        if not problems and not waits:
            # Before any traffic moves: the criteria must be measurable on the baseline.
            waits = tuple(self.metric_problems(datetime.now(UTC)))
        return tuple(problems), waits

    def _capacity_problems(self) -> list[str]:
        candidate = self.spec.candidate
        if candidate.neuron_cores is not None:
            resource, amount = "aws.amazon.com/neuroncore", candidate.neuron_cores
        else:
            resource, amount = "aws.amazon.com/neuron", candidate.neuron_devices or 1
        problem = schedulable_problem(self._nodes, candidate.instance_type, resource, amount)
        return [problem] if problem else []

    def _competing_trials(self) -> list[str]:
        others = []
        for trial in self.kube.trials(self.trial.namespace):
            meta, body = trial.get("metadata", {}), trial.get("spec", {})
            same_baseline = body.get("baseline", {}).get("deploymentRef", {}).get("name")
            phase = trial.get("status", {}).get("phase")
            if (
                meta.get("uid") != self.trial.uid
                and same_baseline == self.baseline_name
                and phase not in (*TERMINAL_PHASES, None, "Pending")
            ):
                others.append(meta.get("name"))
        return [
            f"trial {name} already runs on baseline {self.baseline_name}; one trial per baseline"
            for name in others
        ]

    def measure(self, status: TrialStatus, now: datetime) -> Measurement:
        weight = status.canary_weight or 0
        analysis = self.spec.analysis
        interval = duration_seconds(analysis.interval)
        start = status.step_started_at or now - timedelta(seconds=interval)
        baking = status.phase == "BakingIn"
        # At 100% the baseline serves nothing: compare with its last window of traffic.
        baseline_end = status.step_started_at if baking else None
        window = MeasurementWindow(start, now, max(1.0, interval / 4), baseline_end)
        cost_window = CostWindow(now, interval, weight, status.step_started_at, baking)
        from_steps = status.economics.baseline_from_steps if status.economics else None
        targets = self._targets()
        self.measured_pods = {v: len(t.pods) for v, t in targets.items()}
        try:
            planned = plan(analysis, targets, weight) + plan_cost_inputs(analysis, targets)
        except TemplateError as error:
            return Measurement("Error", f"a query cannot be rendered: {error}")
        collection = collect(planned, self._prometheus(), window)
        readings = collection.readings
        costs = cost_figures(
            readings,
            targets,
            self._cost_resources(),
            self.spec.economics,
            production_from="candidate" if baking else "both",
        )
        judgements = [
            judge_cost_criterion(c, readings, costs, cost_window, from_steps)
            if c.metric in COST_METRICS
            else judge(
                c, readings.get((c.name, "baseline")), readings.get((c.name, "candidate")), analysis
            )
            for c in applicable(analysis, weight)
        ]
        outcome, reason = round_outcome(judgements)
        step = 0 if status.phase == "BakingIn" else status.step or 0
        results = tuple(_result(j, step, weight, now) for j in judgements)
        production = costs.comparison.production
        measured = production.requests_per_second or production.tokens_per_second
        # Without any measured traffic (Prometheus down, say) the last figures stay.
        economics = economics_status(costs, readings, cost_window, from_steps) if measured else None
        observed = observed_values(readings)
        return Measurement(outcome, reason, results, economics, observed)

    def _cost_resources(self) -> dict[Variant, VariantResources]:
        baseline = self.kube.deployment(self.trial.namespace, self.baseline_name) or {}
        catalog, source = price_sources(self.spec.economics.pricing)
        return variant_resources(self.spec, baseline, catalog, source)

    def _targets(self) -> dict[Variant, VariantTarget]:
        namespace = self.trial.namespace
        baseline = self.kube.deployment(namespace, self.baseline_name) or {}
        selector = baseline.get("spec", {}).get("selector", {}).get("matchLabels") or {}
        nodes = self._nodes
        return {
            "baseline": variant_target(
                "baseline", namespace, self.baseline_name,
                baseline_pods(self.kube.pods(namespace, selector), self.trial.name),
                nodes=nodes, accelerator="gpu",
            ),
            "candidate": variant_target(
                "candidate", namespace, candidate_name(self.trial),
                self.kube.pods(namespace, candidate_labels(self.trial)),
                nodes=nodes, accelerator="neuron",
            ),
        }  # fmt: skip

    def metric_problems(self, now: datetime) -> list[str]:
        """Every criterion's query run for the baseline: what cannot be judged, and why."""
        targets = self._targets()
        try:
            planned = plan_check(self.spec.analysis, targets, ("baseline",))
        except TemplateError as error:
            return [f"a query cannot be rendered: {error}"]
        interval = timedelta(seconds=duration_seconds(self.spec.analysis.interval))
        window = MeasurementWindow(now - interval, now, max(1.0, interval.total_seconds() / 4))
        readings = collect(planned, self._prometheus(), window).readings
        return unjudgeable(answers(planned, readings))

    def _prometheus(self) -> Any:
        prometheus = self.spec.analysis.prometheus
        namespace = self.trial.namespace
        secrets = ResolvedSecrets()
        auth, tls = prometheus.auth, prometheus.tls
        if auth is not None and auth.bearer_token_secret_ref is not None:
            ref = auth.bearer_token_secret_ref
            secrets = ResolvedSecrets(
                bearer_token=self.kube.secret_value(namespace, ref.name, ref.key)
            )
        if auth is not None and auth.basic_auth_secret_ref is not None:
            name = auth.basic_auth_secret_ref.name
            user = self.kube.secret_value(namespace, name, "username")
            password = self.kube.secret_value(namespace, name, "password")
            if user is not None and password is not None:
                secrets = ResolvedSecrets(basic=(user, password))
        if tls is not None and tls.ca_secret_ref is not None:
            ref = tls.ca_secret_ref
            secrets = ResolvedSecrets(
                bearer_token=secrets.bearer_token,
                basic=secrets.basic,
                ca_pem=self.kube.secret_value(namespace, ref.name, ref.key),
            )
        return client_for(prometheus, secrets)

    # -- reporting -------------------------------------------------------------------------

    def write_report(
        self, status: TrialStatus, measurement: Measurement | None, now: datetime
    ) -> None:
        """Bring the ``<trial>-report`` ConfigMap up to date with this tick."""
        store = ConfigMapReports(self.kube)
        resources = self._cost_resources()
        inputs = ReportInputs(
            spec=self.spec,
            status=status,
            trial=self.trial,
            now=now,
            measurement=measurement,
            # Pods serving when measured, not after this tick's actions scaled or removed them.
            replicas=self.measured_pods if measurement else None,
            price_sources={v: r.price_source for v, r in resources.items()},
            gitops=self._gitops(status) if status.phase == "Promoted" else None,
        )
        report = update_report(store.load(self.trial), inputs)
        store.save(self.trial, report)
        destination = self.spec.report.s3 if self.spec.report else None
        if destination is not None and status.phase in TERMINAL_PHASES:
            S3Reports().upload(destination, self.trial, report)

    def _gitops(self, status: TrialStatus) -> dict[str, Any]:
        """What to commit after promotion so Git matches the cluster (else a GitOps tool would
        put the old weights back, or scale the baseline up again): the candidate Deployment and
        Service, the route, the re-targeted autoscaler and the baseline at zero, as they are."""
        namespace, name = self.trial.namespace, candidate_name(self.trial)
        hpa = status.original.hpa if status.original else None
        found = {
            "deployment": self.kube.deployment(namespace, name),
            "service": self.kube.service(namespace, name),
            "horizontalPodAutoscaler": hpa and self.kube.autoscaler(namespace, hpa.name),
            "baselineDeployment": self.kube.deployment(namespace, self.baseline_name),
        }
        routing = self.spec.traffic.gatewayapi
        if self.spec.traffic.router == "gatewayapi" and routing is not None:
            route_namespace = routing.http_route_ref.namespace or namespace
            found["httpRoute"] = self.kube.http_route(route_namespace, routing.http_route_ref.name)
        manifests = {key: committable(obj) for key, obj in found.items() if obj}
        if hpa is not None and "deployment" in manifests:
            # The autoscaler owns the replica count; a count in Git would fight it.
            manifests["deployment"]["spec"].pop("replicas", None)
        return manifests

    # -- acting ----------------------------------------------------------------------------

    def execute(self, action: Action, status: TrialStatus) -> None:
        """Apply one action; each is idempotent, so a retry after a crash is harmless. A refusal
        says which action it stopped."""
        try:
            self._execute(action, status)
        except KubeError as error:
            raise error.doing(_describe(action, candidate_name(self.trial))) from None

    def _execute(self, action: Action, status: TrialStatus) -> None:
        namespace, name = self.trial.namespace, candidate_name(self.trial)
        if isinstance(action, DeployCandidate):
            baseline = self.kube.deployment(namespace, self.baseline_name)
            service = self.kube.service(namespace, self.baseline_service_name)
            if baseline is None or service is None:
                raise KubeError(404, f"baseline {self.baseline_name} vanished after preflight")
            self.kube.apply(derive_deployment(baseline, service, self.spec, self.trial))
            self.kube.apply(derive_service(service, self.trial))
        elif isinstance(action, SetWeight) and status.original is not None:
            self.router.set_weight(action.weight, status.original)
        elif isinstance(action, RestoreRouting) and status.original is not None:
            self.router.restore(status.original)
        elif isinstance(action, RemoveCandidate):
            self.kube.delete("Service", namespace, name)
            self.kube.delete("Deployment", namespace, name)
        elif isinstance(action, ScaleBaselineToZero):
            self.kube.scale(namespace, self.baseline_name, 0)
        elif isinstance(action, ScaleCandidate):
            self.kube.scale(namespace, name, action.replicas)
        elif isinstance(action, RetargetAutoscaler | RestoreAutoscaler):
            self._point_autoscaler(action, status)
        elif isinstance(action, HandOverCandidate):
            promoted_by = {PROMOTED_BY_LABEL: self.trial.name}
            for kind in ("Deployment", "Service"):
                self.kube.release(kind, namespace, name, self.trial.uid, promoted_by)
            self.router.release()

    def _point_autoscaler(
        self, action: RetargetAutoscaler | RestoreAutoscaler, status: TrialStatus
    ) -> None:
        recorded = status.original.hpa if status.original else None
        if recorded is None:
            return
        target = recorded.scale_target_ref
        if isinstance(action, RetargetAutoscaler):
            candidate = candidate_name(self.trial)
            target = {"apiVersion": "apps/v1", "kind": "Deployment", "name": candidate}
        self.kube.set_autoscaler_target(self.trial.namespace, recorded.name, target)


def _describe(action: Action, candidate: str) -> str:
    """What an action does, for a refusal's message."""
    said: dict[type, str] = {
        DeployCandidate: f"creating the candidate Deployment and Service {candidate}",
        SetWeight: "moving traffic",
        RestoreRouting: "restoring the routing",
        RemoveCandidate: f"removing the candidate {candidate}",
        ScaleBaselineToZero: "scaling the baseline to zero",
        ScaleCandidate: f"scaling the candidate {candidate}",
        RetargetAutoscaler: "pointing the HorizontalPodAutoscaler at the candidate",
        RestoreAutoscaler: "pointing the HorizontalPodAutoscaler back at the baseline",
        HandOverCandidate: f"handing over the candidate {candidate}",
    }
    return said.get(type(action), type(action).__name__)


def _result(judgement: Judgement, step: int, weight: int, now: datetime) -> CriterionResult:
    return CriterionResult(
        criterion=judgement.criterion,
        step=step,
        weight=weight,
        verdict=judgement.verdict,
        baseline=judgement.baseline,
        candidate=judgement.candidate,
        ratio=judgement.ratio,
        samples=SampleCounts(
            baseline=judgement.baseline_samples, candidate=judgement.candidate_samples
        ),
        reason=judgement.reason[:1024],
        at=now,
    )


def _available(deployment: Manifest) -> bool:
    conditions = deployment.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Available" and c.get("status") == "True" for c in conditions)


def _available_replicas(deployment: Manifest | None) -> int:
    if deployment is None:
        return 0
    return int((deployment.get("status") or {}).get("availableReplicas") or 0)


def _labels(obj: Manifest) -> dict[str, str]:
    return dict(obj.get("metadata", {}).get("labels") or {})


def _names(pods: list[Manifest]) -> tuple[str, ...]:
    return tuple(sorted(p["metadata"]["name"] for p in pods))
