"""Capacity bookkeeping (engine/capacity.py) and the Karpenter NodePool check: the original
node group size is recorded before it is raised, restored exactly when the trial ends without
promotion, kept after promotion; a NodePool admits an instance type by its requirements and
limits, and says why not."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from acceltrial.api.capacity import CapacityStatus
from acceltrial.api.report import Report, VariantFigures, Variants
from acceltrial.api.status import PromotionStatus, TrialStatus
from acceltrial.engine.capacity import (
    CapacityFinding,
    CapacityNeed,
    ScaleNodeGroup,
    ScalePlan,
    capacity_tick,
    counts_launched,
    release_on_delete,
)
from acceltrial.handlers.capacity import instance_shape
from acceltrial.pages.render import capacity_line, markdown
from acceltrial.providers.capacity.karpenter import KarpenterProvider

NOW = datetime(2026, 12, 4, 3, 0, tzinfo=UTC)
LATER = NOW + timedelta(minutes=5)
PLAN = CapacityFinding("eks-nodegroup", "node group inference/neuron", plan=ScalePlan(0, 3, 1, 1))
NEED = CapacityNeed("inf2.8xlarge", "aws.amazon.com/neuroncore", 2, 1)


def status(phase: str, **fields: Any) -> TrialStatus:
    return TrialStatus.model_validate({"phase": phase, **fields})


def recorded(**fields: Any) -> CapacityStatus:
    base = {"provider": "eks-nodegroup", "source": "node group inference/neuron",
            "originalDesiredSize": 0, "desiredSize": 1, "maxSize": 3, "podsPerNode": 1}  # fmt: skip
    return CapacityStatus.model_validate(base | fields)


def test_the_original_size_is_recorded_when_the_trial_starts_and_nothing_is_scaled_yet() -> None:
    after, sizes = capacity_tick(status("Preflight"), status("Progressing"), PLAN, NOW)
    assert sizes == ()
    assert after.capacity is not None
    assert (after.capacity.original_desired_size, after.capacity.desired_size) == (0, 1)
    assert after.capacity.added_at is None


def test_the_next_tick_raises_the_size_once() -> None:
    before = status("Progressing", capacity=recorded().model_dump(by_alias=True))
    after, sizes = capacity_tick(before, before, None, NOW)
    assert sizes == (ScaleNodeGroup(1),)
    assert after.capacity is not None
    assert after.capacity.added_at == NOW
    again, sizes = capacity_tick(after, after, None, LATER)
    assert sizes == ()
    assert again.capacity == after.capacity


@pytest.mark.parametrize("phase", ["RolledBack", "Aborted", "Failed"])
def test_an_ending_without_promotion_restores_the_original_size(phase: str) -> None:
    added = recorded(addedAt=NOW.isoformat(), addedNodes=1)
    before = status("RollingBack", capacity=added.model_dump(by_alias=True))
    after, sizes = capacity_tick(before, status(phase, capacity=before.capacity), None, LATER)
    assert sizes == (ScaleNodeGroup(0),)
    assert after.capacity is not None
    assert after.capacity.released_at == LATER
    assert "restored to 0" in after.capacity.message


def test_promotion_grows_the_group_to_what_all_traffic_needs_within_max_size() -> None:
    added = recorded(addedAt=NOW.isoformat(), addedNodes=1)
    promoting = status(
        "Promoting",
        capacity=added.model_dump(by_alias=True),
        promotion=PromotionStatus(replicas=5, reason="measured").model_dump(by_alias=True),
    )
    after, sizes = capacity_tick(promoting, promoting, None, LATER)
    assert sizes == (ScaleNodeGroup(3),), "five pods want five nodes; maxSize is 3"
    promoted = status("Promoted", capacity=after.capacity)
    kept, sizes = capacity_tick(after, promoted, None, LATER)
    assert sizes == ()
    assert kept.capacity is not None
    assert kept.capacity.kept_nodes == 3


def test_deleting_an_unfinished_trial_restores_and_a_promoted_one_keeps() -> None:
    added = recorded(addedAt=NOW.isoformat()).model_dump(by_alias=True)
    assert release_on_delete(status("Progressing", capacity=added), False) == (ScaleNodeGroup(0),)
    assert release_on_delete(status("Promoted", capacity=added), True) == ()
    assert release_on_delete(status("BakingIn", capacity=added), True) == ()
    planned_only = recorded().model_dump(by_alias=True)
    assert release_on_delete(status("Progressing", capacity=planned_only), False) == ()


def test_a_trial_that_fails_preflight_records_no_capacity() -> None:
    after, sizes = capacity_tick(status("Preflight"), status("Failed"), PLAN, NOW)
    assert (after.capacity, sizes) == (None, ())


def pool(name: str, requirements: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    template = {"spec": {"requirements": requirements, **spec.pop("template", {})}}
    return {"metadata": {"name": name}, "spec": {"template": template, **spec}}


FAMILY_INF2 = {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["inf2"]}


@pytest.mark.parametrize(
    ("requirements", "admitted"),
    [
        ([FAMILY_INF2], True),
        ([{"key": "node.kubernetes.io/instance-type", "operator": "In",
           "values": ["inf2.xlarge", "inf2.8xlarge"]}], True),
        ([{"key": "karpenter.k8s.aws/instance-accelerator-name", "operator": "In",
           "values": ["inferentia2"]}], True),
        ([{"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["g"]}],
         False),
        ([{"key": "karpenter.k8s.aws/instance-family", "operator": "NotIn", "values": ["inf2"]}],
         False),
        ([FAMILY_INF2, {"key": "karpenter.sh/capacity-type", "operator": "In",
                        "values": ["spot", "on-demand"]}], True),
    ],
)  # fmt: skip
def test_a_nodepool_admits_the_instance_type_by_its_requirements(
    requirements: list[dict[str, Any]], admitted: bool
) -> None:
    provider = KarpenterProvider([pool("neuron", requirements)], [], instance_shape("inf2.8xlarge"))
    finding = provider.check(NEED)
    assert (finding.problems == ()) is admitted, finding.problems
    if admitted:
        assert finding.source == "NodePool neuron"
    else:
        assert "NodePool neuron does not admit inf2.8xlarge" in finding.problems[0]


def test_limits_in_use_leave_no_room_and_the_message_says_what_to_change() -> None:
    full = pool("neuron", [FAMILY_INF2], limits={"aws.amazon.com/neuron": "2"})
    full["status"] = {"resources": {"aws.amazon.com/neuron": "2", "cpu": "64"}}
    provider = KarpenterProvider([full], [], instance_shape("inf2.8xlarge"))
    (problem,) = provider.check(
        CapacityNeed("inf2.8xlarge", "aws.amazon.com/neuroncore", 2, 1)
    ).problems
    assert problem == (
        "NodePool neuron limits are exhausted: aws.amazon.com/neuron 2 of 2 in use, and 1 "
        "inf2.8xlarge node(s) need 1 more; raise spec.limits.aws.amazon.com/neuron or use "
        "another NodePool"
    )


def test_an_untolerated_taint_and_a_missing_pool_are_refused() -> None:
    taints = [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]
    tainted = pool("gpu", [FAMILY_INF2], template={"taints": taints})
    provider = KarpenterProvider([tainted], [], instance_shape("inf2.8xlarge"))
    assert "taints its nodes with nvidia.com/gpu" in provider.check(NEED).problems[0]
    named = KarpenterProvider([tainted], [], instance_shape("inf2.8xlarge"), wanted="neuron")
    assert named.check(NEED).problems == (
        "no NodePool neuron in the cluster and no inf2.8xlarge Node",
    )


def test_with_a_nodepool_named_only_its_own_nodes_count_as_room() -> None:
    other = {
        "metadata": {"labels": {"node.kubernetes.io/instance-type": "inf2.8xlarge",
                                "karpenter.sh/nodepool": "neuron"}},
        "status": {"allocatable": {"aws.amazon.com/neuroncore": "2"}},
    }  # fmt: skip
    small = pool("small", [FAMILY_INF2], limits={"cpu": "16"})
    shape = instance_shape("inf2.8xlarge")
    assert KarpenterProvider([small], [other], shape).check(NEED).problems == ()
    (problem,) = KarpenterProvider([small], [other], shape, wanted="small").check(NEED).problems
    assert problem.startswith("NodePool small limits are exhausted: cpu 0 of 16 in use")


def test_the_report_says_what_was_added_and_when_it_was_given_back() -> None:
    given_back = recorded(
        addedAt=NOW.isoformat(), addedNodes=1, releasedAt=LATER.isoformat(),
        message="desiredSize restored to 0",
    )  # fmt: skip
    figures = VariantFigures(instance_type="inf2.8xlarge")
    report = Report(
        trial="t", namespace="n", generated_at=LATER, capacity=given_back,
        variants=Variants(baseline=figures, candidate=figures),
    )  # fmt: skip
    line = (
        "node group inference/neuron (eks-nodegroup): added 1 node(s) at 03:00:00 UTC; "
        "desiredSize restored to 0; given back at 03:05:00 UTC."
    )
    assert capacity_line(report) == line
    assert f"## Capacity\n\n{line}\n" in markdown(report)


def test_karpenter_nodes_are_counted_once_and_kept_after_promotion() -> None:
    karpenter = CapacityFinding("karpenter", "NodePool neuron")
    started, _ = capacity_tick(status("Preflight"), status("Progressing"), karpenter, NOW)
    assert counts_launched(started)
    counted, sizes = capacity_tick(started, started, None, LATER, launched=1)
    assert sizes == ()
    assert counted.capacity is not None
    assert (counted.capacity.added_nodes, counted.capacity.added_at) == (1, LATER)
    assert (
        counted.capacity.message
        == "Karpenter launched 1 node(s) from NodePool neuron for the candidate"
    )
    assert not counts_launched(counted)
    promoted, _ = capacity_tick(counted, status("Promoted", capacity=counted.capacity), None, LATER)
    assert promoted.capacity is not None
    assert promoted.capacity.kept_nodes == 1
