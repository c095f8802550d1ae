"""The promotion handover as an API server does it (both backends; on the real kube-apiserver
with its garbage collector and server-side apply field ownership): after the operator's release
patch, deleting the former owner leaves the workload, and another field manager applies a
changed value without a conflict. The same apply before the handover conflicts, and the still
owned twin is garbage-collected, so the test can fail."""

from __future__ import annotations

import time
from typing import Any

import pytest
from kubernetes import config

from acceltrial.kube.gateway import FIELD_MANAGER, Kube
from acceltrial_testbed.sandbox.realplane.plane import RealControlPlane
from tests.sandbox.conftest import (
    CONFIGMAPS,
    DEPLOYMENTS,
    Api,
    Backend,
    Reply,
    configmap,
    eventually,
)

pytestmark = pytest.mark.controllers
APPLY = "application/apply-patch+yaml"


def candidate(name: str, owner_uid: str) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"app.kubernetes.io/version": "1"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "trial",
                                 "uid": owner_uid, "controller": True,
                                 "blockOwnerDeletion": True}],
        },
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels},
                         "spec": {"containers": [{"name": "server", "image": "neuron:1"}]}},
        },
    }  # fmt: skip


def gitops_apply(api: Api, name: str) -> Reply:
    """A GitOps tool applying the committed manifest with a changed label, without force."""
    body = {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "labels": {"app.kubernetes.io/version": "2"}}}  # fmt: skip
    return api.request("PATCH", f"{DEPLOYMENTS}/{name}", body, APPLY, fieldManager="argocd")


def test_a_handed_over_candidate_outlives_its_trial_and_takes_a_gitops_apply(
    cluster: Backend, api: Api
) -> None:
    kube = Kube(config.new_client_from_config(config_file=str(cluster.kubeconfig)))
    owner = api.post(CONFIGMAPS, configmap("trial")).body["metadata"]["uid"]
    for name in ("kept", "owned"):
        kube.apply(candidate(name, owner))
    real = isinstance(cluster, RealControlPlane)
    if real:  # the emulator keeps no field ownership, so it has no conflicts to show
        before = gitops_apply(api, "kept").status
        assert before == 409, "the operator owns the label before handover"

    kube.release("Deployment", "default", "kept", owner, {"acceltrial.dev/promoted-by": "t"})

    kept = api.get(f"{DEPLOYMENTS}/kept").body["metadata"]
    assert not kept.get("ownerReferences")
    assert kept["labels"]["acceltrial.dev/promoted-by"] == "t"
    managers = {(m["manager"], m["operation"]) for m in kept.get("managedFields") or []}
    assert (FIELD_MANAGER, "Apply") not in managers
    applied = gitops_apply(api, "kept")
    holders = api.get(f"{DEPLOYMENTS}/kept").body["metadata"].get("managedFields")
    # on a conflict: which field, and who holds it
    assert applied.status == 200, f"no conflict once the operator let go: {applied.body} {holders}"
    assert (
        api.get(f"{DEPLOYMENTS}/kept").body["metadata"]["labels"]["app.kubernetes.io/version"]
        == "2"
    )

    api.delete(f"{CONFIGMAPS}/trial")
    eventually(lambda: api.get(f"{DEPLOYMENTS}/owned").status == 404, timeout=60)
    time.sleep(1)
    assert api.get(f"{DEPLOYMENTS}/kept").status == 200, "garbage collection left it alone"
