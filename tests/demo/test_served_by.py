"""The demo's "Serving:" check sees pods as a Service's endpoints do: a pod a rollback removed,
still Ready while it terminates, takes no request, so it serves nothing (it once printed
"traffic goes to baseline, candidate" after a rollback on the real control plane, where kwok
keeps a terminating pod Ready through its grace period)."""

from __future__ import annotations

from typing import Any

from acceltrial_testbed.demo.user import served_by

READY = {"conditions": [{"type": "Ready", "status": "True"}]}


def pod(name: str, variant: str | None, terminating: bool = False) -> dict[str, Any]:
    labels = {"app": "llama3", **({"acceltrial.dev/variant": variant} if variant else {})}
    meta: dict[str, Any] = {"name": name, "labels": labels}
    if terminating:
        meta["deletionTimestamp"] = "2026-12-06T05:00:00Z"
    return {"metadata": meta, "status": READY}


class Cluster:
    def __init__(self, pods: list[dict[str, Any]]) -> None:
        self.pods = pods

    def get(self, path: str) -> dict[str, Any] | None:
        if path.endswith("/services/llama3-gpu"):
            return {"spec": {"selector": {"app": "llama3"}}}
        if "/pods?labelSelector=" in path:
            return {"items": self.pods}
        return None


TRIAL = {
    "metadata": {"namespace": "demo"},
    "spec": {"baseline": {"deploymentRef": {"name": "llama3-gpu"}},
             "traffic": {"router": "replicas"}},
}  # fmt: skip


def test_a_terminating_candidate_pod_serves_nothing_after_a_rollback() -> None:
    cluster = Cluster([pod("gpu-a", None), pod("gpu-b", None),
                       pod("inf2-a", "candidate", terminating=True)])  # fmt: skip
    variant, said = served_by(cluster, TRIAL)  # type: ignore[arg-type]
    assert variant == "baseline", said


def test_a_ready_candidate_pod_behind_the_service_is_counted() -> None:
    cluster = Cluster([pod("gpu-a", None), pod("inf2-a", "candidate")])
    variant, said = served_by(cluster, TRIAL)  # type: ignore[arg-type]
    assert variant is None
    assert said == "traffic goes to baseline, candidate"
