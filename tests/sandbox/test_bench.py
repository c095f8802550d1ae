"""The cluster benchmark keeps running (a small run; the figures are not asserted)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO


def test_bench_prints_writes_per_second_and_watch_latency() -> None:
    result = subprocess.run(
        [sys.executable, str(REPO / "bench" / "cluster.py"), "--objects", "30", "--watchers", "3"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    assert "writes/s: " in result.stdout
    assert "watch-event latency over 90 events: p50 " in result.stdout
