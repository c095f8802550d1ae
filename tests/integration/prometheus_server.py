"""A real Prometheus for the tests, started by the sandbox's launcher
(:class:`acceltrial_testbed.sandbox.prometheus.PrometheusServer`, the one the demo runs).

Prepared histories are written as OpenMetrics and turned into TSDB blocks with
``promtool tsdb create-blocks-from openmetrics`` so that queries answer at once, deterministically.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

from acceltrial_testbed.sandbox.prometheus import PrometheusServer
from tests.conftest import tool


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
    """Run Prometheus on ``data_dir`` (a folder named ``data``, as the launcher keeps it) with
    the scrape jobs of ``scrape_yaml``; yield its base URL; stop it on exit."""
    assert data_dir.name == "data", "the launcher keeps its TSDB in <folder>/data"
    jobs = (yaml.safe_load(scrape_yaml) or {}).get("scrape_configs") or []
    server = PrometheusServer(tool("prometheus"), data_dir.parent, targets=[], jobs=jobs)
    server.start()
    try:
        yield server.url
    finally:
        server.stop()
