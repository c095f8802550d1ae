"""``acceltrial sandbox up`` as a user runs it: a process that serves until interrupted."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from tests.conftest import tool


def test_sandbox_up_serves_kubectl_until_interrupted(tmp_path: Path) -> None:
    """The command writes a kubeconfig that kubectl uses, and exits 0 on SIGINT."""
    kubeconfig = tmp_path / "kubeconfig"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "acceltrial.cli.main",
            "sandbox",
            "up",
            "--port",
            "0",
            "--kubeconfig",
            str(kubeconfig),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert first.startswith("sandbox API server at http://127.0.0.1:")
        env = {"KUBECONFIG": str(kubeconfig), "HOME": str(tmp_path)}
        result = subprocess.run(
            [tool("kubectl"), "get", "namespaces", "-o", "name"],
            capture_output=True, text=True, env=env, timeout=30, check=False,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert "namespace/default" in result.stdout.split()
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=15) == 0
