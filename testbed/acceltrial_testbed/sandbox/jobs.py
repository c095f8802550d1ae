"""The Job controller and the part of the kubelet that ends a Job's pod, simplified; enough to run
a Neuron compile Job (``candidate.compile``) in the sandbox.

- Job (batch/v1): one pod at a time named ``<job>-<5 chars>``, labelled ``batch.kubernetes.io/
  job-name``, ``job-name`` and ``controller-uid`` as the real controller labels them. The Job
  completes when a pod succeeds (conditions ``SuccessCriteriaMet`` then ``Complete``,
  ``completionTime``); it fails when more pods failed than ``backoffLimit`` allows (``Failed``,
  reason ``BackoffLimitExceeded``) or when it was active longer than ``activeDeadlineSeconds``
  (reason ``DeadlineExceeded``, its running pod deleted), with the real controller's messages.
- Kubelet: a running pod that belongs to a Job exits after ``run-seconds``, with ``exit-code``,
  and its log is ``log``; all three are annotations on the Job's pod template, which is how a
  scenario says whether the compile succeeds:

  ``sandbox.acceltrial.dev/exit-code`` (default ``0``), ``sandbox.acceltrial.dev/run-seconds``
  (default ``1``), ``sandbox.acceltrial.dev/log`` (the container's output, served at
  ``pods/<name>/log``).

On the real control plane the same annotations are honoured by kwok stages
(``kwok-job-stages.yaml``) and the real Job controller.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from datetime import datetime
from typing import Any

from acceltrial_testbed.sandbox.objects import owner_reference
from acceltrial_testbed.sandbox.resources import ResourceType
from acceltrial_testbed.sandbox.store import Object, Store, timestamp

EXIT_CODE = "sandbox.acceltrial.dev/exit-code"
RUN_SECONDS = "sandbox.acceltrial.dev/run-seconds"
LOG = "sandbox.acceltrial.dev/log"
JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")
_FINISHED = ("Succeeded", "Failed")


def pod_log(pod: Object, tail_lines: int | None) -> str:
    """What the pod's container printed (the ``log`` annotation), its last ``tail_lines``."""
    text = str((pod["metadata"].get("annotations") or {}).get(LOG, ""))
    lines = text.splitlines()
    if tail_lines is not None:
        lines = lines[-tail_lines:] if tail_lines > 0 else []
    return "".join(f"{line}\n" for line in lines)


