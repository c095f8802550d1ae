"""What one trial sees of the cluster and Prometheus, and how the engine's actions are applied.

:class:`TrialWorld` gathers an :class:`~acceltrial.engine.lifecycle.Observation` (preflight,
routing, candidate readiness, a measurement when due) and executes the actions the engine
returns, through the kube gateway and the routing, capacity and metrics ports. It decides
nothing itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cached_property
from typing import Any

from acceltrial.api.durations import duration_seconds
from acceltrial.api.spec import Criterion, TrialSpec
from acceltrial.api.status import (
    TERMINAL_PHASES,
    CriterionResult,
    OriginalRouting,
    SampleCounts,
    TrialStatus,
)
from acceltrial.engine.analysis import (
    Judgement,
    MeasurementWindow,
    Reading,
    applicable,
    judge,
    judge_cost,
    plan,
    round_outcome,
)
from acceltrial.engine.candidate import (
    VARIANT_LABEL,
    TrialRef,
    candidate_labels,
    candidate_name,
    derive_deployment,
    derive_service,
)
from acceltrial.engine.costing import (
    CostFigures,
    VariantResources,
    cost_figures,
    observed_values,
    plan_cost_inputs,
)
from acceltrial.engine.economics import cost_criterion_values, to_status
from acceltrial.engine.gitops import committable
from acceltrial.engine.lifecycle import (
    Action,
    DeployCandidate,
    Measurement,
    Observation,
    RemoveCandidate,
    RestoreRouting,
    ScaleBaselineToZero,
    SetWeight,
    UserAction,
    measurement_due,
)
from acceltrial.engine.queries import COST_METRICS, TemplateError, Variant, VariantTarget
from acceltrial.engine.report import ReportInputs, update_report
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
            )
        return ReplicasRouter(
            self.kube, self.trial.namespace, self.baseline_name, candidate_name(self.trial)
        )

    # -- observing -------------------------------------------------------------------------

    def observe(
        self,
        status: TrialStatus,
        now: datetime,
        generation: int,
        action: UserAction | None,
    ) -> Observation:
        phase = status.phase
        problems = tuple(self.preflight()) if phase == "Preflight" else ()
        routing = None
        if phase == "Preflight" and not problems and status.original is None:
            routing = self._snapshot()
        observed_weight = None
        if phase in ("Progressing", "Paused", "BakingIn") and status.step:
            observed_weight = self.router.weight()
        measurement = self.measure(status, now) if measurement_due(self.spec, status, now) else None
        return Observation(
            now=now,
            generation=generation,
            preflight_problems=problems,
            routing=routing,
            observed_weight=observed_weight,
            candidate_available=self.candidate_available(),
            measurement=measurement,
            action=action,
        )

    def _snapshot(self) -> OriginalRouting:
        """The routing as found, with the baseline's replicas to remember across promotion."""
        baseline = self.kube.deployment(self.trial.namespace, self.baseline_name) or {}
        replicas = baseline.get("spec", {}).get("replicas")
        routing = self.router.snapshot()
        if routing.baseline_replicas is None and isinstance(replicas, int):
            routing = routing.model_copy(update={"baseline_replicas": replicas})
        return routing

    def preflight(self) -> list[str]:
        """Everything that prevents the trial from starting; nothing is changed."""
        namespace = self.trial.namespace
        baseline = self.kube.deployment(namespace, self.baseline_name)
        if baseline is None:
            return [f"baseline Deployment {namespace}/{self.baseline_name} not found"]
        problems = []
        if not _available(baseline):
            problems.append(f"baseline Deployment {self.baseline_name} is not Available")
        if self.kube.service(namespace, self.baseline_service_name) is None:
            problems.append(f"baseline Service {namespace}/{self.baseline_service_name} not found")
        problems += self.router.problems()
        problems += self._capacity_problems()
        problems += self._competing_trials()
        return problems

    def _capacity_problems(self) -> list[str]:
        candidate = self.spec.candidate
        if candidate.neuron_cores is not None:
            resource, amount = "aws.amazon.com/neuroncore", candidate.neuron_cores
        else:
            resource, amount = "aws.amazon.com/neuron", candidate.neuron_devices or 1
        problem = schedulable_problem(self.kube.nodes(), candidate.instance_type, resource, amount)
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

    def candidate_available(self) -> bool:
        deployment = self.kube.deployment(self.trial.namespace, candidate_name(self.trial))
        return deployment is not None and _available(deployment)

    def measure(self, status: TrialStatus, now: datetime) -> Measurement:
        weight = status.canary_weight or 0
        analysis = self.spec.analysis
        interval = duration_seconds(analysis.interval)
        start = status.step_started_at or now - timedelta(seconds=interval)
        baking = status.phase == "BakingIn"
        # At 100% the baseline serves nothing: compare with its last window of traffic.
        baseline_end = status.step_started_at if baking else None
        window = MeasurementWindow(start, now, max(1.0, interval / 4), baseline_end)
        targets = self._targets()
        try:
            planned = plan(analysis, targets, weight) + plan_cost_inputs(analysis, targets)
        except TemplateError as error:
            return Measurement("Error", f"a query cannot be rendered: {error}")
        collection = collect(planned, self._prometheus(), window)
        costs = cost_figures(
            collection.readings,
            targets,
            self._cost_resources(),
            self.spec.economics,
            production_from="candidate" if baking else "both",
        )
        judgements = [
            self._judge(c, collection.readings, costs) for c in applicable(analysis, weight)
        ]
        outcome, reason = round_outcome(judgements)
        step = 0 if status.phase == "BakingIn" else status.step or 0
        results = tuple(_result(j, step, weight, now) for j in judgements)
        production = costs.comparison.production
        measured = production.requests_per_second or production.tokens_per_second
        # Without any measured traffic (Prometheus down, say) the last figures stay.
        economics = to_status(costs.comparison) if measured else None
        observed = observed_values(collection.readings)
        return Measurement(outcome, reason, results, economics, observed)

    @staticmethod
    def _judge(
        criterion: Criterion, readings: Mapping[tuple[str, Variant], Reading], costs: CostFigures
    ) -> Judgement:
        if criterion.metric in COST_METRICS:
            baseline, candidate = cost_criterion_values(costs.comparison, criterion.metric)
            return judge_cost(criterion, baseline, candidate, costs.missing)
        return judge(
            criterion,
            readings.get((criterion.name, "baseline")),
            readings.get((criterion.name, "candidate")),
        )

    def _cost_resources(self) -> dict[Variant, VariantResources]:
        baseline = self.kube.deployment(self.trial.namespace, self.baseline_name) or {}
        catalog, source = price_sources(self.spec.economics.pricing)
        return variant_resources(self.spec, baseline, catalog, source)

    def _targets(self) -> dict[Variant, VariantTarget]:
        namespace = self.trial.namespace
        baseline = self.kube.deployment(namespace, self.baseline_name) or {}
        selector = baseline.get("spec", {}).get("selector", {}).get("matchLabels") or {}
        baseline_pods = [
            p for p in self.kube.pods(namespace, selector) if VARIANT_LABEL not in _labels(p)
        ]
        candidate_pods = self.kube.pods(namespace, candidate_labels(self.trial))
        return {
            "baseline": VariantTarget(
                "baseline", namespace, self.baseline_name, _names(baseline_pods), "gpu"
            ),
            "candidate": VariantTarget(
                "candidate", namespace, candidate_name(self.trial), _names(candidate_pods), "neuron"
            ),
        }

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
            # Pods serving when measured: after a rollback the candidate has none left.
            replicas={v: len(t.pods) for v, t in self._targets().items()} if measurement else None,
            price_sources={v: r.price_source for v, r in resources.items()},
            gitops=self._gitops() if status.phase == "Promoted" else None,
        )
        report = update_report(store.load(self.trial), inputs)
        store.save(self.trial, report)
        destination = self.spec.report.s3 if self.spec.report else None
        if destination is not None and status.phase in TERMINAL_PHASES:
            S3Reports().upload(destination, self.trial, report)

    def _gitops(self) -> dict[str, Any]:
        """What to commit after promotion so Git matches the cluster (else a GitOps tool would
        put the old weights back): the candidate Deployment and the route as they are now."""
        manifests: dict[str, Any] = {}
        deployment = self.kube.deployment(self.trial.namespace, candidate_name(self.trial))
        if deployment is not None:
            manifests["deployment"] = committable(deployment)
        routing = self.spec.traffic.gatewayapi
        if self.spec.traffic.router == "gatewayapi" and routing is not None:
            namespace = routing.http_route_ref.namespace or self.trial.namespace
            route = self.kube.http_route(namespace, routing.http_route_ref.name)
            if route is not None:
                manifests["httpRoute"] = committable(route)
        return manifests

    # -- acting ----------------------------------------------------------------------------

    def execute(self, action: Action, status: TrialStatus) -> None:
        """Apply one action; each is idempotent, so a retry after a crash is harmless."""
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


def _labels(obj: Manifest) -> dict[str, str]:
    return dict(obj.get("metadata", {}).get("labels") or {})


def _names(pods: list[Manifest]) -> tuple[str, ...]:
    return tuple(sorted(p["metadata"]["name"] for p in pods))
