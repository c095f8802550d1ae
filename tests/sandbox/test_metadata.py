"""Contract: object metadata is set by the server as the real API server sets it."""

from __future__ import annotations

import re
import uuid

from tests.sandbox.conftest import CONFIGMAPS, DEPLOYMENTS, Api, configmap


def deployment(name: str, replicas: int = 1, image: str = "nginx:1") -> dict[str, object]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "main", "image": image}]},
            },
        },
    }


def test_create_sets_uid_version_timestamp_and_answers_201(api: Api) -> None:
    """ObjectMeta (kubernetes.io/docs/reference/kubernetes-api/common-definitions/object-meta):
    uid, resourceVersion and creationTimestamp are "populated by the system. Read-only."; and
    POST answers 201 Created (API concepts, "Create")."""
    reply = api.post(CONFIGMAPS, configmap("a") | {"metadata": {"name": "a", "uid": "mine"}})

    assert reply.status == 201
    meta = reply.body["metadata"]
    assert meta["uid"] != "mine"
    uuid.UUID(meta["uid"])
    assert meta["resourceVersion"].isdigit()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", meta["creationTimestamp"])


def test_resource_version_is_cluster_wide_and_increases(api: Api) -> None:
    """API concepts, "Resource versions": every change gets a new resourceVersion, and one
    collection's list version lets a client watch every kind from one point in time (etcd's
    single revision counter): versions increase across kinds and namespaces."""
    first = api.post(CONFIGMAPS, configmap("a")).body["metadata"]["resourceVersion"]
    second = api.post(DEPLOYMENTS, deployment("d")).body["metadata"]["resourceVersion"]
    third = api.merge(f"{CONFIGMAPS}/a", {"data": {"k": "v"}}).body["metadata"]["resourceVersion"]

    assert int(first) < int(second) < int(third)
    assert int(api.get(CONFIGMAPS).body["metadata"]["resourceVersion"]) >= int(third)


def test_namespace_comes_from_the_url(api: Api) -> None:
    """API concepts, "Namespaced resources": a namespaced object is created in the namespace of
    the request path; a body naming another namespace is refused with 400."""
    created = api.post(CONFIGMAPS, configmap("a"))
    other = api.post(CONFIGMAPS, configmap("b") | {"metadata": {"name": "b", "namespace": "x"}})

    assert created.body["metadata"]["namespace"] == "default"
    assert other.status == 400


def test_generate_name_gives_unique_names(api: Api) -> None:
    """ObjectMeta.generateName: "an optional prefix, used by the server, to generate a unique
    name ONLY IF the Name field has not been provided"."""
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "run-"}}
    names = {api.post(CONFIGMAPS, body).body["metadata"]["name"] for _ in range(5)}

    assert len(names) == 5
    assert all(re.fullmatch(r"run-[a-z0-9]{5}", name) for name in names)


def test_name_or_generate_name_is_required(api: Api) -> None:
    """Creating an object with neither name nor generateName is invalid (422)."""
    reply = api.post(CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}})

    assert reply.status == 422
    assert reply.body["details"]["causes"][0]["field"] == "metadata.name"


def test_generation_bumps_on_spec_changes_only(api: Api) -> None:
    """ObjectMeta.generation: "a sequence number representing a specific generation of the
    desired state"; metadata changes (labels) and status writes do not change it."""
    path = f"{DEPLOYMENTS}/d"
    assert api.post(DEPLOYMENTS, deployment("d")).body["metadata"]["generation"] == 1

    labelled = api.merge(path, {"metadata": {"labels": {"x": "y"}}}).body
    status = api.merge(path + "/status", {"status": {"replicas": 1}}).body
    scaled = api.merge(path, {"spec": {"replicas": 3}}).body

    assert labelled["metadata"]["generation"] == 1
    assert status["metadata"]["generation"] == 1
    assert scaled["metadata"]["generation"] == 2


def test_a_no_op_write_keeps_the_resource_version(api: Api) -> None:
    """An update that changes nothing is not persisted (the API server skips the etcd write),
    so resourceVersion stays and watchers see no event."""
    version = api.post(CONFIGMAPS, configmap("a", k="v")).body["metadata"]["resourceVersion"]

    again = api.merge(f"{CONFIGMAPS}/a", {"data": {"k": "v"}}).body

    assert again["metadata"]["resourceVersion"] == version


def test_names_must_be_dns_subdomains(api: Api) -> None:
    """Object names (kubernetes.io/docs/concepts/overview/working-with-objects/names): most
    kinds need an RFC 1123 subdomain (lowercase alphanumerics, '-', '.'), namespaces and
    services an RFC 1123 label; anything else is invalid (422)."""
    bad = api.post(CONFIGMAPS, configmap("Not_Valid"))
    dotted = api.post(CONFIGMAPS, configmap("a.b-c"))
    namespace = api.post(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a.b"}}
    )

    assert bad.status == 422
    assert bad.body["details"]["causes"][0]["field"] == "metadata.name"
    assert "RFC 1123 subdomain" in bad.body["message"]
    assert dotted.status == 201
    assert namespace.status == 422


def test_built_in_kinds_get_the_api_servers_defaults(api: Api) -> None:
    """The API server defaults fields of built-in kinds on write (Deployment strategy
    RollingUpdate 25%/25%, revisionHistoryLimit 10, progressDeadlineSeconds 600; pod spec
    restartPolicy, dnsPolicy, imagePullPolicy IfNotPresent for a tagged image; requests
    defaulted from limits in Pods, not in pod templates), so a read-back object carries them."""
    body = deployment("d")
    body["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "1"}}

    spec = api.post(DEPLOYMENTS, body).body["spec"]

    assert spec["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"},
    }
    assert (spec["revisionHistoryLimit"], spec["progressDeadlineSeconds"]) == (10, 600)
    pod = spec["template"]["spec"]
    assert (pod["restartPolicy"], pod["dnsPolicy"]) == ("Always", "ClusterFirst")
    container = pod["containers"][0]
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert "requests" not in container["resources"]
    pod_body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": pod}
    created = api.post("/api/v1/namespaces/default/pods", pod_body).body
    assert created["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "1"}
