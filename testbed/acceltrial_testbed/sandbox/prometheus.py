"""A real Prometheus for the demo and the tests: its own config and data dir, a loopback port.

The binary is ``PROMETHEUS_BIN``, else the one ``make tools`` (or ``make demo``) leaves in
``.tools/bin`` of the working directory or of the source checkout this package runs from (so the
demo finds it from any directory), else ``prometheus`` on ``PATH``. It scrapes the given targets
every second (job ``fleet``), and any further scrape jobs it is given (e.g.
:func:`acceltrial_testbed.sandbox.servicemonitor.scrape_job`), so steps of a few seconds have data.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
import time
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

_LISTENING = re.compile(r'msg="Listening on" address=127\.0\.0\.1:(\d+)')
LOCAL_TOOLS = Path(".tools") / "bin"
CHECKOUT_TOOLS = Path(__file__).resolve().parents[3] / LOCAL_TOOLS
HINT = (
    "Prometheus is needed: run 'make tools' (it installs Debian's prometheus package locally), "
    "install it with 'apt-get install prometheus', or set PROMETHEUS_BIN to a prometheus binary"
)


class PrometheusNotFound(Exception):
    """No usable prometheus binary; the message says how to get one."""


def find_prometheus() -> str:
    """The prometheus binary to run (see the module docstring), or PrometheusNotFound."""
    candidates = [
        os.environ.get("PROMETHEUS_BIN"),
        str(LOCAL_TOOLS / "prometheus"),
        str(CHECKOUT_TOOLS / "prometheus"),
    ]
    for candidate in candidates:
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("prometheus")
    if found is None:
        raise PrometheusNotFound(HINT)
    return found


class PrometheusServer:
    """One Prometheus process; ``stop`` and ``start`` again keep the port and the data."""

    def __init__(
        self,
        binary: str,
        folder: Path,
        targets: list[str],
        jobs: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        self.binary = binary
        self.folder = folder
        self.port = 0
        self.process: subprocess.Popen[str] | None = None
        self.targets = targets
        folder.mkdir(parents=True, exist_ok=True)
        self._write_config(jobs)

    def _write_config(self, jobs: Sequence[Mapping[str, Any]]) -> None:
        # No targets: a Prometheus that only answers from the data it holds (the tests' histories).
        fleet = (
            [{"job_name": "fleet", "static_configs": [{"targets": self.targets}]}]
            if self.targets
            else []
        )
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "scrape_configs": [*fleet, *(dict(job) for job in jobs)],
        }
        (self.folder / "prometheus.yml").write_text(
            yaml.safe_dump(config, sort_keys=False), encoding="utf-8"
        )

    def reload(self, jobs: Sequence[Mapping[str, Any]]) -> None:
        """Scrape these jobs (besides the fleet) from now on, as the Prometheus Operator
        reloads Prometheus when a ServiceMonitor's endpoints change."""
        self._write_config(jobs)
        request = urllib.request.Request(f"{self.url}/-/reload", method="POST")
        urllib.request.urlopen(request, timeout=10).close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30) -> PrometheusServer:
        self.process = subprocess.Popen(
            [
                self.binary,
                f"--config.file={self.folder / 'prometheus.yml'}",
                f"--storage.tsdb.path={self.folder / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--web.enable-lifecycle",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.port = self._listening_port(self.process, timeout)
        self._wait_ready(timeout)
        return self

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def _listening_port(self, process: subprocess.Popen[str], timeout: float) -> int:
        assert process.stderr is not None
        deadline = time.monotonic() + timeout
        log = []
        for line in process.stderr:
            log.append(line)
            found = _LISTENING.search(line)
            if found:
                # Keep draining the log so Prometheus never blocks on a full pipe.
                threading.Thread(target=process.stderr.read, daemon=True).start()
                return int(found.group(1))
            if time.monotonic() > deadline:
                break
        self.stop()
        raise RuntimeError("Prometheus did not start:\n" + "".join(log[-10:]))

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as reply:
                    if reply.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.05)  # bounded poll of a real server's readiness
        raise RuntimeError(f"Prometheus at {self.url} did not become ready")
