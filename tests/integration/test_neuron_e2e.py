"""Neuron preflight and the compile gate end to end: `kopf run -m acceltrial.handlers` against the
real control plane when it is built (else the emulator), with a real Prometheus scraping the
simulated fleet.

A model too large for the candidate's accelerator memory ends the trial Failed with the numbers,
compiled artifacts missing from S3 (moto in server mode) with the URI; a compile Job that fails
ends it Failed with the Job's reason and log tail; in each the candidate is never created and the
route never touched. A compile Job that succeeds lets the trial go on,
and its time is in the report. The sandbox runs the compile Job's pod as its template's
annotations say (sandbox.acceltrial.dev/exit-code, run-seconds, log: sandbox/jobs.py)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.session import Session
from moto.server import ThreadedMotoServer

from tests.integration.e2e_kit import (  # the api fixture, one instance per module
    BACKENDS,
    ROUTE,
    api,
    backend_of,
    backend_refs,
    candidate_exists,
    on_backend_of,
    start,
    start_operator,
    wait_for,
)
from tests.integration.operator_account import operator_kubeconfig
from tests.integration.prometheus_server import running_prometheus
from tests.integration.simulated import STEADY, serving
from tests.sandbox.conftest import Api, Backend, why
from tests.together import Batch, start_together, together

pytestmark = pytest.mark.slow
__all__ = ["api"]  # a re-exported fixture

PROFILES = {
    ("compile-fails", "baseline"): STEADY,
    ("compile-ok", "baseline"): STEADY,
    ("compile-ok", "candidate"): STEADY,
}
NAMESPACES = ("too-large", "no-artifacts", "compile-fails", "compile-ok")
NO_PROMETHEUS = "http://prometheus.invalid:9090"  # for trials that end before any query
COMPILER_LOG = (
    "Compiling the model for 2 NeuronCores\n"
    "ERROR 70001: [NCC_EVRF024] Operator aten::_fft_r2c is not supported\n"
    "neuronx-cc failed with exit code 70"
)


def compile_spec(exit_code: int, log: str) -> dict[str, Any]:
    annotations = {
        "sandbox.acceltrial.dev/exit-code": str(exit_code),
        "sandbox.acceltrial.dev/run-seconds": "1",
        "sandbox.acceltrial.dev/log": log,
    }
    container = {"name": "neuronx-cc", "image": "pytorch-inference-neuronx:sdk-2.21",
                 "command": ["neuronx-cc", "compile", "--target", "inf2"]}  # fmt: skip
    return {"template": {"metadata": {"annotations": annotations},
                         "spec": {"containers": [container]}}, "timeout": "60s"}  # fmt: skip


@pytest.fixture(scope="module", params=BACKENDS)
def cluster(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """The real control plane when built (the compile Job's log served by kwok's kubelet
    server), else the emulator; both with ACCELTRIAL_E2E_REAL=1."""
    with backend_of(request.param, nodes_per_group=8) as running:
        yield running


@pytest.fixture(scope="module")
def prometheus_url(cluster: Backend, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data = tmp_path_factory.mktemp("prom") / "data"
    with serving(cluster.access, PROFILES) as scrape, running_prometheus(data, scrape) as url:
        yield url


@pytest.fixture(scope="module")
def s3() -> Iterator[dict[str, str]]:
    """moto's S3 with a bucket ``models`` holding one compiled model; the settings that point
    botocore at it."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server.get_host_and_port()
    settings = {
        "AWS_ENDPOINT_URL": f"http://{host}:{port}",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    client = Session().create_client(
        "s3", region_name="us-east-1", endpoint_url=settings["AWS_ENDPOINT_URL"],
        aws_access_key_id="testing", aws_secret_access_key="testing",
    )  # fmt: skip
    client.create_bucket(Bucket="models")
    client.put_object(Bucket="models", Key="neff/llama3-8b/model.neff", Body=b"NEFF")
    yield settings
    server.stop()


@pytest.fixture(scope="module")
def operator(
    cluster: Backend, api: Api, s3: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    # On the real control plane: the chart's ServiceAccount with exactly the chart's RBAC.
    identity = operator_kubeconfig(cluster, tmp_path_factory.mktemp("identity"))
    with pytest.MonkeyPatch.context() as patch:
        for name, value in s3.items():
            patch.setitem(os.environ, name, value)  # the operator's AWS settings, as IRSA's
        process = start_operator(identity, tmp_path_factory.mktemp("operator"), *NAMESPACES)
    try:
        yield
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture(scope="module")
def together_batch(
    request: pytest.FixtureRequest,
    cluster: Backend,
    api: Api,
    prometheus_url: str,
    operator: None,
) -> Iterator[Batch]:
    """Each test drives a trial in a namespace of its own: they run at once (tests/together.py),
    on the backend of this module's parameter."""
    shared = {"cluster": cluster, "api": api, "prometheus_url": prometheus_url,
              "operator": operator}  # fmt: skip
    with start_together(request, shared, in_group=on_backend_of(cluster)) as batch:
        yield batch


def jobs(api: Api, namespace: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = api.get(f"/apis/batch/v1/namespaces/{namespace}/jobs").body[
        "items"
    ]
    return items


@together
def test_a_model_too_large_for_the_instance_ends_failed_with_the_numbers(
    api: Api, operator: None
) -> None:
    path = start(api, "too-large", NO_PROMETHEUS, candidate={"modelMemory": "40Gi"})
    status = wait_for(api, path, ("Failed",), timeout=60)
    assert "the model does not fit: it needs 40.0 GiB (modelMemory) but 2 NeuronCores of " \
           "inf2.8xlarge have 32.0 GiB of accelerator memory" in status["message"]  # fmt: skip
    assert status["decision"]["verdict"] == "none"
    assert not candidate_exists(api, "too-large")
    assert backend_refs(api, "too-large") == [ROUTE], "the route was never touched"


@together
def test_compiled_artifacts_missing_from_s3_end_the_trial_naming_them(
    api: Api, operator: None
) -> None:
    missing = "s3://models/neff/llama3-70b/"
    path = start(api, "no-artifacts", NO_PROMETHEUS, candidate={"compiledArtifacts": missing})
    status = wait_for(api, path, ("Failed",), timeout=60)
    assert f"compiledArtifacts {missing} holds no objects" in status["message"]
    assert not candidate_exists(api, "no-artifacts")
    assert backend_refs(api, "no-artifacts") == [ROUTE], "the route was never touched"


@together
def test_a_failing_compile_job_ends_failed_with_its_reason_and_no_candidate(
    api: Api, prometheus_url: str, operator: None
) -> None:
    path = start(api, "compile-fails", prometheus_url,
                 candidate={"compile": compile_spec(70, COMPILER_LOG)})  # fmt: skip
    status = wait_for(api, path, ("Failed", "Progressing", "Promoted"), timeout=120)
    assert status["phase"] == "Failed", why(status)
    reason = status["decision"]["reason"]
    assert reason.startswith(
        "the compile Job llama3-inf2-compile failed: BackoffLimitExceeded: "
        "Job has reached the specified backoff limit; log tail:\n"
    )
    assert reason.endswith(COMPILER_LOG)
    assert "the candidate was never created" in status["message"]
    assert status["compile"]["outcome"] == "Failed"
    assert status["compile"]["seconds"] >= 1
    assert not candidate_exists(api, "compile-fails")
    replicasets = api.get("/apis/apps/v1/namespaces/compile-fails/replicasets").body["items"]
    assert [
        r["metadata"]["name"] for r in replicasets if "candidate" in r["metadata"]["name"]
    ] == []
    assert backend_refs(api, "compile-fails") == [ROUTE], "nothing was exposed"
    [job] = jobs(api, "compile-fails")
    assert job["metadata"]["ownerReferences"][0]["name"] == "llama3-inf2", "goes with the trial"
    report = api.get("/api/v1/namespaces/compile-fails/configmaps/llama3-inf2-report").body
    notes = json.loads(report["data"]["report.json"])["compatibility"]["notes"]
    assert any("the Neuron compile Job llama3-inf2-compile failed" in note for note in notes)


@together
def test_a_successful_compile_lets_the_trial_run_and_its_time_is_reported(
    api: Api, prometheus_url: str, operator: None
) -> None:
    path = start(api, "compile-ok", prometheus_url,
                 candidate={"compile": compile_spec(0, "compiled 1 NEFF")})  # fmt: skip
    status = wait_for(api, path, ("Promoted", "RolledBack", "Failed"), timeout=150)
    assert status["phase"] == "Promoted", why(status)
    assert status["compile"]["outcome"] == "Succeeded"
    assert status["compile"]["seconds"] >= 1
    report = api.get("/api/v1/namespaces/compile-ok/configmaps/llama3-inf2-report").body
    body = json.loads(report["data"]["report.json"])
    assert body["compile"]["seconds"] == status["compile"]["seconds"]
    assert any(n.startswith("compiled for Neuron by Job llama3-inf2-compile in ")
               for n in body["compatibility"]["notes"])  # fmt: skip
