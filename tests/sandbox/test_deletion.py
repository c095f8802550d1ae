"""Contract: finalizers, deletionTimestamp and garbage collection through ownerReferences."""

from __future__ import annotations

from typing import Any

from tests.sandbox.conftest import CONFIGMAPS, Api, configmap, eventually


def test_delete_without_finalizers_removes_at_once(api: Api) -> None:
    """DELETE of an object without finalizers removes it; a later GET answers 404."""
    api.post(CONFIGMAPS, configmap("a"))

    assert api.delete(f"{CONFIGMAPS}/a").status == 200
    assert api.get(f"{CONFIGMAPS}/a").status == 404
    assert api.delete(f"{CONFIGMAPS}/a").status == 404


def test_finalizers_hold_deletion_until_removed(api: Api) -> None:
    """Finalizers (kubernetes.io/docs/concepts/overview/working-with-objects/finalizers):
    deleting an object with finalizers only sets metadata.deletionTimestamp; the object stays
    until its finalizers are removed, then it is deleted; no new finalizer may be added."""
    path = f"{CONFIGMAPS}/a"
    api.post(CONFIGMAPS, configmap("a") | {"metadata": {"name": "a", "finalizers": ["x/y"]}})

    deleting = api.delete(path).body
    still = api.get(path)
    added = api.merge(path, {"metadata": {"finalizers": ["x/y", "new/one"]}})
    released = api.merge(path, {"metadata": {"finalizers": None}})

    assert deleting["metadata"]["deletionTimestamp"]
    assert still.status == 200
    assert added.status == 422
    assert released.status == 200
    assert api.get(path).status == 404


def owned(name: str, owner: dict[str, Any]) -> dict[str, Any]:
    body = configmap(name)
    body["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"],
        }
    ]
    return body


def test_background_garbage_collection_deletes_dependents(api: Api) -> None:
    """Garbage collection (kubernetes.io/docs/concepts/architecture/garbage-collection):
    with background cascading deletion (the default) the owner is deleted at once and the
    garbage collector then deletes its dependents, and theirs."""
    owner = api.post(CONFIGMAPS, configmap("owner")).body
    child = api.post(CONFIGMAPS, owned("child", owner)).body
    api.post(CONFIGMAPS, owned("grandchild", child))
    api.post(CONFIGMAPS, configmap("bystander"))

    api.delete(f"{CONFIGMAPS}/owner")

    eventually(lambda: api.get(f"{CONFIGMAPS}/grandchild").status == 404)
    assert api.get(f"{CONFIGMAPS}/child").status == 404
    assert api.get(f"{CONFIGMAPS}/bystander").status == 200


def test_orphan_propagation_keeps_dependents(api: Api) -> None:
    """propagationPolicy=Orphan: dependents are kept and their ownerReferences to the deleted
    owner removed."""
    owner = api.post(CONFIGMAPS, configmap("owner")).body
    api.post(CONFIGMAPS, owned("child", owner))

    api.delete(f"{CONFIGMAPS}/owner", {"kind": "DeleteOptions", "propagationPolicy": "Orphan"})

    # the real server orphans in the background (the owner's "orphan" finalizer)
    eventually(lambda: "ownerReferences" not in api.get(f"{CONFIGMAPS}/child").body["metadata"])
    # ... and removes the finalizer, then the owner, a moment after the dependents are released
    eventually(lambda: api.get(f"{CONFIGMAPS}/owner").status == 404)


def test_delete_with_a_stale_precondition_answers_409(api: Api) -> None:
    """DeleteOptions.preconditions.resourceVersion must match, else 409 Conflict."""
    api.post(CONFIGMAPS, configmap("a"))

    reply = api.delete(f"{CONFIGMAPS}/a", {"preconditions": {"resourceVersion": "1"}})

    assert reply.status == 409
    assert api.get(f"{CONFIGMAPS}/a").status == 200


def test_deleting_a_namespace_deletes_its_objects(api: Api) -> None:
    """Namespaces (kubernetes.io "Namespaces"): deleting a namespace deletes everything in it;
    other namespaces are untouched."""
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "doomed"}}
    api.post("/api/v1/namespaces", namespace)
    api.post("/api/v1/namespaces/doomed/configmaps", configmap("inside"))
    api.post(CONFIGMAPS, configmap("outside"))

    api.delete("/api/v1/namespaces/doomed")

    eventually(lambda: api.get("/api/v1/namespaces/doomed/configmaps/inside").status == 404)
    # a real namespace is Terminating until the namespace controller has emptied it
    eventually(lambda: api.get("/api/v1/namespaces/doomed").status == 404, timeout=60)
    assert api.get(f"{CONFIGMAPS}/outside").status == 200


def garbage_collector_caught_up(api: Api, name: str) -> None:
    """Return once the garbage collector has seen every ConfigMap written before this call.

    The collector learns of dependents from its own watch; a foreground deletion it handles
    before it has seen them finds none to wait for and deletes the owner at once. Its ConfigMap
    events arrive in order, so once it has collected a probe written after them, it has seen
    them too."""
    probe = api.post(CONFIGMAPS, configmap(f"{name}-probe-owner")).body
    api.post(CONFIGMAPS, owned(f"{name}-probe", probe))
    api.delete(f"{CONFIGMAPS}/{name}-probe-owner")
    eventually(lambda: api.get(f"{CONFIGMAPS}/{name}-probe").status == 404)


def test_foreground_deletion_waits_for_the_dependents(api: Api) -> None:
    """Foreground cascading deletion (kubernetes.io "Garbage Collection"): the owner enters
    deletion in progress (deletionTimestamp and the foregroundDeletion finalizer) and is
    deleted only after the garbage collector has deleted its dependents, here one held back
    by its own finalizer. Only a dependent whose ownerReference sets blockOwnerDeletion holds
    the owner back (the same page); without it the real collector deletes the owner as soon as
    it has handled it, which a loaded machine showed."""
    owner = api.post(CONFIGMAPS, configmap("owner")).body
    held = owned("held", owner)
    held["metadata"]["ownerReferences"][0]["blockOwnerDeletion"] = True
    held["metadata"]["finalizers"] = ["example.com/hold"]
    api.post(CONFIGMAPS, held)
    api.post(CONFIGMAPS, owned("free", owner))
    garbage_collector_caught_up(api, "owner")

    api.delete(f"{CONFIGMAPS}/owner", {"propagationPolicy": "Foreground"})

    waiting = api.get(f"{CONFIGMAPS}/owner").body
    assert waiting["metadata"]["deletionTimestamp"]
    assert waiting["metadata"]["finalizers"] == ["foregroundDeletion"]
    eventually(lambda: api.get(f"{CONFIGMAPS}/free").status == 404)
    still = api.get(f"{CONFIGMAPS}/owner").body
    assert still["metadata"]["finalizers"] == ["foregroundDeletion"], "held back by held"
    api.merge(f"{CONFIGMAPS}/held", {"metadata": {"finalizers": None}})
    eventually(lambda: api.get(f"{CONFIGMAPS}/owner").status == 404)
    assert api.get(f"{CONFIGMAPS}/held").status == 404
