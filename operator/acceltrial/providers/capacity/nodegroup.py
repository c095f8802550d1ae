"""Capacity from an EKS managed node group (``capacity.provider: eks-nodegroup``), read with
``eks.describe_nodegroup`` and, when ``scale: true``, grown with
``eks.update_nodegroup_config`` (botocore, the default credential chain: IRSA on EKS;
``AWS_ENDPOINT_URL_EKS`` points it elsewhere, such as a test server).

The node group must list the candidate's instance type and taint its nodes with nothing but
``aws.amazon.com/neuron``. When one of its Nodes already has room, nothing is added; otherwise
the trial needs ``scale: true`` and room below ``maxSize`` for the candidate's replicas.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from botocore.session import Session

from acceltrial.api.capacity import EksNodegroupCapacity
from acceltrial.engine.candidate import NEURON_TOLERATION
from acceltrial.engine.capacity import CapacityFinding, CapacityNeed, ScalePlan, nodes_for
from acceltrial.providers.capacity.nodes import schedulable_problem

Manifest = dict[str, Any]
NODEGROUP_LABEL = "eks.amazonaws.com/nodegroup"


class CapacityError(Exception):
    """EKS refused or could not be reached; the message says which call and why."""

    def __init__(self, message: str, temporary: bool = False) -> None:
        super().__init__(message)
        self.temporary = temporary
        """Throttled, a server error or no answer: retrying may help."""


def _client(region: str | None) -> Any:
    return Session().create_client("eks", region_name=region)


class EksNodegroupProvider:
    """One managed node group, as the spec names it."""

    def __init__(
        self,
        settings: EksNodegroupCapacity,
        nodes: list[Manifest],
        per_node: int | None,
        client_for: Callable[[str | None], Any] = _client,
    ) -> None:
        self._settings = settings
        self._nodes = nodes
        self._per_node = per_node
        self._client_for = client_for

    @property
    def source(self) -> str:
        return f"node group {self._settings.cluster_name}/{self._settings.nodegroup_name}"

    def check(self, need: CapacityNeed) -> CapacityFinding:
        try:
            group = self._describe()
        except CapacityError as error:
            if error.temporary:
                return CapacityFinding("eks-nodegroup", self.source, waits=(str(error),))
            return self._problem(str(error))
        instance_types = group.get("instanceTypes") or []
        if need.instance_type not in instance_types:
            listed = ", ".join(instance_types) or "none"
            return self._problem(f"runs {listed}, not {need.instance_type}")
        for taint in group.get("taints") or []:
            if taint.get("effect") in ("NO_SCHEDULE", "NO_EXECUTE") and (
                taint.get("key") != NEURON_TOLERATION["key"]
            ):
                return self._problem(
                    f"taints its nodes with {taint.get('key')}, which the candidate does not "
                    "tolerate"
                )
        mine = [n for n in self._nodes if _labels(n).get(NODEGROUP_LABEL) == self._name]
        if schedulable_problem(mine, need.instance_type, need.resource, need.per_pod) is None:
            return CapacityFinding("eks-nodegroup", self.source)
        return self._plan(group.get("scalingConfig") or {}, need)

    def _plan(self, scaling: dict[str, Any], need: CapacityNeed) -> CapacityFinding:
        desired, maximum = int(scaling.get("desiredSize", 0)), int(scaling.get("maxSize", 0))
        if not self._settings.scale:
            return self._problem(
                f"has no node with room (desiredSize {desired}); set "
                "spec.capacity.eksNodegroup.scale: true to let the trial raise it"
            )
        pods_per_node = (self._per_node or 0) // max(1, need.per_pod)
        if pods_per_node < 1:
            return self._problem(f"{need.instance_type} has no {need.per_pod} {need.resource}")
        nodes = nodes_for(need.replicas, pods_per_node)
        if desired + nodes > maximum:
            return self._problem(
                f"cannot grow by {nodes} node(s): desiredSize {desired}, maxSize {maximum}; "
                "raise the node group's maxSize"
            )
        plan = ScalePlan(desired, maximum, pods_per_node, nodes)
        return CapacityFinding("eks-nodegroup", self.source, plan=plan)

    def set_desired_size(self, size: int) -> None:
        settings = self._settings
        try:
            self._client_for(settings.region).update_nodegroup_config(
                clusterName=settings.cluster_name,
                nodegroupName=settings.nodegroup_name,
                scalingConfig={"desiredSize": size},
            )
        except (BotoCoreError, ClientError) as error:
            raise CapacityError(f"eks.update_nodegroup_config on {self.source}: {error}") from error

    @property
    def _name(self) -> str:
        return self._settings.nodegroup_name

    def _describe(self) -> dict[str, Any]:
        settings = self._settings
        try:
            reply = self._client_for(settings.region).describe_nodegroup(
                clusterName=settings.cluster_name, nodegroupName=settings.nodegroup_name
            )
        except (BotoCoreError, ClientError) as error:
            raise CapacityError(f"eks.describe_nodegroup: {error}", _temporary(error)) from error
        return dict(reply.get("nodegroup") or {})

    def _problem(self, text: str) -> CapacityFinding:
        return CapacityFinding("eks-nodegroup", self.source, problems=(f"{self.source} {text}",))


_TEMPORARY_CODES = frozenset(
    {"ThrottlingException", "TooManyRequestsException", "ServerException",
     "ServiceUnavailableException", "RequestTimeout", "RequestTimeoutException"}
)  # fmt: skip


def _temporary(error: BotoCoreError | ClientError) -> bool:
    """Throttling, a 5xx or no answer at all (botocore errors that are not a refusal)."""
    if isinstance(error, ClientError):
        code = str(error.response.get("Error", {}).get("Code", ""))
        status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        return code in _TEMPORARY_CODES or status >= 500
    return True


def _labels(node: Manifest) -> dict[str, str]:
    return dict(node.get("metadata", {}).get("labels") or {})
