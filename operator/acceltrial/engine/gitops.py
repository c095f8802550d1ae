"""The manifests a GitOps user commits after a promotion: live objects as they belong in Git. Pure.

A live object carries what the API server added: status, server-set metadata and defaults the
user never wrote (a Deployment's ``strategy`` and ``revisionHistoryLimit``, a container's
``terminationMessagePath``, an HTTPRoute backend's ``kind: Service``, ...). Committed as they are,
these would show up as noise in every diff. A default is dropped only where the live value equals
the value the API server fills in again, so applying the result gives back the same object.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

Manifest = dict[str, Any]

_SERVER_ANNOTATIONS = ("kubectl.kubernetes.io/", "deployment.kubernetes.io/")
_DEPLOYMENT_DEFAULTS: Mapping[str, Any] = {
    "revisionHistoryLimit": 10,
    "progressDeadlineSeconds": 600,
    "strategy": {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"},
    },
}
_POD_DEFAULTS: Mapping[str, Any] = {
    "restartPolicy": "Always",
    "terminationGracePeriodSeconds": 30,
    "dnsPolicy": "ClusterFirst",
    "schedulerName": "default-scheduler",
    "securityContext": {},
}
_CONTAINER_DEFAULTS: Mapping[str, Any] = {
    "terminationMessagePath": "/dev/termination-log",
    "terminationMessagePolicy": "File",
    "resources": {},
}
_SERVICE_DEFAULTS: Mapping[str, Any] = {
    "type": "ClusterIP",
    "sessionAffinity": "None",
    "ipFamilyPolicy": "SingleStack",
    "internalTrafficPolicy": "Cluster",
}
_SERVER_ASSIGNED_SERVICE_FIELDS = ("clusterIP", "clusterIPs", "ipFamilies")
_PARENT_REF_DEFAULTS: Mapping[str, Any] = {"group": "gateway.networking.k8s.io", "kind": "Gateway"}
_BACKEND_REF_DEFAULTS: Mapping[str, Any] = {"group": "", "kind": "Service", "weight": 1}
_DEFAULT_MATCHES = [{"path": {"type": "PathPrefix", "value": "/"}}]


def committable(manifest: Manifest) -> Manifest:
    """``manifest`` (a live object) without status, server-set metadata and API defaults."""
    body = copy.deepcopy(manifest)
    spec = body.get("spec") or {}
    pruning: dict[str, Callable[[Manifest], None]] = {
        "Deployment": _deployment,
        "Service": _service,
        "HTTPRoute": _http_route,
    }
    prune = pruning.get(str(body.get("kind")))
    if prune is not None:
        prune(spec)
    return {
        "apiVersion": body.get("apiVersion"),
        "kind": body.get("kind"),
        "metadata": _metadata(body.get("metadata") or {}),
        "spec": spec,
    }


def _metadata(metadata: Manifest) -> Manifest:
    kept = {k: metadata[k] for k in ("name", "namespace", "labels") if metadata.get(k)}
    annotations = {
        k: v
        for k, v in (metadata.get("annotations") or {}).items()
        if not k.startswith(_SERVER_ANNOTATIONS)
    }
    return kept | ({"annotations": annotations} if annotations else {})


def _drop_defaults(fields: Manifest, defaults: Mapping[str, Any]) -> None:
    for key, default in defaults.items():
        if key in fields and fields[key] == default:
            del fields[key]


def _deployment(spec: Manifest) -> None:
    _drop_defaults(spec, _DEPLOYMENT_DEFAULTS)
    template = spec.get("template") or {}
    template_metadata = template.get("metadata") or {}
    if template_metadata.get("creationTimestamp", "") is None:
        del template_metadata["creationTimestamp"]
    pod = template.get("spec") or {}
    _drop_defaults(pod, _POD_DEFAULTS)
    for container in [*(pod.get("containers") or []), *(pod.get("initContainers") or [])]:
        _container(container)


def _container(container: Manifest) -> None:
    _drop_defaults(container, _CONTAINER_DEFAULTS)
    if container.get("imagePullPolicy") == _pull_policy(str(container.get("image", ""))):
        del container["imagePullPolicy"]
    for port in container.get("ports") or []:
        _drop_defaults(port, {"protocol": "TCP"})


def _pull_policy(image: str) -> str:
    """What the API server sets when imagePullPolicy is not given."""
    tagged = ":" in image.rsplit("/", 1)[-1] and not image.endswith(":latest")
    return "IfNotPresent" if tagged or "@" in image else "Always"


def _service(spec: Manifest) -> None:
    # The cluster IP is allocated by the server, unless someone asked for none (headless).
    if spec.get("clusterIP") != "None":
        for field in _SERVER_ASSIGNED_SERVICE_FIELDS:
            spec.pop(field, None)
    _drop_defaults(spec, _SERVICE_DEFAULTS)
    for port in spec.get("ports") or []:
        _drop_defaults(port, {"protocol": "TCP"})
        if port.get("targetPort") == port.get("port"):
            del port["targetPort"]


def _http_route(spec: Manifest) -> None:
    for parent in spec.get("parentRefs") or []:
        _drop_defaults(parent, _PARENT_REF_DEFAULTS)
    for rule in spec.get("rules") or []:
        if rule.get("matches") == _DEFAULT_MATCHES:
            del rule["matches"]
        for backend in rule.get("backendRefs") or []:
            _drop_defaults(backend, _BACKEND_REF_DEFAULTS)
