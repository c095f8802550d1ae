"""What the simulated trainers export, for a real Prometheus to scrape: the training script's
own counter and the accelerator exporters of the nodes the trainer pods run on.

- ``train_tokens_total`` (a counter, labelled ``namespace``, ``pod``, ``container``): the tokens
  the Job has trained on, exported by its first pod (rank 0) as a training script's metrics
  endpoint does, grown at each step's line (sandbox/trainer.py ``Script.tokens_by``).
- dcgm-exporter on each GPU node and neuron-monitor on each Neuron node, in the shapes of
  sandbox/fleet/accelerators.py (their sources are cited there): a trainer pod holds its
  ``nvidia.com/gpu`` GPUs, or two NeuronCores per ``aws.amazon.com/neuron`` device (trn1,
  trn2 in its default logical-core mode), busy at its ``utilization`` between its first and
  its last step, and at a trickle before and after.

The pods come from the real control plane's pod log server (sandbox/realplane/pod_logs.py),
which plays them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from acceltrial_testbed.sandbox.fleet.accelerators import (
    ExporterOptions,
    Node,
    NodeExporter,
    Occupant,
)
from acceltrial_testbed.sandbox.realplane.pod_logs import TrainerPod
from acceltrial_testbed.sandbox.trainer import Script

Playing = Callable[[], list[tuple[TrainerPod, Script, float]]]
IDLE_UTILIZATION = 0.02
"""What an accelerator shows while its pod loads or waits (a runtime holds it, barely busy)."""
CORES_PER_DEVICE = 2


class TrainerMetrics(Collector):
    """The trainers' counter; :meth:`node_exporters` gives their nodes' exporters."""

    def __init__(self, playing: Playing) -> None:
        self._playing = playing

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            "train_tokens", "Tokens the training job has trained on.", labels=["namespace", "pod",
                                                                                "container"]
        )  # fmt: skip
        for pod, script, elapsed in self._playing():
            if pod.rank_zero and pod.role != "precompile":
                family.add_metric([pod.namespace, pod.name, pod.container],
                                  script.tokens_by(elapsed))  # fmt: skip
        yield family

    def occupants(self, node: str) -> list[Occupant]:
        """The trainer pods on ``node`` as its exporter sees them."""
        found = []
        for pod, script, elapsed in self._playing():
            if pod.node != node or elapsed >= script.ends_at:
                continue
            # A busy accelerator's reading moves a little from scrape to scrape.
            wobble = 1 + 0.02 * math.sin(1.3 * elapsed)
            busy = (
                min(1.0, pod.utilization * wobble) if script.training(elapsed) else IDLE_UTILIZATION
            )
            cores = CORES_PER_DEVICE * pod.neuron_devices
            exporter, units = ("dcgm", pod.gpus) if pod.gpus else ("neuron", cores)
            found.append(Occupant(pod.namespace, pod.name, pod.container, exporter, units, busy))
        return found

    def node_exporters(self, nodes: list[dict[str, Any]]) -> list[NodeExporter]:
        """dcgm-exporter on every GPU node, neuron-monitor on every Neuron node, with the
        Kubernetes labels (dcgm-exporter's mapping, neuron-monitor's --enable-k8s-info)."""
        options = ExporterOptions(kubernetes_labels=True)
        found = [Node.of(manifest) for manifest in nodes]
        return [
            NodeExporter(exporter, node, options, self.occupants)
            for node in sorted(found, key=lambda n: n.name)
            for exporter in node.exporters()
        ]
