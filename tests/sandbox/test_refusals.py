"""The kube gateway tells a refusal retrying cannot change from a temporary failure, and keeps
the API server's own sentence, against the sandbox's API server."""

from __future__ import annotations

import pytest
from kubernetes import config

from acceltrial.kube.calls import KubeError
from acceltrial.kube.gateway import Kube
from tests.sandbox.conftest import Backend


@pytest.fixture
def kube(cluster: Backend) -> Kube:
    return Kube(config.new_client_from_config(config_file=str(cluster.kubeconfig)))


def service(name: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": {"app": "x"}, "ports": [{"port": 80}]},
    }


def test_an_invalid_object_is_a_permanent_refusal_with_the_servers_message(kube: Kube) -> None:
    with pytest.raises(KubeError) as refused:
        kube.apply(service("a" * 64))
    assert refused.value.status == 422
    assert refused.value.permanent
    assert "63 characters" in str(refused.value)
    assert '"kind"' not in str(refused.value), "the Status' message, not its raw JSON"
    said = refused.value.doing("creating the candidate Service")
    name = "a" * 64
    assert str(said).startswith(f"creating the candidate Service: patch Service default/{name}: ")
    assert ": HTTP 422: " in str(said), "the object, the verb, then the server's message"


def test_a_refused_route_patch_names_the_route_and_the_verb(kube: Kube) -> None:
    route = {"metadata": {"name": "absent", "namespace": "default", "resourceVersion": "1"}}
    with pytest.raises(KubeError) as refused:
        kube.set_route_rules(route, {0: [{"name": "svc", "port": 80, "weight": 0}]})
    assert refused.value.status == 404
    assert str(refused.value).startswith("patch HTTPRoute default/absent: HTTP 404: ")


def test_a_conflict_and_no_answer_are_temporary() -> None:
    assert not KubeError(409, "conflict").permanent
    assert not KubeError(0, "no answer").permanent
    assert not KubeError(503, "unavailable").permanent
    assert KubeError(403, "forbidden").permanent
