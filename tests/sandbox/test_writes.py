"""Contract: replace and the patch formats, optimistic concurrency, the status subresource."""

from __future__ import annotations

import pytest

from tests.sandbox.conftest import CONFIGMAPS, DEPLOYMENTS, Api, configmap
from tests.sandbox.test_metadata import deployment


def test_put_replaces_the_whole_object(api: Api) -> None:
    """API concepts, "Update": PUT replaces the object; fields left out are removed."""
    api.post(CONFIGMAPS, configmap("a", one="1", two="2"))

    reply = api.put(f"{CONFIGMAPS}/a", configmap("a", three="3"))

    assert reply.status == 200
    assert api.get(f"{CONFIGMAPS}/a").body["data"] == {"three": "3"}


def test_put_of_a_missing_object_answers_404(api: Api) -> None:
    """PUT updates an existing object; for a missing one the server answers 404 NotFound."""
    assert api.put(f"{CONFIGMAPS}/nope", configmap("nope")).status == 404


def test_merge_patch_follows_rfc_7386(api: Api) -> None:
    """JSON merge patch (RFC 7386, API concepts "Patch"): maps merge, null deletes a key,
    lists are replaced whole."""
    api.post(CONFIGMAPS, configmap("a", keep="1", drop="2"))

    reply = api.merge(f"{CONFIGMAPS}/a", {"data": {"drop": None, "new": "3"}})

    assert reply.body["data"] == {"keep": "1", "new": "3"}


def test_json_patch_applies_operations_and_a_failed_test_answers_422(api: Api) -> None:
    """JSON patch (RFC 6902): operations apply in order; when a ``test`` operation fails the
    API server refuses the whole patch with 422 Unprocessable Entity (kopf relies on this for
    its finalizer guard on metadata.resourceVersion)."""
    version = api.post(CONFIGMAPS, configmap("a", k="v")).body["metadata"]["resourceVersion"]
    path = f"{CONFIGMAPS}/a"

    ok = api.json_patch(
        path,
        [
            {"op": "test", "path": "/metadata/resourceVersion", "value": version},
            {"op": "add", "path": "/data/x", "value": "y"},
        ],
    )
    stale = api.json_patch(
        path,
        [
            {"op": "test", "path": "/metadata/resourceVersion", "value": version},
            {"op": "add", "path": "/data/z", "value": "z"},
        ],
    )

    assert ok.status == 200
    assert ok.body["data"] == {"k": "v", "x": "y"}
    assert stale.status == 422
    assert "z" not in api.get(path).body["data"]


