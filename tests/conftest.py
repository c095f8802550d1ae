"""Shared test fixtures: paths to the repository's examples, manifests and tools."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
TOOLS_BIN = REPO / ".tools" / "bin"
SLOWEST_FILES = REPO / "tests" / "slowest-files.txt"
"""The test files that take longest, slowest first (``scripts/test_durations.py --write-slowest``
writes it from a run's timings)."""
TIMINGS = os.environ.get("ACCELTRIAL_TEST_TIMINGS")
"""A file to append each test's wall time and the machine's busy CPU time meanwhile to, one JSON
object a line (scripts/test_durations.py reads it; docs/testing.md)."""


def _proxies_read_once() -> None:
    """pytest rewrites ``PYTEST_CURRENT_TEST`` at every test while the threads of ``@together``
    tests, the demos and the fleet open HTTP connections; urllib reads the whole environment for
    proxy settings on every request and raises KeyError when a key goes meanwhile (it failed a
    CI run). The test process reads them once."""
    proxies = urllib.request.getproxies_environment()
    bypass = urllib.request.proxy_bypass_environment
    urllib.request.getproxies = lambda: dict(proxies)
    urllib.request.proxy_bypass = lambda host: bypass(host, dict(proxies))


_proxies_read_once()


def environ_with(**extra: str) -> dict[str, str]:
    """A copy of the environment with ``extra`` set, for a child process. Copying iterates the
    keys and then reads each value, and pytest's main thread sets and removes
    ``PYTEST_CURRENT_TEST`` while tests' threads (demos, batches run together) copy it: a copy
    that meets that race (a KeyError) is taken again."""
    while True:
        try:
            return {**dict(os.environ), **extra}
        except KeyError:
            continue


def tool(name: str) -> str:
    """Path of kubectl or helm from the PyPI wheel (``make tools``), else from PATH."""
    local = TOOLS_BIN / name
    if local.is_file() and os.access(local, os.X_OK):
        return str(local)
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} not found: run `make tools` (it unpacks {name} from a PyPI wheel)")
    return found


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """How many hostile manifests the fuzzing properties tried (tests/hostile/strategies.py)."""
    strategies = sys.modules.get("tests.hostile.strategies")
    tried = getattr(strategies, "TRIED", None)
    if tried:
        counts = ", ".join(f"{where}: {count}" for where, count in sorted(tried.items()))
        total = sum(tried.values())
        terminalreporter.write_line(f"hostile input: {total} manifests tried ({counts})")


def slowest_files() -> list[str]:
    """The files of ``SLOWEST_FILES``, slowest first."""
    lines = SLOWEST_FILES.read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slowest files first, then the rest as collected. ``make test-cluster`` hands whole
    files to its workers in this order (``--no-loadscope-reorder``; pytest-xdist's own order is
    by the number of tests, which put the one-test fault suite last and left two cores idle
    while it ran): the longest start first and the short ones fill the gaps at the end."""
    rank = {name: place for place, name in enumerate(slowest_files())}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))


def busy_cpu_seconds() -> float:
    """CPU time every core of the machine has spent busy since boot (all processes, /proc/stat)."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    idle = values[3] + values[4]  # idle and iowait
    return (sum(values) - idle) / os.sysconf("SC_CLK_TCK")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """With ACCELTRIAL_TEST_TIMINGS set: how long each test took (setup, call and teardown) and
    how much CPU the whole machine used meanwhile; the rest of two cores' time was waiting."""
    if not TIMINGS:
        yield
        return
    started, busy = time.monotonic(), busy_cpu_seconds()
    yield
    record = {
        "test": item.nodeid,
        "seconds": round(time.monotonic() - started, 3),
        "busy_cpu_seconds": round(busy_cpu_seconds() - busy, 3),
        "cores": os.cpu_count(),
    }
    Path(TIMINGS).parent.mkdir(parents=True, exist_ok=True)  # artifacts/ exists only in CI
    with open(TIMINGS, "a", encoding="utf-8") as out:
        out.write(json.dumps(record) + "\n")
