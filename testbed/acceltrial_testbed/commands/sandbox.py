"""``acceltrial sandbox up``: serve a local cluster until interrupted.

``--control-plane`` picks the backend: ``emulator`` (the sandbox's own API server, no setup),
``real`` (the upstream kube-apiserver, controllers, scheduler and etcd built by
``make control-plane``, with kwok playing the kubelet) or ``auto`` (real when built, else the
emulator).
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import yaml
from pydantic import ValidationError

from acceltrial_testbed.sandbox.choices import ControlPlane, uses_real_control_plane
from acceltrial_testbed.sandbox.cluster import Sandbox
from acceltrial_testbed.sandbox.realplane.binaries import MissingBinaries
from acceltrial_testbed.sandbox.realplane.plane import RealControlPlane
from acceltrial_testbed.sandbox.realplane.processes import StartError
from acceltrial_testbed.sandbox.topology import Topology, load_topology


@dataclass(frozen=True)
class SandboxOptions:
    port: int
    kubeconfig: Path
    topology: Path | None = None
    ready_delay: float = 2.0
    control_plane: ControlPlane = "emulator"


def sandbox_up(options: SandboxOptions, out: TextIO, stop: threading.Event | None = None) -> int:
    """Start a sandbox, say where it is, and serve until SIGINT/SIGTERM (or ``stop`` is set)."""
    try:
        topology = load_topology(options.topology)
    except (OSError, yaml.YAMLError, ValidationError) as error:
        print(f"cannot read the topology {options.topology}: {error}", file=sys.stderr)
        return 2
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.set())
    try:
        with _serve(options, topology) as (url, kubeconfig):
            print(f"sandbox API server at {url}", file=out)
            print(f"kubeconfig written to {kubeconfig}", file=out)
            print(f"  export KUBECONFIG={kubeconfig}", file=out, flush=True)
            stop.wait()
    except (MissingBinaries, StartError) as error:
        print(f"acceltrial sandbox up: {error}", file=sys.stderr)
        return 1
    print("sandbox stopped", file=out, flush=True)
    return 0


@contextlib.contextmanager
def _serve(options: SandboxOptions, topology: Topology) -> Iterator[tuple[str, Path]]:
    if uses_real_control_plane(options.control_plane):
        print("starting the real control plane (etcd, kube-apiserver, ...)", file=sys.stderr)
        plane = RealControlPlane(
            port=options.port, kubeconfig=options.kubeconfig, topology=topology
        )
        with plane:
            print(f"control plane ready in {plane.start_seconds:.1f} s", file=sys.stderr)
            yield plane.url, plane.kubeconfig
        return
    sandbox = Sandbox(
        port=options.port,
        kubeconfig=options.kubeconfig,
        topology=topology,
        ready_delay=options.ready_delay,
    )
    with sandbox as cluster:
        yield cluster.url, cluster.kubeconfig
