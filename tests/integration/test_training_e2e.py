"""TrainingTrials end to end on the real control plane: `kopf run -m acceltrial.handlers` with
the chart's RBAC, the real Job controller and scheduler, kwok's nodes of the trial's instance
types (the Neuron ones tainted as EKS taints them), and each pod's log read through the API
server (the kubelet's pods/<name>/log, served by kwok).

A pod prints the log the test bed gives it (``sandbox.acceltrial.dev/log``, on the template;
the candidate's through ``candidate.podTemplatePatch``), in the formats training scripts use,
and ends with ``sandbox.acceltrial.dev/exit-code`` when it has one. Four trials at once: a
cheaper candidate with matching loss (Recommended), one whose loss ends 15% higher
(NotRecommended, naming the loss), a precompile that fails (Failed, its log lines kept), and
one asking more Trainium nodes than the cluster has (PreflightFailed, no Job created)."""

from __future__ import annotations

import copy
import json
import math
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from acceltrial_testbed.sandbox.realplane.plane import RealControlPlane
from acceltrial_testbed.sandbox.topology import NodeGroup, Topology
from acceltrial_testbed.sandbox.trainer import HOLD, TRAINER, Behaviour
from tests.conftest import EXAMPLES, REPO, environ_with
from tests.integration.e2e_kit import start_operator
from tests.integration.operator_account import operator_kubeconfig
from tests.sandbox.conftest import CRDS, Api, eventually, require_real_control_plane, served

pytestmark = pytest.mark.slow

TRAININGS = "/apis/acceltrial.dev/v1alpha1/namespaces/{}/trainingtrials"
JOBS = "/apis/batch/v1/namespaces/{}/jobs"
NAMESPACES = ("train-ok", "train-diverges", "train-compile-fails", "train-no-room",
              "train-deleted")  # fmt: skip
LOG = "sandbox.acceltrial.dev/log"
EXIT_CODE = "sandbox.acceltrial.dev/exit-code"


def node_group(name: str, instance_type: str, resources: dict[str, str], **extra: Any) -> NodeGroup:
    allocatable = {"cpu": "95", "memory": "1100Gi", "pods": "110", **resources}
    return NodeGroup.model_validate(
        {"name": name, "instanceType": instance_type, "count": 2, "allocatable": allocatable,
         **extra}
    )  # fmt: skip


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealControlPlane]:
    require_real_control_plane()
    topology = Topology(nodeGroups=[
        node_group("gpu-p4d", "p4d.24xlarge",
                   {"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "4"}),
        node_group("neuron-trn1", "trn1.32xlarge",
                   {"aws.amazon.com/neuron": "16", "vpc.amazonaws.com/efa": "8"},
                   taints=[{"key": "aws.amazon.com/neuron", "value": "true",
                            "effect": "NoSchedule"}]),
    ])  # fmt: skip
    with RealControlPlane(topology=topology, acceleratortrial_crd=False) as plane:
        api = Api.to(plane.access)
        for plural in ("acceleratortrials", "trainingtrials"):
            crd = yaml.safe_load((REPO / "crds" / f"acceltrial.dev_{plural}.yaml").read_text())
            assert api.post(CRDS, crd).status == 201
            served(api, crd["metadata"]["name"], TRAININGS.format("default").replace(
                "trainingtrials", plural))  # fmt: skip
        for namespace in NAMESPACES:
            api.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                            "metadata": {"name": namespace}})  # fmt: skip
        identity = operator_kubeconfig(plane, tmp_path_factory.mktemp("identity"))
        logs = tmp_path_factory.mktemp("operator")
        process = start_operator(identity, logs, *NAMESPACES)
        try:
            yield plane
        finally:
            process.terminate()
            process.wait(timeout=30)


@pytest.fixture(scope="module")
def api(plane: RealControlPlane) -> Api:
    return Api.to(plane.access)


