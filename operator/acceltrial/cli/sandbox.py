"""``acceltrial sandbox up``: serve a local cluster until interrupted."""

from __future__ import annotations

import signal
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import yaml
from pydantic import ValidationError

from acceltrial.sandbox.cluster import Sandbox
from acceltrial.sandbox.topology import load_topology


@dataclass(frozen=True)
class SandboxOptions:
    port: int
    kubeconfig: Path
    topology: Path | None = None
    ready_delay: float = 2.0


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
    sandbox = Sandbox(
        port=options.port,
        kubeconfig=options.kubeconfig,
        topology=topology,
        ready_delay=options.ready_delay,
    )
    with sandbox as cluster:
        print(f"sandbox API server at {cluster.url}", file=out)
        print(f"kubeconfig written to {cluster.kubeconfig}", file=out)
        print(f"  export KUBECONFIG={cluster.kubeconfig}", file=out, flush=True)
        stop.wait()
    print("sandbox stopped", file=out, flush=True)
    return 0
