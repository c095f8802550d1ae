"""The accelerator exporters, one per node as their DaemonSets run, each its own scrape target.

- **dcgm-exporter** (NVIDIA/dcgm-exporter: internal/pkg/transformation/const.go,
  deployment/values.yaml): ``DCGM_FI_DEV_GPU_UTIL`` (percent) for every GPU of the node, labelled
  ``gpu``, ``UUID``, ``device``, ``modelName``, ``Hostname``; with the Kubernetes mapping (on in
  its chart) a GPU held by a pod also carries that pod's ``pod``, ``namespace``, ``container``.
- **neuron-monitor** with its Prometheus exporter (aws-neuron-sdk: neuron-monitor user guide,
  ``neuron-monitor-prometheus.py``): ``neuroncore_utilization_ratio`` (0-1) for each NeuronCore a
  Neuron runtime uses, labelled ``neuroncore`` and instance-level labels only (``instance_name``,
  ``instance_id``, ``instance_type``, ``availability_zone``, ``region``, ``subnet_id``,
  ``runtime_tag``); with ``--enable-k8s-info`` also the runtime's ``pod``, ``namespace``,
  ``container``. ``instance_id`` is the EC2 instance in the Node's ``spec.providerID``.

Which exporter pod serves a node is :class:`NodeExporter`'s ``pod``: the scrape config gives its
target the labels the Prometheus Operator's relabelling would (``sandbox.servicemonitor``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

Exporter = Literal["dcgm", "neuron"]
GPU_MODELS = {
    "g5": "NVIDIA A10G",
    "g6": "NVIDIA L4",
    "g6e": "NVIDIA L40S",
    "p4d": "NVIDIA A100-SXM4-40GB",
    "p5": "NVIDIA H100 80GB HBM3",
}


@dataclass(frozen=True)
class DaemonSet:
    """Where an exporter runs: its DaemonSet (also its Service's name), namespace, container."""

    name: str
    namespace: str
    container: str
    port: str = "metrics"


DAEMONSETS: dict[Exporter, DaemonSet] = {
    "dcgm": DaemonSet("dcgm-exporter", "monitoring", "exporter"),
    "neuron": DaemonSet("neuron-monitor", "monitoring", "neuron-monitor"),
}


@dataclass(frozen=True)
class ExporterOptions:
    """How one exporter is installed and scraped."""

    kubernetes_labels: bool
    """dcgm-exporter's Kubernetes mapping; neuron-monitor's ``--enable-k8s-info``."""
    honor_labels: bool = False
    """The ServiceMonitor endpoint's ``honorLabels``."""


@dataclass(frozen=True)
class Node:
    """What an exporter on a node reports about it."""

    name: str
    instance_type: str
    zone: str
    instance_id: str
    gpus: int
    neuroncores: int

    @classmethod
    def of(cls, manifest: dict[str, Any]) -> Node:
        labels = manifest["metadata"].get("labels") or {}
        allocatable = (manifest.get("status") or {}).get("allocatable") or {}
        provider = (manifest.get("spec") or {}).get("providerID", "")
        cores = _count(allocatable.get("aws.amazon.com/neuroncore"))
        return cls(
            name=manifest["metadata"]["name"],
            instance_type=labels.get("node.kubernetes.io/instance-type", ""),
            zone=labels.get("topology.kubernetes.io/zone", ""),
            instance_id=provider.rsplit("/", 1)[-1],  # aws:///<zone>/<instance-id>
            gpus=_count(allocatable.get("nvidia.com/gpu")),
            neuroncores=cores or 2 * _count(allocatable.get("aws.amazon.com/neuron")),
        )

    def exporters(self) -> list[Exporter]:
        """The exporters whose DaemonSet runs on this node."""
        found: list[Exporter] = []
        if self.gpus:
            found.append("dcgm")
        if self.neuroncores:
            found.append("neuron")
        return found


def _count(value: Any) -> int:
    text = str(value or "")
    return int(text) if text.isdigit() else 0


@dataclass(frozen=True)
class Occupant:
    """A model-server pod on a node, as an exporter sees it."""

    namespace: str
    pod: str
    container: str
    exporter: str
    units: int
    utilization: float
    """0..1, the same on each of its units."""


class NodeExporter(Collector):
    """One exporter pod: the ``exporter`` DaemonSet's pod on ``node``."""

    def __init__(
        self,
        exporter: Exporter,
        node: Node,
        options: ExporterOptions,
        occupants: Callable[[str], Sequence[Occupant]],
    ) -> None:
        self.exporter = exporter
        self.node = node
        self.options = options
        self.daemonset = DAEMONSETS[exporter]
        self._occupants = occupants

    @property
    def pod(self) -> str:
        """The exporter pod's name: its DaemonSet's, then a suffix fixed by the node."""
        suffix = hashlib.sha256(self.node.name.encode()).hexdigest()[:5]
        return f"{self.daemonset.name}-{suffix}"

    def collect(self) -> Iterator[Metric]:
        occupants = sorted(
            (o for o in self._occupants(self.node.name) if o.exporter == self.exporter),
            key=lambda o: o.pod,
        )
        if self.exporter == "dcgm":
            yield self._dcgm(occupants)
        else:
            yield self._neuron(occupants)

    def _dcgm(self, occupants: Sequence[Occupant]) -> Metric:
        family = GaugeMetricFamily("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).")
        holders = [o for o in occupants for _ in range(o.units)]
        family_model = GPU_MODELS.get(self.node.instance_type.split(".")[0], "NVIDIA GPU")
        for gpu in range(self.node.gpus):
            labels = {
                "gpu": str(gpu),
                "UUID": "GPU-" + _uuid(f"{self.node.name}/{gpu}"),
                "device": f"nvidia{gpu}",
                "modelName": family_model,
                "Hostname": self.node.name,
            }
            holder = holders[gpu] if gpu < len(holders) else None
            if holder is not None and self.options.kubernetes_labels:
                labels |= _kubernetes(holder)
            family.add_sample(family.name, labels, 100 * holder.utilization if holder else 0.0)
        return family

    def _neuron(self, occupants: Sequence[Occupant]) -> Metric:
        family = GaugeMetricFamily("neuroncore_utilization_ratio", "NeuronCore utilization ratio")
        instance = {
            "availability_zone": self.node.zone,
            "instance_id": self.node.instance_id,
            "instance_name": "",
            "instance_type": self.node.instance_type,
            "region": self.node.zone[:-1],
            "subnet_id": "subnet-" + _uuid(self.node.zone)[:17].replace("-", ""),
        }
        core = 0
        for occupant in occupants:
            runtime = {"runtime_tag": str(int(_uuid(occupant.pod)[:4], 16))}
            for _ in range(occupant.units):
                labels = instance | runtime | {"neuroncore": str(core)}
                if self.options.kubernetes_labels:
                    labels |= _kubernetes(occupant)
                family.add_sample(family.name, labels, occupant.utilization)
                core += 1
        return family


def _kubernetes(occupant: Occupant) -> dict[str, str]:
    return {"pod": occupant.pod, "namespace": occupant.namespace, "container": occupant.container}


def _uuid(seed: str) -> str:
    digest = hashlib.sha256(seed.encode()).hexdigest()
    return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"
