"""Starting and stopping the real control plane, like controller-runtime's envtest.

:class:`RealControlPlane` is used as ``with RealControlPlane() as plane:``. It makes a data
directory for the run, throwaway certificates and a kubeconfig, then starts etcd and
kube-apiserver on free loopback ports, creates the topology's Nodes, starts
kube-controller-manager, kube-scheduler and kwok (which plays the kubelet: it keeps the Nodes
Ready and moves scheduled pods to Running and Ready with IPs), installs the AcceleratorTrial and
the Gateway API CRDs, and returns once all of it answers. Leaving the block, or any error while
starting, stops every process (SIGTERM, then SIGKILL) and removes the data directory.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import shutil
import socket
import tempfile
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from acceltrial.api.crd import crd_manifest
from acceltrial.api.kinds import KINDS
from acceltrial_testbed.sandbox.access import Access
from acceltrial_testbed.sandbox.eks import SandboxEks
from acceltrial_testbed.sandbox.kubeconfig import write_kubeconfig
from acceltrial_testbed.sandbox.realplane.accounts import write_service_account_kubeconfig
from acceltrial_testbed.sandbox.realplane.binaries import Binaries, find_binaries
from acceltrial_testbed.sandbox.realplane.client import AdminClient, ApiError
from acceltrial_testbed.sandbox.realplane.pki import Certificates, issue_certificates
from acceltrial_testbed.sandbox.realplane.pod_logs import (
    KUBELET_ADDRESS_TYPES,
    PodLogs,
    node_addresses,
)
from acceltrial_testbed.sandbox.realplane.processes import Component, StartError, start, wait_until
from acceltrial_testbed.sandbox.realplane.provisioning import RealPlaneProvisioning
from acceltrial_testbed.sandbox.realplane.reset import Snapshot, reset, snapshot
from acceltrial_testbed.sandbox.topology import Topology, load_topology, nodes

SAFE_LOADER = yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader
"""PyYAML's libyaml loader where its wheel has it (it does on every platform we build on)."""

SERVICE_CLUSTER_IP_RANGE = "10.100.0.0/16"  # EKS's default, as the emulator
START_TIMEOUT_SECONDS = 120.0
KWOK_JOB_STAGES = Path(__file__).resolve().parents[1] / "kwok-job-stages.yaml"
"""How a Job's pod ends (sandbox/jobs.py's annotations), beside kwok's own stages."""
NODE_GRACE = "30m"
"""kwok's node-heartbeat-with-lease stage posts each Node's status every 600 s plus up to 610 s
of jitter, and this kwok renews no Leases (kube-node-lease stays empty): a grace under 1,210 s
let the node lifecycle controller mark Nodes NotReady, and their pods not Ready, 10 to 20
minutes into a plane's life (a rollout stuck on a Running pod that was not Ready, late in the
full test run)."""
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


