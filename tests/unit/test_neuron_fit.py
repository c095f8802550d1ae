"""Neuron preflight: the model against the accelerator memory the pod gets, device counts the
instance accepts, the device plugin, and the scheduler of multi-device pods. Shapes come from the
bundled catalog, as the operator reads them."""

from __future__ import annotations

from typing import Any

import pytest

from acceltrial.api.spec import CandidateSpec
from acceltrial.api.validation import validate_trial
from acceltrial.engine.candidate import TrialRef, derive_deployment
from acceltrial.engine.neuron_fit import (
    device_plugin_problem,
    fit_problems,
    model_need,
    quantity_bytes,
    scheduler_name,
)
from acceltrial.handlers.neuron import with_neuron_scheduler
from acceltrial.providers.pricing.shapes import NeuronShapes
from tests.unit.test_lifecycle import make_spec


def candidate(**fields: Any) -> CandidateSpec:
    body = {"image": "neuron:1", "instanceType": "inf2.8xlarge", "neuronCores": 2} | fields
    return CandidateSpec.model_validate({k: v for k, v in body.items() if v is not None})


def shape(instance_type: str) -> Any:
    found = NeuronShapes(ec2_for=lambda region: pytest.fail("the catalog knows it")).shape(
        instance_type, "us-east-1"
    )
    assert found is not None
    return found


@pytest.mark.parametrize(
    ("text", "expected"),
    [("16Gi", 16 * 1024**3), ("40G", 40e9), ("512Mi", 512 * 1024**2), ("1.5Ti", 1.5 * 1024**4)],
)
def test_memory_quantities(text: str, expected: float) -> None:
    assert quantity_bytes(text) == expected


def test_a_model_too_large_for_the_cores_is_refused_with_the_numbers() -> None:
    problems = fit_problems(candidate(modelMemory="40Gi"), shape("inf2.8xlarge"))
    assert problems == [
        "the model does not fit: it needs 40.0 GiB (modelMemory) but 2 NeuronCores of "
        "inf2.8xlarge have 32.0 GiB of accelerator memory (the instance has 32.0 GiB on "
        "2 NeuronCores; bundled catalog: "
        + shape("inf2.8xlarge").source.split(": ", 1)[1]
        + "); ask for more neuronCores or neuronDevices, or a larger instance"
    ]


def test_the_pod_gets_its_cores_share_of_the_memory() -> None:
    # inf2.48xlarge: 384 GiB on 24 cores, 16 GiB a core.
    assert fit_problems(candidate(instanceType="inf2.48xlarge", neuronCores=2,
                                  modelMemory="32Gi"), shape("inf2.48xlarge")) == []  # fmt: skip
    [problem] = fit_problems(
        candidate(instanceType="inf2.48xlarge", neuronCores=2, modelMemory="33Gi"),
        shape("inf2.48xlarge"),
    )
    assert "needs 33.0 GiB" in problem
    assert "2 NeuronCores of inf2.48xlarge have 32.0 GiB" in problem


def test_the_weights_are_estimated_from_parameters_and_dtype() -> None:
    need = model_need(candidate(modelParameters="70B"))
    assert need is not None
    assert need.bytes == 140e9
    assert "70B parameters in bf16" in need.how
    [problem] = fit_problems(candidate(modelParameters="70B"), shape("inf2.8xlarge"))
    assert "needs 130.4 GiB (the weights alone: 70B parameters in bf16)" in problem
    assert fit_problems(candidate(modelParameters="8B", modelDtype="fp16"),
                        shape("inf2.8xlarge")) == []  # fmt: skip
    assert fit_problems(candidate(modelParameters="10B", modelDtype="fp32"),
                        shape("inf2.8xlarge")) != []  # fmt: skip


def test_without_a_model_size_or_a_shape_nothing_is_refused() -> None:
    assert fit_problems(candidate(), shape("inf2.8xlarge")) == []
    assert fit_problems(candidate(modelMemory="1Ti"), None) == []


def test_more_cores_than_the_instance_has_is_refused() -> None:
    [problem] = fit_problems(candidate(neuronCores=4), shape("inf2.8xlarge"))
    assert problem.startswith("neuronCores 4 exceeds the 2 NeuronCores of inf2.8xlarge")


