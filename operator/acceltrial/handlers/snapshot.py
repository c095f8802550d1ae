"""What one tick of one trial reads of the cluster, each object read at most once.

A :class:`TickSnapshot` lives for one tick. Each object (the baseline Deployment and its
Service, the candidate, the variants' pods, the Nodes, the namespace's trials and autoscalers)
is read the first time a part of the tick asks for it and then kept, so the preflight, the
measurement, the executor and the report writer all see the same objects and the API server
answers each question once. Writes and their read-backs (the routers verify what they wrote) go
around it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from acceltrial.api.spec import TrialSpec
from acceltrial.engine.candidate import TrialRef, candidate_labels, candidate_name
from acceltrial.engine.costing import VariantResources
from acceltrial.engine.metrics import Variant, VariantTarget
from acceltrial.engine.targets import baseline_pods as without_trial_pods
from acceltrial.engine.targets import variant_target
from acceltrial.handlers.lazy import lazy
from acceltrial.kube.gateway import Kube
from acceltrial.kube.nodes import NodeCache
from acceltrial.providers.pricing.sources import price_sources
from acceltrial.providers.pricing.trial import variant_resources

Manifest = dict[str, Any]
NODES = NodeCache()
"""The process's Nodes by name, shared by every trial's ticks."""


@dataclass
class TickSnapshot:
    """The objects one trial's tick needs, read lazily and once."""

    kube: Kube
    spec: TrialSpec
    trial: TrialRef

    @property
    def namespace(self) -> str:
        return self.trial.namespace

    @property
    def baseline_name(self) -> str:
        return self.spec.baseline.deployment_ref.name

    @property
    def baseline_service_name(self) -> str:
        ref = self.spec.baseline.service_ref
        return ref.name if ref is not None else self.baseline_name

    @property
    def candidate_name(self) -> str:
        return candidate_name(self.trial)

    @lazy
    def baseline(self) -> Manifest | None:
        return self.kube.deployment(self.namespace, self.baseline_name)

    @lazy
    def baseline_service(self) -> Manifest | None:
        return self.kube.service(self.namespace, self.baseline_service_name)

    @lazy
    def candidate(self) -> Manifest | None:
        return self.kube.deployment(self.namespace, self.candidate_name)

    known_trials: Sequence[Manifest] | None = None
    """The trials on this baseline as the operator's index holds them (handlers/trials.py);
    None: list the namespace's trials."""

    @lazy
    def nodes(self) -> list[Manifest]:
        """Every Node, for preflight's capacity check, one listing shared by the trials that
        ask while another is in flight (a measurement reads only its pods' Nodes, through
        :data:`NODES`)."""
        return self.kube.recent_nodes()

    @lazy
    def trials(self) -> list[Manifest]:
        """The trials on this baseline, or every trial of the namespace (one trial per
        baseline)."""
        if self.known_trials is not None:
            return list(self.known_trials)
        return self.kube.trials(self.namespace)

    @lazy
    def autoscalers(self) -> list[Manifest]:
        return self.kube.autoscalers(self.namespace)

    @lazy
    def baseline_pods(self) -> list[Mapping[str, Any]]:
        """The baseline Deployment's pods, without the trial's own."""
        selector = (self.baseline or {}).get("spec", {}).get("selector", {}).get("matchLabels")
        return without_trial_pods(self.kube.pods(self.namespace, selector or {}), self.trial.name)

    @lazy
    def targets(self) -> dict[Variant, VariantTarget]:
        """Each variant's pods and the instance ids of their nodes, as the queries select them."""
        pods: dict[Variant, Sequence[Mapping[str, Any]]] = {
            "baseline": self.baseline_pods,
            "candidate": self.kube.pods(self.namespace, candidate_labels(self.trial)),
        }  # fmt: skip
        hosts = (p.get("spec", {}).get("nodeName") for each in pods.values() for p in each)
        nodes = NODES.named(self.kube, hosts)
        return {
            "baseline": variant_target("baseline", self.namespace, self.baseline_name,
                                       pods["baseline"], nodes=nodes, accelerator="gpu"),
            "candidate": variant_target("candidate", self.namespace, self.candidate_name,
                                        pods["candidate"], nodes=nodes, accelerator="neuron"),
        }  # fmt: skip

    @lazy
    def resources(self) -> dict[Variant, VariantResources]:
        """What each variant's pods cost and take (prices may come from the AWS Price List)."""
        catalog, source = price_sources(self.spec.economics.pricing)
        return variant_resources(self.spec, self.baseline or {}, catalog, source)