def trainer_log(steps: int, tokens_per_second: float, loss_end: float) -> str:
    """JSON lines as a training script prints them: a few lines of start-up, then a step each."""
    lines = ["loading checkpoint shards: 100%", "compiling graphs"]
    for step in range(1, steps + 1):
        wobble = 1 + 0.01 * math.sin(step * 1.7)
        loss = 4.0 + (loss_end - 4.0) * step / steps
        lines.append(
            json.dumps(
                {
                    "step": step,
                    "loss": round(loss, 5),
                    "tokens_per_second": round(tokens_per_second * wobble, 1),
                }
            )
        )
    return "\n".join(lines)


def training_trial(namespace: str, *, candidate_loss: float, precompile_fails: bool = False
                   ) -> dict[str, Any]:  # fmt: skip
    body: dict[str, Any] = yaml.safe_load(
        (EXAMPLES / "llama-trn1-training.yaml").read_text().replace("2.0e9", "2.0e+9")
    )
    body["metadata"] = {"name": "llama-trn1", "namespace": namespace}
    spec = body["spec"]
    spec["run"] = {"steps": 40, "warmupSteps": 5, "sequenceLength": 4096, "timeout": "5m"}
    spec["baseline"]["template"]["metadata"] = {"annotations": {LOG: trainer_log(40, 40_000, 2.0)}}
    candidate_annotations = {LOG: trainer_log(40, 80_000, candidate_loss)}
    if precompile_fails:
        candidate_annotations = {
            LOG: "neuron_parallel_compile: 12 graphs\nERROR neuronx-cc: Estimated peak HBM "
            "usage (18.2GB) exceeds 16GB; compilation failed",
            EXIT_CODE: "1",
        }
    else:
        spec.pop("precompile")
        spec.pop("compileCache")
    spec["candidate"]["podTemplatePatch"] = {"metadata": {"annotations": candidate_annotations}}
    return body


def wait_for_end(api: Api, namespace: str, timeout: float = 120) -> dict[str, Any]:
    path = f"{TRAININGS.format(namespace)}/llama-trn1"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = api.get(path).body.get("status") or {}
        if status.get("phase") in ("Recommended", "NotRecommended", "Failed"):
            return dict(status)
        time.sleep(0.5)
    pytest.fail(f"{namespace}: no decision within {timeout:g}s: {api.get(path).body}")


