"""The Kubernetes gateway: reads and writes of the objects a trial touches, as plain dicts.

Answers are taken as the JSON the API server sent (no typed client models, which reject objects
that lack fields they consider required). Writes of objects acceltrial owns use server-side
apply under the field manager ``acceltrial``; the HTTPRoute is changed with a JSON patch that
first tests the resourceVersion read, so a concurrent change by someone else fails with 409
instead of being overwritten.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

Manifest = dict[str, Any]
FIELD_MANAGER = "acceltrial"
GATEWAY_GROUP, GATEWAY_VERSION, HTTPROUTES = "gateway.networking.k8s.io", "v1", "httproutes"
TRIAL_GROUP, TRIAL_VERSION, TRIALS = "acceltrial.dev", "v1alpha1", "acceleratortrials"
_APPLY = "application/apply-patch+yaml"


class KubeError(Exception):
    """A request to the API server failed; ``status`` is the HTTP status (0: no answer)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Kube:
    """Access to the API, returning JSON-shaped dicts."""

    api: client.ApiClient

    @property
    def _apps(self) -> client.AppsV1Api:
        return client.AppsV1Api(self.api)

    @property
    def _core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    @property
    def _custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.api)

    def deployment(self, namespace: str, name: str) -> Manifest | None:
        return _read(self._apps.read_namespaced_deployment, name, namespace)

    def service(self, namespace: str, name: str) -> Manifest | None:
        return _read(self._core.read_namespaced_service, name, namespace)

    def http_route(self, namespace: str, name: str) -> Manifest | None:
        return _read(
            self._custom.get_namespaced_custom_object,
            GATEWAY_GROUP, GATEWAY_VERSION, namespace, HTTPROUTES, name,
        )  # fmt: skip

    def config_map(self, namespace: str, name: str) -> Manifest | None:
        return _read(self._core.read_namespaced_config_map, name, namespace)

    def pods(self, namespace: str, selector: dict[str, str]) -> list[Manifest]:
        label_selector = ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
        reply = _call(self._core.list_namespaced_pod, namespace, label_selector=label_selector)
        return list(reply.get("items") or [])

    def nodes(self) -> list[Manifest]:
        return list(_call(self._core.list_node).get("items") or [])

    def trials(self, namespace: str) -> list[Manifest]:
        reply = _call(
            self._custom.list_namespaced_custom_object,
            TRIAL_GROUP, TRIAL_VERSION, namespace, TRIALS,
        )  # fmt: skip
        return list(reply.get("items") or [])

    def trial(self, namespace: str, name: str) -> Manifest | None:
        return _read(
            self._custom.get_namespaced_custom_object,
            TRIAL_GROUP, TRIAL_VERSION, namespace, TRIALS, name,
        )  # fmt: skip

    def annotate_trial(self, namespace: str, name: str, annotations: dict[str, str]) -> None:
        """Merge ``annotations`` into a trial's metadata (how people ask for an action)."""
        _call(
            self._custom.patch_namespaced_custom_object,
            TRIAL_GROUP, TRIAL_VERSION, namespace, TRIALS, name,
            {"metadata": {"annotations": annotations}},
            _content_type="application/merge-patch+json",
        )  # fmt: skip

    def secret_value(self, namespace: str, name: str, key: str) -> str | None:
        secret = _read(self._core.read_namespaced_secret, name, namespace)
        encoded = (secret or {}).get("data", {}).get(key)
        return None if encoded is None else base64.b64decode(encoded).decode()

    def apply(self, manifest: Manifest) -> Manifest:
        """Server-side apply of a Deployment, Service or ConfigMap we own."""
        name, namespace = manifest["metadata"]["name"], manifest["metadata"]["namespace"]
        patch = {
            "Deployment": self._apps.patch_namespaced_deployment,
            "Service": self._core.patch_namespaced_service,
            "ConfigMap": self._core.patch_namespaced_config_map,
        }[manifest["kind"]]
        return _call(
            patch, name, namespace, manifest,
            field_manager=FIELD_MANAGER, force=True, _content_type=_APPLY,
        )  # fmt: skip

    def delete(self, kind: str, namespace: str, name: str) -> None:
        """Delete a Deployment or Service (and, in the background, what it owns); 404 is fine."""
        remove = {
            "Deployment": self._apps.delete_namespaced_deployment,
            "Service": self._core.delete_namespaced_service,
        }[kind]
        _read(remove, name, namespace, propagation_policy="Background")

    def scale(self, namespace: str, name: str, replicas: int) -> None:
        scale = {"spec": {"replicas": replicas}}
        _call(self._apps.patch_namespaced_deployment_scale, name, namespace, scale)

    def set_route_backends(
        self, route: Manifest, rule_index: int, backend_refs: list[Manifest]
    ) -> Manifest:
        """Replace one rule's backendRefs, only if the route is unchanged since it was read."""
        meta = route["metadata"]
        operations = [
            {"op": "test", "path": "/metadata/resourceVersion", "value": meta["resourceVersion"]},
            {
                "op": "replace",
                "path": f"/spec/rules/{rule_index}/backendRefs",
                "value": backend_refs,
            },
        ]
        return _call(
            self._custom.patch_namespaced_custom_object,
            GATEWAY_GROUP, GATEWAY_VERSION, meta["namespace"], HTTPROUTES, meta["name"], operations,
            _content_type="application/json-patch+json",
        )  # fmt: skip


def _read(method: Callable[..., Any], *args: Any, **kwargs: Any) -> Manifest | None:
    try:
        return _call(method, *args, **kwargs)
    except KubeError as error:
        if error.status == 404:
            return None
        raise


def _call(method: Callable[..., Any], *args: Any, **kwargs: Any) -> Manifest:
    """Run a client call and return the answer's JSON as it came."""
    try:
        reply = method(*args, _preload_content=False, **kwargs)
    except ApiException as error:
        raise KubeError(int(error.status or 0), f"HTTP {error.status}: {error.body}") from None
    except (OSError, urllib3.exceptions.HTTPError) as error:
        raise KubeError(0, f"the API server cannot be reached: {error}") from None
    body = json.loads(reply.data or b"{}")
    return body if isinstance(body, dict) else {}
