"""Where the candidate's nodes come from (``spec.capacity``) and what the trial added
(``status.capacity``).

Three providers, chosen by name: ``nodes`` (the Nodes that exist now), ``karpenter``
(karpenter.sh/v1 NodePools that admit the candidate's instance type and have room under their
limits; Karpenter provisions the nodes for the pending candidate pods) and ``eks-nodegroup``
(an EKS managed node group; with ``scale: true`` the operator raises its desiredSize for the
trial and restores it exactly when the trial ends without promotion).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import ConfigDict, Field

from acceltrial.api.base import ApiModel, ObjectName, Pattern, cel, cel_rules

CapacityProviderName = Literal["nodes", "karpenter", "eks-nodegroup"]
Region = Annotated[
    str, Pattern(r"^[a-z]{2}(-[a-z]+)+-[0-9]$", "an AWS region such as us-east-1", 32)
]
AwsName = Annotated[
    str, Pattern(r"^[0-9A-Za-z][A-Za-z0-9\-_]*$", "an EKS name such as inference-prod", 100)
]


class KarpenterCapacity(ApiModel):
    """Settings of the karpenter capacity provider."""

    node_pool: ObjectName | None = None
    """The NodePool to use; by default any NodePool whose requirements admit the candidate's
    instance type and whose limits leave room."""


class EksNodegroupCapacity(ApiModel):
    """Settings of the eks-nodegroup capacity provider."""

    cluster_name: AwsName
    """The EKS cluster's name."""
    nodegroup_name: AwsName
    """The managed node group that runs the candidate's instance type."""
    region: Region | None = None
    """The cluster's region (default: the operator's AWS region)."""
    scale: bool = False
    """true: the operator may raise the node group's desiredSize (within maxSize) for the
    candidate, and restores it exactly when the trial ends without promotion; false: the
    node group must already have a node with room."""


class CapacitySpec(ApiModel):
    """Where the candidate's nodes come from."""

    model_config = ConfigDict(
        json_schema_extra=cel_rules(
            cel(
                "self.provider != 'eks-nodegroup' || has(self.eksNodegroup)",
                "provider eks-nodegroup needs eksNodegroup.clusterName and nodegroupName",
            ),
            cel(
                "self.provider == 'eks-nodegroup' || !has(self.eksNodegroup)",
                "eksNodegroup settings are only used with provider eks-nodegroup",
            ),
            cel(
                "self.provider == 'karpenter' || !has(self.karpenter)",
                "karpenter settings are only used with provider karpenter",
            ),
        )
    )

    provider: CapacityProviderName = "nodes"
    """nodes: a Node that exists now must take a candidate pod; karpenter: a NodePool that
    admits the instance type and has room (the trial waits for the nodes Karpenter provisions,
    within progressDeadline); eks-nodegroup: an EKS managed node group."""
    karpenter: KarpenterCapacity | None = None
    """Settings of the karpenter provider."""
    eks_nodegroup: EksNodegroupCapacity | None = None
    """Settings of the eks-nodegroup provider."""


class CapacityStatus(ApiModel):
    """Capacity the trial added, and when it was given back."""

    provider: CapacityProviderName
    """The provider that found the capacity."""
    source: str = Field(max_length=256)
    """Where the nodes come from: NodePool <name> or node group <cluster>/<nodegroup>."""
    original_desired_size: int | None = Field(default=None, ge=0)
    """The node group's desiredSize before the trial (restored when the trial ends without
    promotion)."""
    desired_size: int | None = Field(default=None, ge=0)
    """The desiredSize the trial asked for."""
    max_size: int | None = Field(default=None, ge=0)
    """The node group's maxSize when the trial started (desiredSize never goes beyond it)."""
    pods_per_node: int | None = Field(default=None, ge=1)
    """Candidate pods one node of the instance type holds (for the nodes promotion needs)."""
    added_nodes: int = Field(default=0, ge=0)
    """Nodes the trial asked for beyond what was there."""
    added_at: datetime | None = None
    """When the capacity was added."""
    released_at: datetime | None = None
    """When it was given back."""
    kept_nodes: int | None = Field(default=None, ge=0)
    """After promotion: the added nodes left for the promoted candidate."""
    message: str = Field(default="", max_length=1024)
    """What happened to the capacity, in a sentence."""
