"""The Jobs a training trial runs: the user's GPU template as it is, its Trainium derivation,
the precompile; each owned by the trial, one pod per node, never retried."""

from __future__ import annotations

from typing import Any

import yaml

from acceltrial.api.training import TrainingTrial
from acceltrial.engine.candidate import TrialRef
from acceltrial.engine.training.jobs import training_job
from tests.conftest import EXAMPLES

TRIAL = TrialRef(namespace="training", name="llama-trn1", uid="uid-1")


def example() -> Any:
    body = yaml.safe_load((EXAMPLES / "llama-trn1-training.yaml").read_text().replace("e9", "e+9"))
    return TrainingTrial.model_validate(body).spec


def container(job: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = job["spec"]["template"]["spec"]["containers"][0]
    return result


def test_the_baseline_job_runs_the_users_template_on_its_gpu_nodes() -> None:
    job = training_job(example(), TRIAL, "baseline")

    assert job["metadata"]["name"] == "llama-trn1-baseline"
    assert job["metadata"]["ownerReferences"][0]["kind"] == "TrainingTrial"
    spec = job["spec"]
    assert (spec["completions"], spec["parallelism"], spec["completionMode"]) == (2, 2, "Indexed")
    assert spec["backoffLimit"] == 0
    assert spec["activeDeadlineSeconds"] == 3 * 3600
    pod = spec["template"]["spec"]
    assert pod["nodeSelector"] == {"node.kubernetes.io/instance-type": "p4d.24xlarge"}
    assert pod["restartPolicy"] == "Never"
    assert container(job)["resources"]["limits"]["nvidia.com/gpu"] == 8
    assert {"name": "ACCELTRIAL_TRIAL_STEPS", "value": "200"} in container(job)["env"]
    assert pod["containers"][0]["args"][0] == "--model=meta-llama/Llama-3.1-8B"


def test_the_candidate_job_swaps_image_gpus_for_neuron_devices_and_adds_its_env() -> None:
    job = training_job(example(), TRIAL, "candidate")

    trainer = container(job)
    assert trainer["image"].endswith("llama-finetune:neuronx-2.24")
    assert trainer["resources"]["limits"] == {
        "aws.amazon.com/neuron": 16, "vpc.amazonaws.com/efa": 8,
    }  # fmt: skip
    names = [e["name"] for e in trainer["env"]]
    assert names == ["ACCELTRIAL_TRIAL_STEPS", "NEURON_CC_FLAGS", "XLA_USE_BF16",
                     "NEURON_COMPILE_CACHE_URL"]  # fmt: skip
    pod = job["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"node.kubernetes.io/instance-type": "trn1.32xlarge"}
    assert {"key": "aws.amazon.com/neuron", "operator": "Exists"} in pod["tolerations"]
    assert job["spec"]["template"]["metadata"]["labels"]["acceltrial.dev/variant"] == "candidate"


def test_the_precompile_wraps_the_training_command_in_neuron_parallel_compile() -> None:
    job = training_job(example(), TRIAL, "precompile")

    trainer = container(job)
    assert trainer["command"][:2] == ["neuron_parallel_compile", "torchrun"]
    assert trainer["command"][-1] == "--log-every=1"
    assert "args" not in trainer
    assert job["spec"]["activeDeadlineSeconds"] == 3600
    assert job["metadata"]["name"] == "llama-trn1-precompile"
