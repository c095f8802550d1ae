"""``acceltrial sandbox up --control-plane real``: the upstream API server, controllers,
scheduler and etcd with kwok as the kubelet, driven by the real kubectl v1.33 as a user would
(the issue's acceptance script), and started and stopped cleanly from Python."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from acceltrial_testbed.sandbox.realplane.plane import RealControlPlane
from acceltrial_testbed.sandbox.realplane.processes import StartError
from acceltrial_testbed.sandbox.topology import load_topology, nodes
from tests.conftest import REPO, tool
from tests.sandbox.conftest import Kubectl, eventually, require_real_control_plane

pytestmark = pytest.mark.slow

START_TIMEOUT = 180

GPU_DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: llama3-8b-gpu, namespace: serving, labels: {team: ml}}
spec:
  replicas: 2
  selector: {matchLabels: {app: llama3-8b-gpu}}
  template:
    metadata: {labels: {app: llama3-8b-gpu}}
    spec:
      nodeSelector: {node.kubernetes.io/instance-type: g5.xlarge}
      containers:
        - name: vllm
          image: "example/vllm:1"
          resources: {limits: {nvidia.com/gpu: "1"}}
"""

GREEDY_POD = """
apiVersion: v1
kind: Pod
metadata: {name: greedy, namespace: serving}
spec:
  tolerations: [{key: aws.amazon.com/neuron, operator: Exists, effect: NoSchedule}]
  containers:
    - name: server
      image: "example/neuron-server:1"
      resources: {limits: {aws.amazon.com/neuroncore: "64"}}
"""

APPLIED_CONFIGMAP = """
apiVersion: v1
kind: ConfigMap
metadata: {name: routing, namespace: bars}
data: {weight: "5"}
"""


@dataclass
class SandboxUp:
    process: subprocess.Popen[str]
    kubeconfig: Path