class RealControlPlane:
    """The upstream control plane on loopback ports (see the module docstring)."""

    def __init__(
        self,
        *,
        port: int = 0,
        kubeconfig: Path | None = None,
        topology: Topology | None = None,
        binaries: Binaries | None = None,
        start_timeout: float = START_TIMEOUT_SECONDS,
        keep_data: bool = False,
        acceleratortrial_crd: bool = True,
        audit_users: Sequence[str] = (),
    ) -> None:
        self.requested_port = port
        self.topology = topology if topology is not None else load_topology()
        self.eks: SandboxEks | None = None
        """Managed node groups in moto's EKS API, when the topology has any."""
        self._provisioning: RealPlaneProvisioning | None = None
        self.binaries = binaries or find_binaries()
        self.start_timeout = start_timeout
        self.keep_data = keep_data
        self.acceleratortrial_crd = acceleratortrial_crd
        self.audit_users = tuple(audit_users)
        """Users whose requests the API server writes to :attr:`audit_log`, one JSON event per
        request when its response is complete (Kubernetes' audit log, at level Metadata)."""
        self.certificates: Certificates | None = None
        self._baseline: Snapshot | None = None
        self.data_dir = Path(tempfile.mkdtemp(prefix="acceltrial-realplane-"))
        self.kubeconfig = kubeconfig or self.data_dir / "kubeconfig"
        atexit.register(self.stop)  # also removes the data directory if never started
        self.port = 0
        self.kubelet_port = 0
        """kwok's kubelet API (pod logs), when the build serves them."""
        self._pod_logs: PodLogs | None = None
        self.components: list[Component] = []
        self.start_seconds = 0.0

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def pod_logs(self) -> PodLogs | None:
        """What serves the Job pods' logs (and plays the simulated trainers), when started."""
        return self._pod_logs

    @property
    def audit_log(self) -> Path:
        return self.data_dir / "audit.log"

    @property
    def access(self) -> Access:
        """How in-process clients reach it: its CA and the admin client certificate."""
        if self.certificates is None:
            raise RuntimeError("access needs a started control plane")
        return Access(
            self.url,
            ca=self.certificates.ca,
            client_cert=self.certificates.admin_cert,
            client_key=self.certificates.admin_key,
        )

    def start(self) -> RealControlPlane:
        began = time.monotonic()
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - began
        return self

    def _start(self) -> None:
        certificates = self.certificates = issue_certificates(self.data_dir / "pki")
        self.port = self.requested_port or free_port()
        admin = self.data_dir / "admin.kubeconfig"
        write_admin_kubeconfig(admin, self.url, certificates)
        etcd_url = self._start_etcd()
        apiserver = self._launch("kube-apiserver", self._apiserver_command(etcd_url, certificates))
        client = AdminClient(self.url, certificates)
        self._wait(apiserver, lambda: client.ok("/readyz"), "ready")
        self._create_nodes(client)
        if self.binaries.kwok_logs_crd is not None:
            self.kubelet_port = free_port()
            self._create_crds(client, [yaml.safe_load(self.binaries.kwok_logs_crd.read_text())])
        controller_manager = self._launch(
            "kube-controller-manager", self._controller_manager_command(admin, certificates)
        )
        self._launch("kube-scheduler", self._scheduler_command(admin))
        kwok = self._launch("kwok", self._kwok_command(admin))
        self._install_crds(client)
        self._wait(kwok, lambda: _nodes_running(client, self.topology), "keeping the Nodes Ready")
        if self.kubelet_port:
            self._pod_logs = PodLogs(client, self.data_dir / "pod-logs").start()
        provisioning = RealPlaneProvisioning(client, self.topology)
        if provisioning.needed:  # NodePools or managed node groups: capacity that comes later
            self._provisioning = provisioning.start()
            self.eks = provisioning.eks
        self._wait(
            controller_manager,
            lambda: client.ok("/api/v1/namespaces/default/serviceaccounts/default"),
            "creating service accounts",
        )
        self._baseline = snapshot(client)
        write_admin_kubeconfig(self.kubeconfig, self.url, certificates)

    def service_account_kubeconfig(self, namespace: str, name: str, path: Path) -> Path:
        """A kubeconfig at ``path`` that authenticates as the ServiceAccount (see .accounts):
        what RBAC grants it, and nothing more."""
        if self.certificates is None:
            raise RuntimeError("service_account_kubeconfig() needs a started control plane")
        client = AdminClient(self.url, self.certificates)
        return write_service_account_kubeconfig(path, client, self.certificates.ca, namespace, name)

    def reset(self) -> None:
        """Remove what was made since the start (see :mod:`.reset`), for the next test."""
        if self.certificates is None or self._baseline is None:
            raise RuntimeError("reset() needs a started control plane")
        reset(AdminClient(self.url, self.certificates), self._baseline)

    def _launch(self, name: str, command: list[str]) -> Component:
        log_dir = self.data_dir / "logs"
        log_dir.mkdir(exist_ok=True)
        component = start(name, command, log_dir)
        self.components.append(component)
        return component

    def _wait(self, component: Component, ready: Callable[[], bool], what: str) -> None:
        wait_until(component, ready, self.start_timeout, what)

    def _start_etcd(self) -> str:
        client_url = f"http://127.0.0.1:{free_port()}"
        peer_url = f"http://127.0.0.1:{free_port()}"
        etcd = self._launch(
            "etcd",
            [
                str(self.binaries.etcd),
                "--name=default",
                f"--data-dir={self.data_dir / 'etcd'}",
                f"--listen-client-urls={client_url}",
                f"--advertise-client-urls={client_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=default={peer_url}",
                "--unsafe-no-fsync",  # a throwaway store: durability buys nothing here
                "--log-level=warn",
            ],
        )
        self._wait(etcd, lambda: _http_ok(client_url + "/health"), "healthy")
        return client_url

    def _apiserver_command(self, etcd_url: str, certificates: Certificates) -> list[str]:
        return [
            str(self.binaries.kube_apiserver),
            f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={self.port}",
            f"--cert-dir={self.data_dir / 'pki'}",
            f"--tls-cert-file={certificates.serving_cert}",
            f"--tls-private-key-file={certificates.serving_key}",
            f"--client-ca-file={certificates.ca}",
            "--authorization-mode=RBAC",
            f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={certificates.service_account_public}",
            f"--service-account-signing-key-file={certificates.service_account_key}",
            "--allow-privileged=true",
            "--endpoint-reconciler-type=none",  # no kube-proxy: the kubernetes Service is moot
            "--profiling=false",
            *self._audit_flags(),
            KUBELET_ADDRESS_TYPES,
        ]

    def _audit_flags(self) -> list[str]:
        if not self.audit_users:
            return []
        policy = self.data_dir / "audit-policy.yaml"
        policy.write_text(yaml.safe_dump(audit_policy(self.audit_users)))
        return [
            f"--audit-policy-file={policy}",
            f"--audit-log-path={self.audit_log}",
            "--audit-log-format=json",
            "--audit-log-mode=blocking",
        ]

    def _controller_manager_command(self, admin: Path, certificates: Certificates) -> list[str]:
        return [
            str(self.binaries.kube_controller_manager),
            f"--kubeconfig={admin}",
            "--secure-port=0",
            "--leader-elect=false",
            "--controllers=*",
            # kwok posts Node heartbeats rarely and renews no Leases (see NODE_GRACE): the 50 s
            # default marks every Node NotReady, and its pods not Ready, for good. A throwaway
            # plane has no node failures to detect quickly.
            f"--node-monitor-grace-period={NODE_GRACE}",
            f"--node-startup-grace-period={NODE_GRACE}",
            f"--service-account-private-key-file={certificates.service_account_key}",
            f"--root-ca-file={certificates.ca}",
            "--profiling=false",
        ]

    def _scheduler_command(self, admin: Path) -> list[str]:
        return [
            str(self.binaries.kube_scheduler),
            f"--kubeconfig={admin}",
            "--secure-port=0",
            "--leader-elect=false",
            "--profiling=false",
        ]

    def _kwok_command(self, admin: Path) -> list[str]:
        return [
            str(self.binaries.kwok),
            f"--kubeconfig={admin}",
            f"--config={self.binaries.kwok_stages}",
            f"--config={KWOK_JOB_STAGES}",
            "--manage-all-nodes=true",
            *self._kubelet_flags(),
        ]

    def _kubelet_flags(self) -> list[str]:
        """kwok's kubelet API on the loopback (see .pod_logs), when the build serves pod logs."""
        if not self.kubelet_port or self.certificates is None:
            return []
        return [
            f"--server-address=127.0.0.1:{self.kubelet_port}",
            f"--node-port={self.kubelet_port}",
            f"--tls-cert-file={self.certificates.serving_cert}",
            f"--tls-private-key-file={self.certificates.serving_key}",
            "--enable-crds=Logs",
        ]

    def _create_nodes(self, client: AdminClient) -> None:
        """The topology's Nodes, without a Ready condition: kwok reports them Ready (and then
        keeps their leases fresh), as a kubelet registering its node would."""
        for node in nodes(self.topology):
            status = node.pop("status")
            status.pop("conditions", None)
            status["addresses"] = node_addresses(
                status.get("addresses", []), node["metadata"]["name"]
            )
            client.create("/api/v1/nodes", node)
            name = node["metadata"]["name"]
            client.merge_patch(f"/api/v1/nodes/{name}/status", {"status": status})

    def _install_crds(self, client: AdminClient) -> None:
        # acceltrial's own CRDs (AcceleratorTrial, TrainingTrial), unless a test installs them.
        definitions = [crd_manifest(kind) for kind in KINDS] if self.acceleratortrial_crd else []
        for path in self.binaries.gateway_api_crds:
            # libyaml's loader: the pure-Python one spent 1.2 CPU-seconds of every plane's start
            # on these 1.2 MB of CRDs.
            definitions.extend(d for d in yaml.load_all(path.read_text(), Loader=SAFE_LOADER) if d)
        self._create_crds(client, definitions)

    def _create_crds(self, client: AdminClient, definitions: list[dict[str, Any]]) -> None:
        """Create ``definitions`` and wait until each kind is served."""
        for definition in definitions:
            client.create(CRDS, definition)
        for definition in definitions:
            name = definition["metadata"]["name"]
            deadline = time.monotonic() + self.start_timeout
            while not _established(client, name):
                if time.monotonic() > deadline:
                    raise StartError(f"the CRD {name} was not Established in time")
                time.sleep(0.05)
            # the kind's storage answers 429 for a moment after Established: wait it out here
            spec = definition["spec"]
            version = next(v["name"] for v in spec["versions"] if v.get("storage"))
            client.get(f"/apis/{spec['group']}/{version}/{spec['names']['plural']}?limit=1")

    def stop(self) -> None:
        """Stop every component, newest first, and remove the data directory."""
        atexit.unregister(self.stop)
        if self._pod_logs is not None:
            self._pod_logs.stop()
            self._pod_logs = None
        if self._provisioning is not None:
            self._provisioning.stop()
            self._provisioning, self.eks = None, None
        for component in reversed(self.components):
            component.stop()
        self.components.clear()
        if not self.keep_data:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def rss_bytes(self) -> dict[str, int]:
        """Resident memory of each component now."""
        return {component.name: component.rss_bytes() for component in self.components}

    def __enter__(self) -> RealControlPlane:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()