class JobController:
    """Reconciles Jobs and ends their pods; called from each controllers pass."""

    def __init__(
        self,
        store: Store,
        jobs: ResourceType,
        pods: ResourceType,
        wake: Callable[[], None],
        write_status: Callable[[ResourceType, Object, Object], None],
    ) -> None:
        self.store = store
        self.jobs = jobs
        self.pods = pods
        self._wake = wake
        self._write_status = write_status
        self._running_since: dict[str, float] = {}
        self._deadline_timers: set[str] = set()
        """Jobs whose deadline already has a wake-up scheduled (one timer each, not one a pass)."""

    def reconcile(self, owned: dict[str, list[Object]]) -> None:
        self._end_pods()
        for job in self.store.peek(self.jobs):
            if not job["metadata"].get("deletionTimestamp") and not _ended(job):
                pods = [p for p in owned.get(job["metadata"]["uid"], []) if p["kind"] == "Pod"]
                self._job(job, pods)

    # Job

    def _job(self, job: Object, pods: list[Object]) -> None:
        now = self.store.clock()
        status = dict(job.get("status") or {})
        status.setdefault("startTime", timestamp(now))
        failed = sum(1 for p in pods if _phase(p) == "Failed")
        succeeded = sum(1 for p in pods if _phase(p) == "Succeeded")
        active = [p for p in pods if _phase(p) not in _FINISHED]
        counts = {"active": len(active), "failed": failed, "succeeded": succeeded}
        status |= {k: v for k, v in counts.items() if v}
        ending = self._ending(job, status, now, succeeded, failed)
        if ending is not None:
            for pod in active:
                self._delete(pod)
            status = _end(status, now, *ending)
            status.pop("active", None)
        elif not active:
            self._new_pod(job)
            status["active"] = 1
        self._write_status(self.jobs, job, status)

    def _ending(
        self, job: Object, status: Object, now: datetime, succeeded: int, failed: int
    ) -> tuple[str, str, str] | None:
        """(condition, reason, message) when the Job ends now, else None."""
        spec = job.get("spec") or {}
        if succeeded:
            return "Complete", "CompletionsReached", "Reached expected number of succeeded pods"
        if failed > int(spec.get("backoffLimit", 6)):
            return "Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit"
        deadline = spec.get("activeDeadlineSeconds")
        started = datetime.fromisoformat(str(status["startTime"]).replace("Z", "+00:00"))
        if deadline is not None:
            left = float(deadline) - (now - started).total_seconds()
            if left <= 0:
                return "Failed", "DeadlineExceeded", "Job was active longer than specified deadline"
            if job["metadata"]["uid"] not in self._deadline_timers:
                self._deadline_timers.add(job["metadata"]["uid"])
                asyncio.get_running_loop().call_later(left, self._wake)
        return None

    def _new_pod(self, job: Object) -> None:
        meta = job["metadata"]
        template = copy.deepcopy((job.get("spec") or {}).get("template") or {})
        template_meta = template.get("metadata") or {}
        labels = (template_meta.get("labels") or {}) | {
            **dict.fromkeys(JOB_NAME_LABELS, meta["name"]),
            "controller-uid": meta["uid"],
            "batch.kubernetes.io/controller-uid": meta["uid"],
        }
        spec = {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "schedulerName": "default-scheduler",
        } | (template.get("spec") or {})
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "generateName": f"{meta['name']}-",
                "labels": labels,
                "annotations": template_meta.get("annotations") or {},
                "ownerReferences": [owner_reference(job)],
            },
            "spec": spec,
        }
        self.store.create(self.pods, meta["namespace"], body)

    def _delete(self, pod: Object) -> None:
        self.store.delete(self.pods, pod["metadata"]["namespace"], pod["metadata"]["name"])

    # Kubelet: a Job's running pod exits

    def _end_pods(self) -> None:
        loop = asyncio.get_running_loop()
        for pod in self.store.peek(self.pods):
            owners = pod["metadata"].get("ownerReferences") or []
            if _phase(pod) != "Running" or not any(o.get("kind") == "Job" for o in owners):
                continue
            annotations = pod["metadata"].get("annotations") or {}
            since = self._running_since.setdefault(pod["metadata"]["uid"], loop.time())
            left = float(annotations.get(RUN_SECONDS, 1)) - (loop.time() - since)
            if left > 0:
                loop.call_later(left, self._wake)
                continue
            self._exit(pod, int(annotations.get(EXIT_CODE, 0)))

    def _exit(self, pod: Object, code: int) -> None:
        stamp = timestamp(self.store.clock())
        status = copy.deepcopy(pod.get("status") or {})
        status["phase"] = "Succeeded" if code == 0 else "Failed"
        for condition in status.get("conditions") or []:
            if condition.get("type") in ("Ready", "ContainersReady"):
                condition.update(status="False", reason="PodCompleted", lastTransitionTime=stamp)
        terminated = {
            "exitCode": code,
            "reason": "Completed" if code == 0 else "Error",
            "startedAt": status.get("startTime", stamp),
            "finishedAt": stamp,
        }
        for container in status.get("containerStatuses") or []:
            container.update(ready=False, started=False, state={"terminated": terminated})
        self._write_status(self.pods, pod, status)


def _phase(pod: Object) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def _ended(job: Object) -> bool:
    conditions = (job.get("status") or {}).get("conditions") or []
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in conditions
    )


def _end(status: Object, now: datetime, kind: str, reason: str, message: str) -> Object:
    stamp = timestamp(now)
    # Since Kubernetes 1.31 the controller first sets an interim condition, then the final one.
    interim = "SuccessCriteriaMet" if kind == "Complete" else "FailureTarget"
    conditions: list[Any] = [
        {"type": t, "status": "True", "reason": reason, "message": message,
         "lastProbeTime": stamp, "lastTransitionTime": stamp}
        for t in (interim, kind)
    ]  # fmt: skip
    ended = status | {"conditions": conditions}
    if kind == "Complete":
        ended["completionTime"] = stamp
    return ended
