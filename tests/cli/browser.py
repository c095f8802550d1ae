"""Debian's headless Chromium, to open a report page as a reader would and keep a screenshot of
it in ``artifacts/`` (CI keeps that folder; .ci/run installs chromium)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.conftest import REPO

ARTIFACTS = REPO / "artifacts"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def chromium() -> str:
    """The browser's path; fails in CI and skips elsewhere when there is none."""
    found = next((p for p in map(shutil.which, ("chromium", "chromium-browser")) if p), None)
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("CI needs Debian's chromium for this test (.ci/run installs it)")
        pytest.skip("no chromium on this machine (apt-get install chromium)")
    return found


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run([chromium(), *FLAGS, f"--user-data-dir={profile}", *args],
                              capture_output=True, text=True, timeout=120, check=False)  # fmt: skip


def rendered_text(page: Path) -> str:
    """The page's DOM after the browser has loaded it."""
    done = _run("--dump-dom", page.as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def screenshot(page: Path, name: str, height: int = 6000) -> Path:
    """artifacts/<name>.png of the page at 1280 pixels wide, tall enough for a whole report."""
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / f"{name}.png"
    shot.unlink(missing_ok=True)
    done = _run(f"--screenshot={shot}", f"--window-size=1280,{height}", page.as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    assert shot.exists(), f"chromium wrote no {shot}"
    assert shot.stat().st_size > 10_000, f"{shot} is blank"
    return shot