def audit_policy(users: Sequence[str]) -> dict[str, Any]:
    """An audit policy logging each request of ``users`` once, when answered, and nothing
    else."""
    return {
        "apiVersion": "audit.k8s.io/v1",
        "kind": "Policy",
        "omitStages": ["RequestReceived", "ResponseStarted"],
        "rules": [{"level": "Metadata", "users": list(users)}, {"level": "None"}],
    }


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def write_admin_kubeconfig(path: Path, url: str, certificates: Certificates) -> Path:
    """A self-contained kubeconfig (certificates inline) with the sandbox's context name."""

    def inline(file: Path) -> str:
        return base64.b64encode(file.read_bytes()).decode()

    user = {
        "client-certificate-data": inline(certificates.admin_cert),
        "client-key-data": inline(certificates.admin_key),
    }
    return write_kubeconfig(
        path, url, user=user, certificate_authority_data=inline(certificates.ca)
    )


def _http_ok(url: str) -> bool:
    with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2) as response:
        return int(response.status) == 200
    return False


def _established(client: AdminClient, name: str) -> bool:
    try:
        crd = client.get(f"{CRDS}/{name}")
    except ApiError:
        return False
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


def _nodes_running(client: AdminClient, topology: Topology) -> bool:
    expected = {node["metadata"]["name"] for node in nodes(topology)}
    listed = client.get("/api/v1/nodes").get("items", [])
    ready = {
        node["metadata"]["name"]
        for node in listed
        if any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in (node.get("status") or {}).get("conditions") or []
        )
    }
    return expected <= ready