def test_strategic_merge_patch_merges_containers_and_env_by_name(api: Api) -> None:
    """Strategic merge patch (kubernetes.io "Update API Objects in Place Using kubectl patch"):
    lists with a patchMergeKey (containers, env: ``name``) merge element by element;
    ``$patch: delete`` removes one element."""
    body = deployment("d")
    body["spec"]["template"]["spec"]["containers"][0]["env"] = [
        {"name": "A", "value": "1"},
        {"name": "B", "value": "2"},
    ]
    api.post(DEPLOYMENTS, body)

    patch = {
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "main",
                            "env": [{"name": "A", "value": "9"}, {"name": "B", "$patch": "delete"}],
                        },
                        {"name": "sidecar", "image": "envoy:1"},
                    ]
                }
            }
        }
    }
    reply = api.strategic(f"{DEPLOYMENTS}/d", patch)

    containers = reply.body["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["main", "sidecar"]
    assert containers[0]["image"] == "nginx:1"
    assert containers[0]["env"] == [{"name": "A", "value": "9"}]


def test_unknown_patch_types_answer_415(api: Api) -> None:
    """A patch in a content type the server does not accept answers 415 Unsupported Media
    Type, as the real server does for an unregistered patch type."""
    api.post(CONFIGMAPS, configmap("a"))

    reply = api.request("PATCH", f"{CONFIGMAPS}/a", {"data": {}}, "application/x-unknown")

    assert reply.status == 415


def test_server_side_apply_creates_a_missing_object(api: Api) -> None:
    """Server-side apply (kubernetes.io "Server-Side Apply"): an apply patch to an object that
    does not exist creates it (201), a second one updates it (200)."""
    path = f"{CONFIGMAPS}/a"
    created = api.request(
        "PATCH", path, configmap("a", k="1"), "application/apply-patch+yaml", fieldManager="t"
    )
    updated = api.request(
        "PATCH", path, configmap("a", k="2"), "application/apply-patch+yaml", fieldManager="t"
    )

    assert created.status == 201
    assert updated.status == 200
    assert api.get(path).body["data"] == {"k": "2"}


def test_a_stale_resource_version_answers_409(api: Api) -> None:
    """API concepts, "Resource versions" / optimistic concurrency: a write carrying a
    metadata.resourceVersion other than the current one fails with 409 Conflict, for PUT and
    for patches alike; a write without one is unconditional."""
    old = api.post(CONFIGMAPS, configmap("a", k="1")).body
    path = f"{CONFIGMAPS}/a"
    api.merge(path, {"data": {"k": "2"}})

    stale_put = api.put(path, old | {"data": {"k": "3"}})
    stale_patch = api.merge(
        path, {"metadata": {"resourceVersion": old["metadata"]["resourceVersion"]}, "data": {}}
    )
    unconditional = api.put(path, configmap("a", k="4"))

    assert stale_put.status == 409
    assert stale_put.body["reason"] == "Conflict"
    assert stale_patch.status == 409
    assert unconditional.status == 200


@pytest.mark.emulator_only  # the real plane's deployment controller writes this status too
def test_status_subresource_is_separate_from_the_main_resource(api: Api) -> None:
    """API concepts / CRD docs, "Status subresource": writes to the main resource ignore status;
    writes to /status change only status."""
    path = f"{DEPLOYMENTS}/d"
    api.post(DEPLOYMENTS, deployment("d") | {"status": {"replicas": 7}})

    main = api.merge(path, {"spec": {"replicas": 2}, "status": {"replicas": 9}}).body
    status = api.merge(path + "/status", {"spec": {"replicas": 5}, "status": {"replicas": 2}})

    assert "status" not in main or main["status"].get("replicas") != 9
    assert status.status == 200
    assert status.body["spec"]["replicas"] == 2
    assert status.body["status"] == {"replicas": 2}
    assert api.get(path).body["status"] == {"replicas": 2}


def test_dry_run_validates_but_stores_nothing(api: Api) -> None:
    """API concepts, "Dry-run": with dryRun=All the request is validated and answered as
    usual, but nothing is persisted."""
    created = api.post(CONFIGMAPS, configmap("a"), dryRun="All")
    api.post(CONFIGMAPS, configmap("b", k="1"))
    patched = api.request(
        "PATCH", f"{CONFIGMAPS}/b", {"data": {"k": "2"}}, "application/merge-patch+json",
        dryRun="All",
    )  # fmt: skip
    deleted = api.delete(f"{CONFIGMAPS}/b", dryRun="All")

    assert created.status == 201
    assert api.get(f"{CONFIGMAPS}/a").status == 404
    assert patched.body["data"] == {"k": "2"}
    assert deleted.status == 200
    assert api.get(f"{CONFIGMAPS}/b").body["data"] == {"k": "1"}


@pytest.mark.known_difference("the emulator answers 400 Bad Request")
def test_a_malformed_watch_version_answers_a_status_naming_it(api: Api) -> None:
    """A resourceVersion that is not a number fails the watch with a Status naming it; the
    real server (v1.36) classes it as 500 InternalError."""
    reply = api.get(CONFIGMAPS, watch="1", resourceVersion="abc")

    assert reply.status == 500
    assert reply.body["kind"] == "Status"
    assert reply.body["message"].startswith('resourceVersion: Invalid value: "abc"')


def test_subresources_exist_only_where_the_kind_has_them(api: Api) -> None:
    """Discovery lists deployments/scale and deployments/status but no configmaps/status:
    the paths of subresources a kind lacks answer 404."""
    api.post(CONFIGMAPS, configmap("a"))
    api.post(DEPLOYMENTS, deployment("d"))

    assert api.get(f"{CONFIGMAPS}/a/status").status == 404
    assert api.get(f"{CONFIGMAPS}/a/scale").status == 404
    scale = api.get(f"{DEPLOYMENTS}/d/scale")
    assert (scale.status, scale.body["kind"], scale.body["spec"]) == (200, "Scale", {"replicas": 1})


def test_a_secrets_string_data_is_stored_encoded_in_data(api: Api) -> None:
    """Secret API: ``stringData`` is merged into ``data`` on write, base64-encoded, overwriting
    a key both name, and never output when read (the operator reads notification URLs from
    ``data``)."""
    secrets = "/api/v1/namespaces/default/secrets"
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hook"},
              "data": {"kept": "MQ==", "url": "b2xk"},
              "stringData": {"url": "http://receiver/hook"}}  # fmt: skip

    assert api.post(secrets, secret).status == 201

    stored = api.get(f"{secrets}/hook").body
    assert "stringData" not in stored
    assert stored["data"] == {"kept": "MQ==", "url": "aHR0cDovL3JlY2VpdmVyL2hvb2s="}
