"""``acceltrial sandbox up``: serve a local cluster until interrupted."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import TextIO

from acceltrial.sandbox.cluster import Sandbox


def sandbox_up(
    port: int, kubeconfig: Path, out: TextIO, stop: threading.Event | None = None
) -> int:
    """Start a sandbox, say where it is, and serve until SIGINT/SIGTERM (or ``stop`` is set)."""
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.set())
    with Sandbox(port=port, kubeconfig=kubeconfig) as cluster:
        print(f"sandbox API server at {cluster.url}", file=out)
        print(f"kubeconfig written to {cluster.kubeconfig}", file=out)
        print(f"  export KUBECONFIG={cluster.kubeconfig}", file=out, flush=True)
        stop.wait()
    print("sandbox stopped", file=out, flush=True)
    return 0