@pytest.fixture
def real_sandbox(tmp_path: Path) -> Iterator[SandboxUp]:
    require_real_control_plane()
    kubeconfig = tmp_path / "kubeconfig"
    process = subprocess.Popen(
        [
            sys.executable, "-m", "acceltrial.cli.main", "sandbox", "up", "--control-plane",
            "real", "--port", "0", "--kubeconfig", str(kubeconfig),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        banner = process.stdout.readline()
        assert banner.startswith("sandbox API server at https://127.0.0.1:"), banner
        yield SandboxUp(process, kubeconfig)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            process.wait(timeout=60)


def children(pid: int) -> set[int]:
    """Processes whose parent is ``pid``."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.add(int(stat.parent.name))
    return found


def test_a_kubectl_session_against_the_real_control_plane(
    real_sandbox: SandboxUp, tmp_path: Path
) -> None:
    """The first lines of any kubectl tutorial, conflicts, server-side apply, scheduling on the
    simulated nodes, CRD validation and explain, all answered by the upstream API server."""
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "KUBECONFIG": str(real_sandbox.kubeconfig),
        "KUBECACHEDIR": str(tmp_path / "cache"),
    }
    kubectl = Kubectl(tool("kubectl"), env)
    version = json.loads(kubectl.ok("version", "-o", "json"))
    assert version["serverVersion"]["gitVersion"] == "v1.36.3"

    assert kubectl.ok("create", "namespace", "bars").strip() == "namespace/bars created"
    kubectl.ok("create", "configmap", "settings", "-n", "bars", "--from-literal=weight=5")
    kubectl.ok("label", "configmap", "settings", "-n", "bars", "tier=gold")
    gold = kubectl.ok("get", "configmaps", "-n", "bars", "-l", "tier=gold", "-o", "name")
    assert gold.split() == ["configmap/settings"]
    assert kubectl.ok("get", "configmaps", "-n", "bars", "-l", "tier=silver", "-o", "name") == ""

    stale = kubectl.ok("get", "configmap", "settings", "-n", "bars", "-o", "yaml")
    kubectl.ok("label", "configmap", "settings", "-n", "bars", "tier=silver", "--overwrite")
    conflict = kubectl("replace", "-f", "-", stdin=stale)
    assert conflict.returncode != 0
    assert "Conflict" in conflict.stderr or "the object has been modified" in conflict.stderr

    applied = kubectl.ok("apply", "--server-side", "-f", "-", stdin=APPLIED_CONFIGMAP)
    assert applied.strip() == "configmap/routing serverside-applied"
    routing = json.loads(
        kubectl.ok("get", "configmap/routing", "-n", "bars", "-o", "json", "--show-managed-fields")
    )
    fields = routing["metadata"]["managedFields"]
    managers = {entry["manager"]: entry["operation"] for entry in fields}
    assert managers == {"kubectl": "Apply"}

    kubectl.ok("create", "namespace", "serving")
    kubectl.ok("apply", "-f", "-", stdin=GPU_DEPLOYMENT)
    kubectl.ok("wait", "-n", "serving", "--for=condition=Available", "deployment/llama3-8b-gpu",
               "--timeout=120s")  # fmt: skip
    placed = kubectl.ok("get", "pods", "-n", "serving", "-l", "app=llama3-8b-gpu", "-o",
                        "jsonpath={.items[*].spec.nodeName}").split()  # fmt: skip
    g5_nodes = {
        node["metadata"]["name"]
        for node in nodes(load_topology())
        if node["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "g5.xlarge"
    }
    assert len(placed) == 2
    assert set(placed) <= g5_nodes
    ips = kubectl.ok("get", "pods", "-n", "serving", "-l", "app=llama3-8b-gpu", "-o",
                     "jsonpath={.items[*].status.podIP}").split()  # fmt: skip
    assert len(ips) == 2
    assert all(ips)

    kubectl.ok("apply", "-f", "-", stdin=GREEDY_POD)
    kubectl.ok("wait", "-n", "serving", "--for=condition=PodScheduled=false", "pod/greedy",
               "--timeout=60s")  # fmt: skip
    greedy = json.loads(kubectl.ok("get", "pod", "greedy", "-n", "serving", "-o", "json"))
    assert greedy["status"]["phase"] == "Pending"
    scheduled = next(c for c in greedy["status"]["conditions"] if c["type"] == "PodScheduled")
    assert scheduled["reason"] == "Unschedulable"
    assert "Insufficient aws.amazon.com/neuroncore" in scheduled["message"]

    invalid = kubectl("apply", "-f", str(REPO / "tests/manifests/invalid/03-weight-150.yaml"))
    assert invalid.returncode != 0
    assert 'The AcceleratorTrial "llama3-8b-inf2" is invalid' in invalid.stderr
    assert "spec.steps[2].weight: Invalid value: 150" in invalid.stderr

    explained = kubectl.ok("explain", "acceleratortrial.spec")
    assert "KIND:       AcceleratorTrial" in explained
    assert "candidate" in explained
    assert "steps" in explained


def test_sigint_stops_every_process_of_the_control_plane(real_sandbox: SandboxUp) -> None:
    """Ctrl-C ends etcd, the API server, the controllers, the scheduler and kwok, and the
    command exits 0."""
    spawned = children(real_sandbox.process.pid)
    assert len(spawned) == 5

    real_sandbox.process.send_signal(signal.SIGINT)

    assert real_sandbox.process.wait(timeout=60) == 0
    assert not [pid for pid in spawned if Path(f"/proc/{pid}").exists()]


def test_a_killed_command_leaves_no_component_running(real_sandbox: SandboxUp) -> None:
    """Even when the command is killed outright (no chance to stop anything), the components
    end with it: they are started with a parent-death signal."""
    spawned = children(real_sandbox.process.pid)
    data_dirs = {
        arg.split("=", 1)[1]
        for pid in spawned
        for arg in _read(Path(f"/proc/{pid}/cmdline")).split("\0")
        if arg.startswith("--data-dir=")
    }

    real_sandbox.process.kill()
    real_sandbox.process.wait(timeout=10)

    try:
        eventually(lambda: not [pid for pid in spawned if Path(f"/proc/{pid}").exists()])
    finally:
        for data_dir in data_dirs:  # a killed process cannot clean up after itself
            shutil.rmtree(Path(data_dir).parent, ignore_errors=True)


def test_a_failed_start_names_the_component_and_leaves_nothing_running() -> None:
    """When the API server cannot bind its port, starting fails with the end of its log, and
    etcd (already running) is stopped and the data directory removed."""
    require_real_control_plane()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        plane = RealControlPlane(port=taken.getsockname()[1], start_timeout=START_TIMEOUT)
        with pytest.raises(StartError, match="kube-apiserver exited") as failure:
            plane.start()

    assert "address already in use" in str(failure.value)
    assert not plane.data_dir.exists()
    assert not [
        cmdline
        for cmdline in Path("/proc").glob("[0-9]*/cmdline")
        if str(plane.data_dir) in _read(cmdline)
    ]


def _read(path: Path) -> str:
    try:
        return path.read_bytes().decode(errors="replace")
    except OSError:
        return ""


def test_the_real_control_plane_serves_the_topology_and_the_crds() -> None:
    """Nodes carry the topology's labels, taints and accelerator allocatable; the
    AcceleratorTrial and Gateway API CRDs are served."""
    require_real_control_plane()
    with RealControlPlane(start_timeout=START_TIMEOUT) as plane:
        kubectl = Kubectl(tool("kubectl"), {"KUBECONFIG": str(plane.kubeconfig), "HOME": "/tmp"})
        listed = json.loads(kubectl.ok("get", "nodes", "-o", "json"))["items"]
        by_type = {}
        for node in listed:
            by_type.setdefault(node["metadata"]["labels"]["node.kubernetes.io/instance-type"], node)
        assert set(by_type) == {"m5.xlarge", "g5.xlarge", "inf2.8xlarge"}
        assert len(listed) == 5
        assert by_type["g5.xlarge"]["status"]["allocatable"]["nvidia.com/gpu"] == "1"
        addresses = {a["type"] for a in by_type["g5.xlarge"]["status"]["addresses"]}
        # ExternalIP: where the API server reaches the node's (kwok's) kubelet for pod logs.
        assert addresses == {"InternalIP", "Hostname", "ExternalIP"}
        inf2 = by_type["inf2.8xlarge"]
        assert inf2["status"]["allocatable"]["aws.amazon.com/neuroncore"] == "2"
        assert {"key": "aws.amazon.com/neuron", "value": "true", "effect": "NoSchedule"} in (
            inf2["spec"]["taints"]
        )
        resources = kubectl.ok("api-resources", "-o", "name")
        assert "acceleratortrials.acceltrial.dev" in resources.split()
        assert "httproutes.gateway.networking.k8s.io" in resources.split()
        memory = sum(plane.rss_bytes().values())
        assert 0 < memory < 2 * 1024**3
    assert not plane.data_dir.exists()
