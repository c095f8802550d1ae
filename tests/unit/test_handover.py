"""The handover patch: what makes a promoted candidate an ordinary workload (issue: deleting a
promoted trial garbage-collected the Deployment serving all traffic)."""

from __future__ import annotations

from typing import Any

import jsonpatch

from acceltrial.kube.gateway import FIELD_MANAGER, handover_operations

TRIAL_UID = "7d3f-trial"
OWNER = {"apiVersion": "acceltrial.dev/v1alpha1", "kind": "AcceleratorTrial", "uid": TRIAL_UID}
OTHER_OWNER = {"apiVersion": "v1", "kind": "ConfigMap", "uid": "someone-else"}
APPLIED = {"manager": FIELD_MANAGER, "operation": "Apply", "fieldsV1": {"f:spec": {}}}
CONTROLLER = {"manager": "kube-controller-manager", "operation": "Update", "subresource": "status"}
LABEL = {"acceltrial.dev/promoted-by": "llama3"}


def candidate(**metadata: Any) -> dict[str, Any]:
    return {"metadata": {"name": "c", "resourceVersion": "42", **metadata}, "spec": {}}


def handed_over(live: dict[str, Any]) -> dict[str, Any]:
    patched: dict[str, Any] = jsonpatch.apply_patch(
        live, handover_operations(live, TRIAL_UID, LABEL)
    )
    return patched


def test_the_trial_owner_and_our_field_ownership_go_and_the_label_names_the_trial() -> None:
    live = candidate(
        ownerReferences=[OWNER, OTHER_OWNER],
        labels={"app": "llama3"},
        managedFields=[APPLIED, CONTROLLER],
    )
    meta = handed_over(live)["metadata"]
    assert meta["ownerReferences"] == [OTHER_OWNER]
    assert meta["labels"] == {"app": "llama3", **LABEL}
    assert meta["managedFields"] == [CONTROLLER]


def test_the_last_owner_and_the_only_manager_are_removed_entirely() -> None:
    meta = handed_over(candidate(ownerReferences=[OWNER], managedFields=[APPLIED]))["metadata"]
    assert "ownerReferences" not in meta
    # An empty list would be ignored by the API server; a single empty entry clears them.
    assert meta["managedFields"] == [{}]
    assert meta["labels"] == LABEL


def test_a_handed_over_object_needs_no_patch_and_every_patch_tests_the_version() -> None:
    done = candidate(labels=LABEL, managedFields=[CONTROLLER])
    operations = handover_operations(done, TRIAL_UID, LABEL)
    assert operations == [{"op": "test", "path": "/metadata/resourceVersion", "value": "42"}]
