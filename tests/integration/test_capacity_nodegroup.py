"""The eks-nodegroup capacity provider against moto's EKS API in server mode, over real HTTP
(as the operator reaches EKS: botocore, the default credential chain, AWS_ENDPOINT_URL_EKS)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from botocore.config import Config
from botocore.session import Session

from acceltrial.api.capacity import EksNodegroupCapacity
from acceltrial.engine.capacity import CapacityNeed, ScalePlan
from acceltrial.providers.capacity.nodegroup import CapacityError, EksNodegroupProvider
from acceltrial_testbed.sandbox.eks import SandboxEks
from acceltrial_testbed.sandbox.topology import Topology

# moto's EKS API takes seconds to create a cluster and its node groups.
pytestmark = pytest.mark.slow
INF2 = {"cpu": "31850m", "memory": "120Gi", "aws.amazon.com/neuroncore": "2"}
TOPOLOGY = Topology.model_validate({
    "cluster": "inference",
    "nodeGroups": [
        {"name": "neuron", "instanceType": "inf2.8xlarge", "count": 0, "allocatable": INF2,
         "managed": {"maxSize": 2},
         "taints": [{"key": "aws.amazon.com/neuron", "value": "true", "effect": "NoSchedule"}]},
        {"name": "gpu", "instanceType": "g5.xlarge", "count": 1, "allocatable": INF2,
         "managed": {"maxSize": 4},
         "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]},
    ],
})  # fmt: skip
NEED = CapacityNeed("inf2.8xlarge", "aws.amazon.com/neuroncore", 2, 1)


@pytest.fixture(scope="module")
def eks() -> Iterator[SandboxEks]:
    server = SandboxEks(TOPOLOGY).start()
    with pytest.MonkeyPatch.context() as patch:
        for name, value in server.environment().items():
            patch.setenv(name, value)
        yield server
    server.stop()


def provider(group: str = "neuron", scale: bool = True, **settings: object) -> EksNodegroupProvider:
    spec = EksNodegroupCapacity(clusterName="inference", nodegroupName=group, scale=scale,
                                **settings)  # type: ignore[arg-type]  # fmt: skip
    return EksNodegroupProvider(spec, [], per_node=2)


def test_a_group_at_zero_is_planned_to_grow_and_resized_through_the_api(eks: SandboxEks) -> None:
    finding = provider().check(NEED)
    assert finding.problems == ()
    assert finding.plan == ScalePlan(desired_size=0, max_size=2, pods_per_node=1, nodes_to_add=1)
    provider().set_desired_size(1)
    group = eks.client().describe_nodegroup(clusterName="inference", nodegroupName="neuron")
    assert group["nodegroup"]["scalingConfig"]["desiredSize"] == 1
    provider().set_desired_size(0)


@pytest.mark.parametrize(
    ("group", "scale", "replicas", "problem"),
    [
        ("neuron", False, 1, "node group inference/neuron has no node with room (desiredSize 0); "
                             "set spec.capacity.eksNodegroup.scale: true"),
        ("neuron", True, 3, "node group inference/neuron cannot grow by 3 node(s): desiredSize 0, "
                            "maxSize 2; raise the node group's maxSize"),
        ("gpu", True, 1, "node group inference/gpu runs g5.xlarge, not inf2.8xlarge"),
        ("missing", True, 1, "node group inference/missing eks.describe_nodegroup: An error "
                             "occurred (ResourceNotFoundException)"),
    ],
)  # fmt: skip
def test_what_cannot_work_is_refused_with_the_fix(
    eks: SandboxEks, group: str, scale: bool, replicas: int, problem: str
) -> None:
    need = CapacityNeed(NEED.instance_type, NEED.resource, NEED.per_pod, replicas)
    (found,) = provider(group, scale).check(need).problems
    assert found.startswith(problem), found


def test_a_refused_resize_is_an_error_naming_the_call(eks: SandboxEks) -> None:
    with pytest.raises(CapacityError, match=r"eks.update_nodegroup_config on node group "):
        provider("missing").set_desired_size(1)


def test_an_unreachable_eks_is_waited_for_not_a_failure() -> None:
    spec = EksNodegroupCapacity(clusterName="inference", nodegroupName="neuron")

    def unreachable(region: str | None) -> object:
        return Session().create_client(
            "eks", region_name="us-east-1", endpoint_url="http://127.0.0.1:9",
            aws_access_key_id="testing", aws_secret_access_key="testing",
            config=Config(retries={"max_attempts": 1}, connect_timeout=1),
        )  # fmt: skip

    finding = EksNodegroupProvider(spec, [], 2, client_for=unreachable).check(NEED)
    assert finding.problems == ()
    (wait,) = finding.waits
    assert wait.startswith("eks.describe_nodegroup: Could not connect to the endpoint URL")
