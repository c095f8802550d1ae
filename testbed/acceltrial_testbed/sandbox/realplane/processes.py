"""The control plane's child processes: started with their output in a log file, stopped with
SIGTERM and, past a grace period, SIGKILL, and measured (resident memory from /proc)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

STOP_GRACE_SECONDS = 2.0
"""How long a component may take to end after SIGTERM before it is killed. Every component but
kube-apiserver ends in milliseconds; kube-apiserver waits for its open watches to end, which a
client's watch never does on its own, so it ran into any grace (10 s once, for every module's
plane). A local plane's state is thrown away (or kept by etcd, which ends at once)."""
LOG_TAIL_LINES = 25


class StartError(RuntimeError):
    """A component did not come up; the message carries the end of its log."""


@dataclass
class Component:
    """One running program of the control plane."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path
    started_at: float = field(default_factory=time.monotonic)

    def running(self) -> bool:
        return self.process.poll() is None

    def stop(self, grace: float = STOP_GRACE_SECONDS) -> None:
        if self.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()
            self.process.wait(timeout=grace)

    def rss_bytes(self) -> int:
        """Resident memory now (0 once exited)."""
        try:
            status = Path(f"/proc/{self.process.pid}/status").read_text()
        except OSError:
            return 0
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def failure(self, what: str) -> StartError:
        state = "running" if self.running() else f"exited with {self.process.returncode}"
        return StartError(
            f"{self.name} {what} ({state}); the end of its log {self.log}:\n{self.log_tail()}"
        )


def _ending_with_parent(command: Sequence[str]) -> list[str]:
    """Prefix ``setpriv --pdeathsig KILL`` (util-linux) where present: Linux then kills the
    child when the thread that started it ends, so a killed test run or CLI leaves no control
    plane behind (a normal exit stops the components in order first). KILL, not TERM: with etcd
    gone, kube-apiserver's graceful shutdown can wait for a long time, and nothing of a
    throwaway plane is worth saving. Start the plane from a thread that lives as long as it
    should."""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "KILL", "--", *command] if setpriv else list(command)


def start(name: str, command: Sequence[str], log_dir: Path) -> Component:
    """Run ``command`` in its own session (a Ctrl-C in the terminal reaches only the parent,
    which stops the components in order), its output in ``log_dir/<name>.log``."""
    log = log_dir / f"{name}.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            _ending_with_parent(command),
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={"PATH": os.environ.get("PATH", ""), "HOME": str(log_dir)},
        )
    return Component(name, process, log)


def wait_until(
    component: Component,
    ready: Callable[[], bool],
    timeout: float,
    what: str,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Poll ``ready`` until true; fail with the component's log if it exits or time runs out."""
    deadline = clock() + timeout
    while True:
        if not component.running():
            raise component.failure(f"exited before it was {what}")
        if ready():
            return
        if clock() > deadline:
            raise component.failure(f"was not {what} within {timeout:.0f} s")
        sleep(0.1)
