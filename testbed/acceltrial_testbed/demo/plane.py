"""The local control plane a demo runs on, with the AcceleratorTrial CRD installed.

``--control-plane real`` starts the upstream kube-apiserver, controllers, scheduler and etcd
built by ``make control-plane`` (kwok plays the kubelet); ``emulator`` starts the sandbox's own
API server (no setup); ``auto`` picks the real one when it is built.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import yaml

from acceltrial.api.crd import render_crd
from acceltrial.api.kinds import KINDS
from acceltrial_testbed.demo.cluster import Client
from acceltrial_testbed.sandbox.choices import ControlPlane, uses_real_control_plane
from acceltrial_testbed.sandbox.cluster import Sandbox
from acceltrial_testbed.sandbox.realplane.binaries import MissingBinaries, find_binaries
from acceltrial_testbed.sandbox.realplane.plane import RealControlPlane
from acceltrial_testbed.sandbox.realplane.processes import StartError
from acceltrial_testbed.sandbox.topology import Topology

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
EMULATOR_READY_DELAY = 0.5
"""Seconds a bound pod takes to turn Ready on the emulator (kwok's stages decide on the real
control plane)."""

LocalCluster = Sandbox | RealControlPlane
CannotStart = (MissingBinaries, StartError)
"""What :func:`local_cluster` raises when the real control plane is not built or fails to start
(the message says why and what to run)."""


def check_available(choice: ControlPlane) -> None:
    """Raise :class:`MissingBinaries` early when ``real`` is asked for and not built."""
    if choice == "real":
        find_binaries()


@contextlib.contextmanager
def local_cluster(choice: ControlPlane, topology: Topology | None) -> Iterator[LocalCluster]:
    """Start the chosen control plane with the CRD; stop it (every process) on leaving."""
    if uses_real_control_plane(choice):
        with RealControlPlane(topology=topology) as plane:  # installs the CRD itself
            yield plane
        return
    with Sandbox(ready_delay=EMULATOR_READY_DELAY, topology=topology) as sandbox:
        for kind in KINDS:
            Client(sandbox.access).create(CRDS, yaml.safe_load(render_crd(kind)))
        yield sandbox


def describe(cluster: LocalCluster) -> str:
    """What the demo says it started."""
    if isinstance(cluster, RealControlPlane):
        return (
            f"real control plane (kube-apiserver, etcd, controllers, scheduler; kwok plays the "
            f"kubelet) at {cluster.url}, ready in {cluster.start_seconds:.1f}s"
        )
    return f"local control plane (emulator) at {cluster.url}"


def component_pids(cluster: LocalCluster) -> dict[str, int]:
    """The processes of a real control plane, by name (the emulator runs in this process)."""
    if isinstance(cluster, RealControlPlane):
        return {c.name: c.process.pid for c in cluster.components}
    return {}
