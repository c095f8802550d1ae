"""The sandbox's provisioner (Karpenter NodePools, EKS managed node groups) on the real control
plane: the same passes as on the emulator (sandbox/provisioner.py), reading and writing through
the API server with the admin certificate. Nodes it adds carry no Ready condition: kwok, which
manages every Node, reports them Ready as a kubelet registering its node would."""

from __future__ import annotations

import functools
import threading
import time
import urllib.parse
from typing import Any

from acceltrial_testbed.sandbox.eks import SandboxEks
from acceltrial_testbed.sandbox.errors import ApiError
from acceltrial_testbed.sandbox.provisioner import (
    NODEPOOL_CRD,
    Provisioner,
    eks_sizes,
    run_in_thread,
)
from acceltrial_testbed.sandbox.realplane.client import AdminClient
from acceltrial_testbed.sandbox.realplane.client import ApiError as ClientError
from acceltrial_testbed.sandbox.realplane.pod_logs import node_addresses
from acceltrial_testbed.sandbox.topology import Topology

Object = dict[str, Any]
NODEPOOLS = "/apis/karpenter.sh/v1/nodepools"
SERVED_WITHIN_SECONDS = 60.0


class ApiObjects:
    """What the provisioner reads and writes, through the real API server."""

    def __init__(self, client: AdminClient) -> None:
        self.client = client

    def nodes(self) -> list[Object]:
        return self._items("/api/v1/nodes")

    def pods(self) -> list[Object]:
        return self._items("/api/v1/pods")

    def create_node(self, node: Object) -> None:
        status = dict(node["status"])
        status.pop("conditions", None)
        status["addresses"] = node_addresses(status.get("addresses", []), node["metadata"]["name"])
        body = {k: v for k, v in node.items() if k != "status"}
        self._call("POST", "/api/v1/nodes", body)
        name = node["metadata"]["name"]
        self._call("PATCH", f"/api/v1/nodes/{name}/status", {"status": status}, merge=True)

    def delete_node(self, name: str) -> None:
        self._call("DELETE", f"/api/v1/nodes/{name}")

    def delete_pod(self, namespace: str, name: str) -> None:
        # At once, as the node it ran on is gone (no kubelet is left to confirm the stop).
        self._call("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}?gracePeriodSeconds=0")

    def install_node_pools(self, pools: list[Object]) -> None:
        self._call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", NODEPOOL_CRD)
        deadline = time.monotonic() + SERVED_WITHIN_SECONDS
        for pool in pools:
            while True:
                try:
                    self._call("POST", NODEPOOLS, pool)
                    break
                except ApiError as error:
                    # A new CRD's kind is served a moment after its create: 404 until then
                    # (the client itself waits out 429).
                    if error.code != 404 or time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)

    def node_pool(self, name: str) -> Object:
        found: Object = self._call("GET", f"{NODEPOOLS}/{urllib.parse.quote(name)}")
        return found

    def write_node_pool_status(self, name: str, status: Object) -> None:
        self._call("PATCH", f"{NODEPOOLS}/{name}/status", {"status": status}, merge=True)

    def _items(self, path: str) -> list[Object]:
        listed: Object = self._call("GET", path)
        return list(listed.get("items") or [])

    def _call(self, method: str, path: str, body: Any = None, merge: bool = False) -> Any:
        kind = "application/merge-patch+json" if merge else "application/json"
        try:
            return self.client.request(method, path, body, kind)
        except ClientError as error:
            raise ApiError(error.status, "Refused", str(error)) from error


class RealPlaneProvisioning:
    """NodePools and managed node groups for a real control plane's topology, while it runs."""

    def __init__(self, client: AdminClient, topology: Topology) -> None:
        self.client, self.topology = client, topology
        self.eks: SandboxEks | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def needed(self) -> bool:
        return bool(self.topology.node_pools) or any(
            group.managed is not None for group in self.topology.node_groups
        )

    def start(self) -> RealPlaneProvisioning:
        sizes = None
        if any(group.managed is not None for group in self.topology.node_groups):
            self.eks = SandboxEks(self.topology).start()
            sizes = functools.partial(
                eks_sizes, self.eks.client(), self.topology.cluster, self.eks.groups
            )
        provisioner = Provisioner(
            ApiObjects(self.client),
            self.topology,
            provision_delay=self.topology.provision_delay_seconds,
            consolidation_delay=self.topology.consolidation_delay_seconds,
            node_groups=sizes,
        )
        provisioner.install()
        self._thread = run_in_thread(provisioner, self._stop)
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self.eks is not None:
            self.eks.stop()
