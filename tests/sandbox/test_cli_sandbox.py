"""``acceltrial sandbox up`` as a user runs it: a process that serves until interrupted, and a
scripted kubectl session against it (the issue's acceptance script)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.conftest import EXAMPLES, REPO, tool
from tests.sandbox.conftest import Kubectl, eventually

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: %(name)s, namespace: serving, labels: {team: ml}}
spec:
  replicas: %(replicas)d
  selector: {matchLabels: {app: %(name)s}}
  template:
    metadata: {labels: {app: %(name)s}}
    spec:
      nodeSelector: {node.kubernetes.io/instance-type: inf2.8xlarge}
      tolerations: [{key: aws.amazon.com/neuron, operator: Exists, effect: NoSchedule}]
      containers:
        - name: server
          image: "example/neuron-server:1"
          resources: {limits: {aws.amazon.com/neuroncore: "%(cores)d"}}
"""


@pytest.fixture
def sandbox_process(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    kubeconfig = tmp_path / "kubeconfig"
    process = subprocess.Popen(
        [
            sys.executable, "-m", "acceltrial.cli.main", "sandbox", "up", "--port", "0",
            "--kubeconfig", str(kubeconfig), "--ready-delay", "0.1", "--control-plane", "emulator",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        assert process.stdout.readline().startswith("sandbox API server at http://127.0.0.1:")
        yield process, kubeconfig
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            process.wait(timeout=15)


def test_sandbox_up_exits_cleanly_on_sigint(
    sandbox_process: tuple[subprocess.Popen[str], Path],
) -> None:
    """The command serves until interrupted and then exits 0."""
    process, _ = sandbox_process

    process.send_signal(signal.SIGINT)

    assert process.wait(timeout=15) == 0


def test_a_scripted_kubectl_session(
    sandbox_process: tuple[subprocess.Popen[str], Path], tmp_path: Path
) -> None:
    """Against ``acceltrial sandbox up`` with the real kubectl: apply the CRD and an example
    trial, list with -l, a conflicting write answers 409, a Deployment of 3 replicas becomes
    Available, a pod asking for more NeuronCores than any node has stays Pending, an invalid
    trial is refused with the field path."""
    _, kubeconfig = sandbox_process
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "KUBECONFIG": str(kubeconfig)}
    kubectl = Kubectl(tool("kubectl"), env)

    kubectl.ok("apply", "-f", str(REPO / "crds"))
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "serving"}}
    kubectl.ok("apply", "-f", "-", stdin=yaml.safe_dump(namespace))
    kubectl.ok("apply", "-f", str(EXAMPLES / "llama3-8b-inf2-httproute.yaml"))
    kubectl.ok("label", "-n", "serving", "at", "llama3-8b-inf2", "team=ml")
    assert kubectl.ok("get", "at", "-A", "-l", "team=ml", "-o", "name").split() == [
        "acceleratortrial.acceltrial.dev/llama3-8b-inf2"
    ]

    stale = kubectl.ok("get", "-n", "serving", "at", "llama3-8b-inf2", "-o", "yaml")
    kubectl.ok("label", "-n", "serving", "at", "llama3-8b-inf2", "step=one")
    conflict = kubectl("replace", "-f", "-", stdin=stale)
    assert conflict.returncode != 0
    assert "the object has been modified" in conflict.stderr

    values = {"name": "neuron", "replicas": 3, "cores": 1}
    kubectl.ok("apply", "-f", "-", stdin=DEPLOYMENT % values)
    kubectl.ok("wait", "-n", "serving", "--for=condition=Available", "deployment/neuron",
               "--timeout=30s")  # fmt: skip

    kubectl.ok("apply", "-f", "-", stdin=DEPLOYMENT % {"name": "huge", "replicas": 1, "cores": 64})
    reason = "jsonpath={.items[0].status.conditions[0].reason}"
    pending = eventually(
        lambda: kubectl.ok("get", "pods", "-n", "serving", "-l", "app=huge", "-o", reason)
    )
    assert pending == "Unschedulable"
    phase = kubectl.ok("get", "pods", "-n", "serving", "-l", "app=huge", "-o",
                       "jsonpath={.items[0].status.phase}")  # fmt: skip
    assert phase == "Pending"

    invalid = kubectl("apply", "-f", str(REPO / "tests/manifests/invalid/03-weight-150.yaml"))
    assert invalid.returncode != 0
    assert (
        'The AcceleratorTrial "llama3-8b-inf2" is invalid: spec.steps[2].weight: Invalid value: '
        "150: spec.steps[2].weight in body should be less than or equal to 100"
    ) in invalid.stderr
