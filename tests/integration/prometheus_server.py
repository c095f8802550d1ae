"""A real Prometheus for the tests: started on a free loopback port with its own config and data.

Prepared histories are written as OpenMetrics and turned into TSDB blocks with
``promtool tsdb create-blocks-from openmetrics`` so that queries answer at once, deterministically.
"""

from __future__ import annotations

import re
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import tool

_LISTENING = re.compile(r'msg="Listening on" address=127\.0\.0\.1:(\d+)')


def create_blocks(openmetrics: str, data_dir: Path) -> None:
    """Turn an OpenMetrics history into TSDB blocks in ``data_dir``."""
    source = data_dir.parent / f"{data_dir.name}.om"
    source.write_text(openmetrics, encoding="utf-8")
    data_dir.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [tool("promtool"), "tsdb", "create-blocks-from", "openmetrics", str(source), str(data_dir)],
        check=True,
        capture_output=True,
    )


@contextmanager
def running_prometheus(data_dir: Path, scrape_yaml: str = "") -> Iterator[str]:
    """Run Prometheus on ``data_dir``; yield its base URL; stop it on exit."""
    config = data_dir.parent / f"{data_dir.name}.yml"
    config.write_text("global: {scrape_interval: 1s, evaluation_interval: 1s}\n" + scrape_yaml)
    process = subprocess.Popen(
        [
            tool("prometheus"),
            f"--config.file={config}",
            f"--storage.tsdb.path={data_dir}",
            "--storage.tsdb.retention.time=3650d",
            "--web.listen-address=127.0.0.1:0",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{_wait_for_port(process)}"
        _wait_ready(url)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


def _wait_for_port(process: subprocess.Popen[str]) -> int:
    assert process.stderr is not None
    deadline = time.monotonic() + 30
    for line in process.stderr:
        found = _LISTENING.search(line)
        if found:
            # Keep draining the log so Prometheus never blocks on a full pipe.
            threading.Thread(target=process.stderr.read, daemon=True).start()
            return int(found.group(1))
        if time.monotonic() > deadline:
            break
    pytest.fail("Prometheus did not start listening")


def _wait_ready(url: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as reply:
                if reply.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.05)  # bounded poll of a real server's readiness
    pytest.fail("Prometheus did not become ready")
