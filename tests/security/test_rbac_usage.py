"""The ClusterRole grants exactly the API calls the operator makes: no wildcard, no verb unused.

The operator's calls come from two places. Its own, through the kube gateway: every method of
:class:`~acceltrial.kube.gateway.Kube` the operator's code calls (found in its source, the
CLI's own calls aside: they run with the user's credentials) is run against a recording API
client, and each HTTP request is turned into the RBAC (group, resource, verb) it needs. And
kopf's, written down from its client code (kopf 1.x, ``kopf/_cogs/clients``): it lists and
watches the trials, CRDs and namespaces, patches trials and their status, and POSTs core v1
Events (never patches them, never uses events.k8s.io).
"""

from __future__ import annotations

import inspect
import json
import re
import urllib.parse
from typing import Any

from kubernetes import client

from acceltrial.kube.calls import KubeError
from acceltrial.kube.gateway import Kube
from tests.chart.test_chart import grants, render
from tests.conftest import REPO

OPERATOR_CODE = ("handlers", "providers", "engine", "kube")
KOPF = {
    "acceltrial.dev/acceleratortrials": {"list", "watch", "patch"},
    "acceltrial.dev/acceleratortrials/status": {"patch"},
    "acceltrial.dev/trainingtrials": {"list", "watch", "patch"},
    "apiextensions.k8s.io/customresourcedefinitions": {"list", "watch"},
    "/namespaces": {"list", "watch"},
    "/events": {"create"},
}
KINDS = ("Deployment", "Service", "ConfigMap", "Job", "InferencePool")
PLURALS = ("acceleratortrials", "trainingtrials")
"""The trial kinds a method with a ``plural`` parameter serves."""


class Recorder(client.ApiClient):  # type: ignore[misc]
    """An API client that answers every request with a plausible object and records it."""

    def __init__(self) -> None:
        super().__init__(client.Configuration(host="http://recorded.invalid"))
        self.requests: list[tuple[str, str, str]] = []

    def call_api(self, method: str, url: str, header_params: Any = None, *_: Any,
                 **__: Any) -> Any:  # fmt: skip
        path = urllib.parse.urlparse(url).path
        content_type = (header_params or {}).get("Content-Type", "")
        self.requests.append((method, path, content_type))
        return _Reply(_ANSWER)


class _Reply:
    """What the client keeps of an answer when asked not to decode it."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.status = 200
        self.response = self
        self.data = json.dumps(body).encode()


_ANSWER = {
    "metadata": {
        "name": "x", "namespace": "ns", "resourceVersion": "1",
        "ownerReferences": [{"uid": "owner"}], "managedFields": [{"manager": "acceltrial"}],
    },
    "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "other"}},
    "data": {"key": "dmFsdWU="},
    "items": [],
}  # fmt: skip


def operator_methods() -> set[str]:
    """The Kube methods the operator's own code calls."""
    public = {name for name, _ in inspect.getmembers(Kube, inspect.isfunction)
              if not name.startswith("_")}  # fmt: skip
    used: set[str] = set()
    for folder in OPERATOR_CODE:
        for source in (REPO / "operator" / "acceltrial" / folder).rglob("*.py"):
            if source.name == "gateway.py":
                continue
            used |= {m for m in public if re.search(rf"\.{m}\(", source.read_text())}
    return used


def run_method(kube: Kube, name: str) -> None:
    """Call a gateway method with arguments of the right shape, once per kind it takes."""
    method = getattr(kube, name)
    values: dict[str, Any] = {
        "namespace": "ns", "name": "x", "selector": {"app": "a"}, "key": "key",
        "target": {"kind": "Deployment", "name": "x"}, "owner_uid": "owner",
        "labels": {"a": "b"}, "replicas": 1, "route": _ANSWER, "rule_index": 0,
        "backend_refs": {0: []}, "annotations": {"a": "b"}, "status": {"phase": "Pending"},
        "tail_lines": 5,
        "service": {"metadata": {"name": "x", "namespace": "ns", "resourceVersion": "1"}},
    }  # fmt: skip
    parameters = inspect.signature(method).parameters
    plurals = PLURALS if "plural" in parameters else (None,)
    for kind, plural in ((k, p) for k in KINDS for p in plurals):
        arguments = {p: values[p] for p in parameters if p in values}
        if plural is not None:
            arguments["plural"] = plural
        if "kind" in parameters:
            arguments["kind"] = kind
        if "manifest" in parameters:
            arguments["manifest"] = {"kind": kind, "metadata": {"name": "x", "namespace": "ns"}}
        try:
            method(**arguments)
        except (KeyError, KubeError):
            continue  # a kind this method does not take


_PATH = re.compile(
    r"^/(?:api/(?P<core>v1)|apis/(?P<group>[^/]+)/[^/]+)"
    r"(?:/namespaces/[^/]+)?/(?P<resource>[^/]+)(?:/(?P<name>[^/]+)(?:/(?P<sub>[^/]+))?)?$"
)
_VERBS = {"GET": "get", "PATCH": "patch", "DELETE": "delete", "POST": "create", "PUT": "update"}


def needed(method: str, path: str, content_type: str) -> dict[str, set[str]]:
    """The RBAC grant one request needs (server-side apply may create the object: create too)."""
    match = _PATH.match(path)
    assert match, path
    group = match["group"] or ""
    resource = match["resource"] + (f"/{match['sub']}" if match["sub"] else "")
    verb = "list" if method == "GET" and match["name"] is None else _VERBS[method]
    verbs = {verb, "create"} if content_type == "application/apply-patch+yaml" else {verb}
    return {f"{group}/{resource}": verbs}


def operator_calls() -> dict[str, set[str]]:
    recorder = Recorder()
    kube = Kube(recorder)
    for name in sorted(operator_methods()):
        run_method(kube, name)
    calls: dict[str, set[str]] = {key: set(verbs) for key, verbs in KOPF.items()}
    for request in recorder.requests:
        for key, verbs in needed(*request).items():
            calls.setdefault(key, set()).update(verbs)
    return calls


def test_the_recorder_sees_every_gateway_method_the_operator_uses() -> None:
    assert {"apply", "set_route_rules", "secret", "release", "scale"} <= operator_methods()
    assert {"inference_pool", "apply_inference_pool", "delete_inference_pool"} <= (
        operator_methods()
    )
    assert "trial" in operator_methods(), "a tick reads its trial when kopf's copy is behind"


def test_the_cluster_role_grants_exactly_the_calls_the_operator_makes() -> None:
    assert grants(render()) == operator_calls()


def test_secrets_are_read_only_when_prometheus_credentials_are_allowed() -> None:
    calls = operator_calls()
    calls.pop("/secrets")
    assert grants(render("rbac.readPrometheusSecrets=false")) == calls


def test_no_wildcard_anywhere() -> None:
    for rule in render()["ClusterRole"]["rules"]:
        for key in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[key], rule


def test_a_grant_nobody_uses_is_caught() -> None:
    """The comparison can fail: an extra verb on one resource breaks the equality."""
    role = grants(render())
    role["/pods"] = role["/pods"] | {"delete"}
    assert role != operator_calls()
