"""The README's sandbox section, run as a newcomer runs it: its first block in one terminal, the
rest in a second, in a folder laid out like the checkout. The port is the only change (a free
one instead of 8001, so parallel runs do not collide)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow


def sandbox_section() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## A local cluster: `acceltrial sandbox up`")[1].split("\n## ")[0]
    return re.findall(r"```bash\n(.*?)```", section, flags=re.DOTALL)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def like_the_checkout(folder: Path) -> None:
    """The paths the commands name, and the tools ``make setup`` installs, as in the checkout."""
    venv = Path(sys.executable).parent.parent
    (folder / ".venv").symlink_to(venv)
    for name in ("crds", "examples", "tests", ".tools"):
        (folder / name).symlink_to(REPO / name)


def test_the_sandbox_section_works_as_written(tmp_path: Path) -> None:
    blocks = sandbox_section()
    assert len(blocks) == 4, "the terminal with the sandbox, then three blocks in a second one"
    port = str(free_port())
    first, *second = (block.replace("--port 8001", f"--port {port}") for block in blocks)
    like_the_checkout(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"} | {"HOME": str(tmp_path)}
    sandbox = subprocess.Popen(["bash", "-c", first], cwd=tmp_path, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                               start_new_session=True)  # fmt: skip
    terminal = None
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "sandbox.kubeconfig").exists():
            assert sandbox.poll() is None, "the sandbox exited"
            assert time.monotonic() < deadline, "no kubeconfig within 60 s"
            time.sleep(0.2)
        terminal = subprocess.Popen(["bash", "-c", "\n".join(second)], cwd=tmp_path, env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                    start_new_session=True)  # fmt: skip
        said, _ = terminal.communicate(timeout=400)
    finally:
        for process in (terminal, sandbox):
            if process is not None:
                with_group_ended(process)
    log = (tmp_path / "operator.log").read_text(encoding="utf-8")
    assert terminal.returncode == 0, said
    expected = [
        "acceleratortrial",  # the CRD applied
        "spec.steps[2].weight",  # the invalid trial refused, naming the field
        "deployment.apps/llama3-8b-gpu condition met",
        "cannot reach http://prometheus-operated.monitoring:9090",  # acceltrial check
        "Preflight",
        "acceleratortrial.acceltrial.dev/llama3-8b-inf2 condition met",
        "ABORT (Aborted): aborted by a person",
        "decision abort",
    ]
    for text in expected:
        assert text in said, f"{text!r} not in the output:\n{said}\n{log[-3000:]}"
    routes = [line for line in said.splitlines() if line.startswith('[{"')]
    # The real API server adds the Gateway API defaults (group, kind, weight); the emulator not.
    assert len(routes) == 2, said
    assert routes[0] == routes[1], "the route is as found after the abort"
    assert '"name":"llama3-8b-gpu"' in routes[0]


def with_group_ended(process: subprocess.Popen[str] | subprocess.Popen[bytes]) -> None:
    """Stop the process and everything it started in the background (its session)."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
