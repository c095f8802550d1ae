"""The topology's managed node groups in moto's EKS API (server mode, on a loopback port), so
the operator reads and resizes them with boto3 exactly as on EKS (``AWS_ENDPOINT_URL_EKS``)."""

from __future__ import annotations

import logging
import urllib.request
from typing import Any

from botocore.session import Session

from acceltrial_testbed.sandbox.topology import Topology

REGION = "us-east-1"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
_ROLE = "arn:aws:iam::123456789012:role/sandbox-eks"
_EFFECTS = {"NoSchedule": "NO_SCHEDULE", "NoExecute": "NO_EXECUTE",
            "PreferNoSchedule": "PREFER_NO_SCHEDULE"}  # fmt: skip


class SandboxEks:
    """A moto server holding the cluster and its managed node groups."""

    def __init__(self, topology: Topology) -> None:
        # Imported here: moto costs a demo 1-2 CPU-seconds to import; only topologies with
        # managed node groups need it.
        from moto.server import ThreadedMotoServer  # noqa: PLC0415 (see above)

        self.topology = topology
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.endpoint = ""

    @property
    def groups(self) -> list[str]:
        return [g.name for g in self.topology.node_groups if g.managed is not None]

    def start(self) -> SandboxEks:
        # The server's request log would interleave with the demo's and the tests' output.
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        # moto keeps its state per process: start from an empty account.
        reset = urllib.request.Request(f"{self.endpoint}/moto-api/reset", method="POST")
        urllib.request.urlopen(reset, timeout=10).close()
        client = self.client()
        subnets = {"subnetIds": ["subnet-sandbox"]}
        client.create_cluster(name=self.topology.cluster, roleArn=_ROLE, resourcesVpcConfig=subnets)
        for group in self.topology.node_groups:
            if group.managed is None:
                continue
            client.create_nodegroup(
                clusterName=self.topology.cluster,
                nodegroupName=group.name,
                nodeRole=_ROLE,
                subnets=subnets["subnetIds"],
                instanceTypes=[group.instance_type],
                labels=group.labels,
                taints=[
                    {"key": t.key, "value": t.value, "effect": _EFFECTS[t.effect]}
                    for t in group.taints
                ],
                scalingConfig={
                    "minSize": group.managed.min_size,
                    "maxSize": group.managed.max_size,
                    "desiredSize": group.count,
                },
            )
        return self

    def client(self) -> Any:
        return Session().create_client(
            "eks",
            region_name=REGION,
            endpoint_url=self.endpoint,
            aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        )

    def environment(self) -> dict[str, str]:
        """What a process needs to reach these node groups with the default credential chain."""
        return {"AWS_ENDPOINT_URL_EKS": self.endpoint, "AWS_DEFAULT_REGION": REGION, **CREDENTIALS}

    def stop(self) -> None:
        self._server.stop()
