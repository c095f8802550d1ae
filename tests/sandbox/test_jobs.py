"""Contract: a Job runs its pod to the end as the real Job controller and kubelet would, as far
as the compile gate observes it (batch/v1 Job conditions and counts, the pod's labels and phase);
the pod ends as its template's sandbox.acceltrial.dev/exit-code annotation says, on the emulator
(sandbox/jobs.py) and on the real control plane (kwok-job-stages.yaml). Both serve the pod's log
(the ``log`` annotation; on the real plane through kwok's kubelet server); only the emulator
honours ``run-seconds``: kwok ends the pod after 1 s."""

from __future__ import annotations

from typing import Any

import pytest

from tests.sandbox.conftest import Api, eventually

pytestmark = pytest.mark.controllers

JOBS = "/apis/batch/v1/namespaces/default/jobs"
PODS = "/api/v1/namespaces/default/pods"


def job(name: str, exit_code: int, log: str = "", **spec: Any) -> dict[str, Any]:
    annotations = {
        "sandbox.acceltrial.dev/exit-code": str(exit_code),
        "sandbox.acceltrial.dev/run-seconds": "0.2",
        "sandbox.acceltrial.dev/log": log,
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "backoffLimit": 0,
            **spec,
            "template": {
                "metadata": {"annotations": annotations},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "neuronx-cc", "image": "compiler:1"}],
                },
            },
        },
    }


def ended(api: Api, name: str) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        body: dict[str, Any] = api.get(f"{JOBS}/{name}").body
        types = {c["type"] for c in body.get("status", {}).get("conditions") or []}
        return body if types & {"Complete", "Failed"} else None

    # The real Job controller waits 10 s (then more) before it replaces a failed pod.
    result: dict[str, Any] = eventually(check, timeout=60)
    return result


def conditions(body: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in body["status"]["conditions"]}


def test_a_job_whose_pod_exits_zero_completes(api: Api) -> None:
    assert api.post(JOBS, job("ok", 0)).status == 201
    body = ended(api, "ok")
    assert conditions(body)["Complete"] == ("True", "CompletionsReached")
    assert body["status"]["succeeded"] == 1
    assert body["status"]["completionTime"] >= body["status"]["startTime"]
    [pod] = api.get(PODS, labelSelector="batch.kubernetes.io/job-name=ok").body["items"]
    assert pod["metadata"]["name"].startswith("ok-")
    assert pod["metadata"]["ownerReferences"][0]["kind"] == "Job"
    assert pod["status"]["phase"] == "Succeeded"
    terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (0, "Completed")


def test_a_failing_pod_fails_the_job_past_its_backoff_limit(api: Api) -> None:
    assert api.post(JOBS, job("bad", 70, backoffLimit=1)).status == 201
    body = ended(api, "bad")
    assert conditions(body)["Failed"] == ("True", "BackoffLimitExceeded")
    failed = next(c for c in body["status"]["conditions"] if c["type"] == "Failed")
    assert failed["message"] == "Job has reached the specified backoff limit"
    assert body["status"]["failed"] == 2, "one try and one retry"
    pods = api.get(PODS, labelSelector="job-name=bad").body["items"]
    assert [p["status"]["phase"] for p in pods] == ["Failed", "Failed"]
    terminated = pods[0]["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (70, "Error")


def test_a_job_pod_log_is_its_log_annotation(api: Api) -> None:
    """On the real plane kube-apiserver proxies the request to kwok's kubelet server, which
    serves the file the test bed wrote from the annotation (realplane/pod_logs.py)."""
    log = "line 1\nline 2\nERROR: unsupported operator"
    assert api.post(JOBS, job("logged", 70, log)).status == 201
    ended(api, "logged")
    [pod] = api.get(PODS, labelSelector="job-name=logged").body["items"]
    reply = api.get(f"{PODS}/{pod['metadata']['name']}/log", tailLines="2")
    assert reply.status == 200
    assert reply.body == "line 2\nERROR: unsupported operator\n"
    assert api.get(f"{PODS}/{pod['metadata']['name']}/log").body == log + "\n"


def test_a_job_past_its_deadline_fails(api: Api) -> None:
    slow = job("slow", 0, activeDeadlineSeconds=1)
    slow["spec"]["template"]["metadata"]["annotations"]["sandbox.acceltrial.dev/run-seconds"] = "60"
    assert api.post(JOBS, slow).status == 201
    body = ended(api, "slow")
    assert conditions(body)["Failed"] == ("True", "DeadlineExceeded")
    eventually(lambda: api.get(PODS, labelSelector="job-name=slow").body["items"] == [])
