"""What the demo installs in the local cluster (the GPU baseline users already have), and the
small JSON client it uses to talk to it."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from acceltrial.api.trial import TRIAL_GVR
from acceltrial_testbed.demo.route import RouteSpec, route_objects
from acceltrial_testbed.demo.scenario import Baseline, Manifest
from acceltrial_testbed.sandbox.access import Access, as_access

ROUTES = "/apis/gateway.networking.k8s.io/v1/namespaces/{}/httproutes"
DEPLOYMENTS = "/apis/apps/v1/namespaces/{}/deployments"
SERVICES = "/api/v1/namespaces/{}/services"
TRIALS = TRIAL_GVR.collection_path("{}")
SERVING_PORT = 8000


class ApiError(Exception):
    """The API server refused a request."""


class Client:
    """JSON over HTTP(S) to the local API server (the emulator or the real control plane)."""

    def __init__(self, cluster: Access | str) -> None:
        self.access = as_access(cluster)
        self.url = self.access.url

    def request(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json"
    ) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Content-Type", content_type)
        try:
            with self.access.open(request, timeout=10) as reply:
                return reply.status, json.loads(reply.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"{}")

    def get(self, path: str) -> Manifest | None:
        # On the connection this thread keeps open: the demo reads its trial four times a second,
        # and a TLS handshake per read cost the demo and the API server more than the reads.
        status, body = self.access.get(path, timeout=10)
        return json.loads(body) if status == 200 else None

    def create(self, path: str, body: Manifest) -> None:
        status, reply = self.request("POST", path, body)
        if status not in (200, 201):
            raise ApiError(f"creating {body.get('kind')} failed ({status}): {reply.get('message')}")

    def merge(self, path: str, patch: Manifest) -> None:
        status, reply = self.request("PATCH", path, patch, "application/merge-patch+json")
        if status != 200:
            raise ApiError(f"patching {path} failed ({status}): {reply.get('message')}")


def baseline_objects(
    trial: Manifest,
    baseline: Baseline,
    route: RouteSpec | None = None,
    reference_grant: bool | None = None,
) -> list[tuple[str, Manifest]]:
    """The namespace, GPU Deployment, Service and HTTPRoute the trial refers to (the route the
    scenario describes, if it does)."""
    namespace = trial["metadata"].get("namespace", "default")
    spec = trial["spec"]
    name = spec["baseline"]["deploymentRef"]["name"]
    service = (spec["baseline"].get("serviceRef") or {}).get("name", name)
    container = spec["baseline"].get("container") or "vllm"
    labels = {"app": name}
    model = spec["baseline"]["instanceType"]
    objects: list[tuple[str, Manifest]] = [
        ("/api/v1/namespaces", _object("v1", "Namespace", namespace, None, {})),
        (
            DEPLOYMENTS.format(namespace),
            _object(
                "apps/v1",
                "Deployment",
                name,
                namespace,
                {
                    "replicas": baseline.replicas,
                    "selector": {"matchLabels": labels},
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": {
                            "nodeSelector": {"node.kubernetes.io/instance-type": model},
                            "containers": [
                                {
                                    "name": container,
                                    "image": baseline.image,
                                    "args": ["--model", "meta-llama/Meta-Llama-3-8B-Instruct"],
                                    "ports": [{"name": "http", "containerPort": SERVING_PORT}],
                                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                                }
                            ],
                        },
                    },
                },
            ),
        ),
        (
            SERVICES.format(namespace),
            _object(
                "v1",
                "Service",
                service,
                namespace,
                {
                    "selector": labels,
                    "ports": [{"name": "http", "port": SERVING_PORT, "targetPort": SERVING_PORT}],
                },
            ),
        ),
    ]
    routing = spec.get("traffic", {}).get("gatewayapi")
    if route is not None:
        objects += route_objects(route, reference_grant, trial, labels)
    elif spec.get("traffic", {}).get("router") == "gatewayapi" and routing:
        found = _object(
            "gateway.networking.k8s.io/v1",
            "HTTPRoute",
            routing["httpRouteRef"]["name"],
            namespace,
            {
                "parentRefs": [{"name": "inference"}],
                "rules": [{"backendRefs": [{"name": service, "port": SERVING_PORT}]}],
            },
        )
        objects.append((ROUTES.format(namespace), found))
    return objects


def _object(
    api_version: str, kind: str, name: str, namespace: str | None, spec: Manifest
) -> Manifest:
    metadata: Manifest = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    body: Manifest = {"apiVersion": api_version, "kind": kind, "metadata": metadata}
    if spec:
        body["spec"] = spec
    return body