def test_four_training_trials_end_as_their_runs_say(api: Api, plane: RealControlPlane) -> None:
    no_room = training_trial("train-no-room", candidate_loss=2.0)
    no_room["spec"]["candidate"]["nodes"] = 3  # the cluster has two trn1.32xlarge
    trials = {
        "train-ok": training_trial("train-ok", candidate_loss=2.02),
        "train-diverges": training_trial("train-diverges", candidate_loss=2.3),
        "train-compile-fails": training_trial("train-compile-fails", candidate_loss=2.0,
                                              precompile_fails=True),
        "train-no-room": no_room,
    }  # fmt: skip
    for namespace, body in trials.items():
        reply = api.post(TRAININGS.format(namespace), copy.deepcopy(body))
        assert reply.status == 201, reply.body

    ok = wait_for_end(api, "train-ok")
    assert ok["phase"] == "Recommended", ok.get("message")
    assert ok["runs"]["baseline"]["tokensPerSecond"]["mean"] == pytest.approx(40_000, rel=0.01)
    assert ok["runs"]["candidate"]["tokensPerSecond"]["mean"] == pytest.approx(80_000, rel=0.01)
    assert ok["runs"]["candidate"]["logFormats"] == ["json"]
    economics = ok["economics"]
    # By hand, from the catalog's prices and the trial's figures (start-up a few seconds).
    hours = 2e9 / 40_000 / 3600
    assert economics["baseline"]["costPerRun"] == pytest.approx(hours * 21.957642 * 2, rel=0.01)
    assert economics["candidate"]["hoursPerRun"] == pytest.approx(hours / 2, rel=0.01)

    # `acceltrial report` shows it, as a user reads it.
    shown = subprocess.run(
        [sys.executable, "-m", "acceltrial.cli.main", "report", "llama-trn1", "-n", "train-ok"],
        env=environ_with(KUBECONFIG=str(plane.kubeconfig)), capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    page = shown.stdout
    assert page.startswith("# Training trial report: train-ok/llama-trn1")
    assert "| cost per full run |" in page

    diverges = wait_for_end(api, "train-diverges")
    assert diverges["phase"] == "NotRecommended"
    assert diverges["decision"]["reasonCode"] == "CriterionFailed"
    assert diverges["decision"]["reason"].startswith("loss-parity: loss_gap +1")

    failed = wait_for_end(api, "train-compile-fails")
    assert failed["phase"] == "Failed"
    assert failed["decision"]["reasonCode"] == "CompileFailed"
    assert "Estimated peak HBM usage (18.2GB) exceeds 16GB" in failed["decision"]["reason"]
    assert "candidate" not in (failed.get("runs") or {}) or (
        failed["runs"]["candidate"]["state"] == "Failed"
    )

    no_room = wait_for_end(api, "train-no-room")
    assert no_room["decision"]["reasonCode"] == "PreflightFailed"
    assert no_room["decision"]["reason"] == (
        "spec.candidate.nodes: 3 trn1.32xlarge nodes with 16 allocatable aws.amazon.com/neuron "
        "are needed, the cluster has 2; lower spec.candidate.nodes, add nodes, or use "
        "spec.capacity.provider karpenter or eks-nodegroup"
    )
    assert api.get(JOBS.format("train-no-room")).body["items"] == []

    # Capacity given back: no run's Job is left running.
    for namespace in NAMESPACES[:3]:
        jobs = api.get(JOBS.format(namespace)).body["items"]
        assert all(j["metadata"].get("deletionTimestamp") or (j.get("status") or {}).get(
            "conditions") for j in jobs), jobs  # fmt: skip


def test_deleting_a_trial_mid_run_deletes_its_jobs_and_nothing_else(api: Api) -> None:
    """The trial owns its Jobs (and they their pods): the API server's garbage collector
    deletes them with it; a ConfigMap of the user's in the namespace stays."""
    namespace = "train-deleted"
    body = training_trial(namespace, candidate_loss=2.0)
    spec = body["spec"]
    # The simulated trainer (sandbox/trainer.py) keeps the pods running while it prints.
    slow = Behaviour(tokens_per_second=40_000, startup_seconds=1).model_dump_json(by_alias=True)
    spec["baseline"]["template"]["metadata"] = {"annotations": {TRAINER: slow, **HOLD}}
    spec["candidate"]["podTemplatePatch"] = {"metadata": {"annotations": {TRAINER: slow, **HOLD}}}
    spec["run"]["steps"] = 400
    users = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "users-own"},
             "data": {"a": "b"}}  # fmt: skip
    assert api.post(f"/api/v1/namespaces/{namespace}/configmaps", users).status == 201
    assert api.post(TRAININGS.format(namespace), body).status == 201
    path = f"{TRAININGS.format(namespace)}/llama-trn1"
    eventually(lambda: ((api.get(path).body.get("status") or {}).get("runs") or {}).get(
        "baseline", {}).get("steps"), timeout=90)  # fmt: skip
    assert len(api.get(JOBS.format(namespace)).body["items"]) == 2

    assert api.delete(path).status == 200

    eventually(lambda: api.get(JOBS.format(namespace)).body["items"] == [], timeout=60)
    eventually(lambda: api.get(f"/api/v1/namespaces/{namespace}/pods").body["items"] == [],
               timeout=60)  # fmt: skip
    assert api.get(f"/api/v1/namespaces/{namespace}/configmaps/users-own").status == 200