@pytest.mark.parametrize(("cores", "ok"), [(1, True), (2, True), (4, False), (8, True),
                                           (12, False), (16, True), (32, True)])  # fmt: skip
def test_trn1_cores_must_span_1_4_8_or_16_devices(cores: int, ok: bool) -> None:
    problems = fit_problems(
        candidate(instanceType="trn1.32xlarge", neuronCores=cores), shape("trn1.32xlarge")
    )
    assert (problems == []) == ok
    if not ok:
        assert "takes 1, 4, 8 or 16 devices per pod" in problems[0]


@pytest.mark.parametrize(("devices", "ok"), [(1, True), (2, False), (4, True), (6, False),
                                             (16, True)])  # fmt: skip
def test_trn1_device_counts_are_validated_at_admission(devices: int, ok: bool) -> None:
    spec = make_spec(candidate={"image": "n:1", "instanceType": "trn1n.32xlarge",
                                "neuronCores": None, "neuronDevices": devices})  # fmt: skip
    body = {"apiVersion": "acceltrial.dev/v1alpha1", "kind": "AcceleratorTrial",
            "metadata": {"name": "t", "namespace": "n"},
            "spec": spec.model_dump(mode="json", by_alias=True, exclude_none=True)}  # fmt: skip
    problems = [str(p) for p in validate_trial(body)]
    assert (problems == []) == ok, problems
    if not ok:
        assert any("1, 4, 8 or 16 Neuron devices" in p for p in problems)


def node(instance_type: str, **allocatable: str) -> dict[str, Any]:
    labels = {"node.kubernetes.io/instance-type": instance_type}
    return {
        "metadata": {"name": "n1", "labels": labels},
        "status": {"allocatable": {"cpu": "32", **allocatable}},
    }


def test_nodes_without_neuron_resources_have_no_device_plugin() -> None:
    problem = device_plugin_problem([node("inf2.8xlarge")], "inf2.8xlarge")
    assert problem is not None
    assert "the Neuron device plugin is not running" in problem
    with_plugin = node("inf2.8xlarge", **{"aws.amazon.com/neuroncore": "2"})
    assert device_plugin_problem([with_plugin], "inf2.8xlarge") is None
    devices_only = node("inf2.8xlarge", **{"aws.amazon.com/neuron": "1"})
    assert device_plugin_problem([devices_only], "inf2.8xlarge") is None
    assert device_plugin_problem([node("g5.xlarge")], "inf2.8xlarge") is None, "no such nodes"


def test_multi_device_pods_use_the_neuron_scheduler_where_there_is_one() -> None:
    big = shape("inf2.48xlarge")
    named = {"schedulerName": "neuron-scheduler"}
    assert scheduler_name(candidate(instanceType="inf2.48xlarge", neuronCores=4, **named),
                          big) == "neuron-scheduler"  # fmt: skip
    assert scheduler_name(candidate(instanceType="inf2.48xlarge", neuronCores=1, **named),
                          big) is None, "one core needs no extension"  # fmt: skip
    assert scheduler_name(candidate(neuronCores=2, **named), shape("inf2.8xlarge")) is None, (
        "one device: the default scheduler places it whole"
    )
    assert scheduler_name(candidate(instanceType="inf2.48xlarge", neuronCores=4), big) is None


def test_the_candidate_deployment_names_the_neuron_scheduler_only_when_it_needs_it() -> None:
    baseline = {
        "metadata": {"name": "llama3-gpu"},
        "spec": {"template": {"spec": {"containers": [{"name": "vllm", "image": "gpu:1"}]}}},
    }
    trial = TrialRef("t", "serving", "uid")
    wide = make_spec(candidate={"instanceType": "inf2.48xlarge", "neuronCores": 4,
                                "schedulerName": "neuron-scheduler"})  # fmt: skip
    pod = with_neuron_scheduler(derive_deployment(baseline, None, wide, trial), wide)
    assert pod["spec"]["template"]["spec"]["schedulerName"] == "neuron-scheduler"
    narrow = make_spec(candidate={"schedulerName": "neuron-scheduler"})
    pod = with_neuron_scheduler(derive_deployment(baseline, None, narrow, trial), narrow)
    assert "schedulerName" not in pod["spec"]["template"]["spec"], "one inf2.8xlarge device"
