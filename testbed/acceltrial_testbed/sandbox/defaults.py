"""Defaults the API server fills into the built-in kinds the operator writes and compares.

A Deployment read back from a real cluster carries ``strategy``, ``revisionHistoryLimit``,
``progressDeadlineSeconds`` and pod-spec defaults (``restartPolicy``, ``dnsPolicy``,
``imagePullPolicy``, requests defaulted from limits, ...) that were never applied; code that
diffs desired against actual state must see them here too. Services get their ``type``,
``sessionAffinity``, port ``protocol`` and ``targetPort``, and a cluster IP. A Secret's
``stringData`` is merged into ``data``, base64-encoded, and never stored (the Secret API's
documented behaviour: "stringData ... is merged into the data field on write ... never output
when reading from the API").
"""

from __future__ import annotations

import base64
import copy
import itertools
from typing import Any

from acceltrial_testbed.sandbox.resources import ResourceType

Object = dict[str, Any]

_CLUSTER_IPS = itertools.count(10)


def default_builtin(
    resource: ResourceType, new: Object, old: Object | None, strict: bool
) -> tuple[Object, list[str]]:
    """The admission hook: default the kinds listed in the module docstring."""
    kind = (resource.group, resource.kind)
    if kind in (("apps", "Deployment"), ("apps", "ReplicaSet")):
        _workload(new.setdefault("spec", {}), deployment=resource.kind == "Deployment")
    elif kind == ("", "Pod"):
        _pod_spec(new.setdefault("spec", {}), pod=True)
    elif kind == ("", "Service"):
        _service(new.setdefault("spec", {}), old)
    elif kind == ("", "Secret"):
        _secret(new)
    return new, []


def _secret(secret: Object) -> None:
    plain = secret.pop("stringData", None) or {}
    if plain:
        encoded = {k: base64.b64encode(str(v).encode()).decode() for k, v in plain.items()}
        secret["data"] = {**(secret.get("data") or {}), **encoded}


def _workload(spec: Object, *, deployment: bool) -> None:
    spec.setdefault("replicas", 1)
    spec.setdefault("revisionHistoryLimit", 10)
    if deployment:
        spec.setdefault("progressDeadlineSeconds", 600)
        strategy = spec.setdefault("strategy", {})
        strategy.setdefault("type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            rolling = strategy.setdefault("rollingUpdate", {})
            rolling.setdefault("maxUnavailable", "25%")
            rolling.setdefault("maxSurge", "25%")
    template = spec.get("template")
    if isinstance(template, dict):
        _pod_spec(template.setdefault("spec", {}), pod=False)


def _pod_spec(spec: Object, *, pod: bool) -> None:
    for key, value in (
        ("restartPolicy", "Always"),
        ("terminationGracePeriodSeconds", 30),
        ("dnsPolicy", "ClusterFirst"),
        ("schedulerName", "default-scheduler"),
        ("securityContext", {}),
    ):
        spec.setdefault(key, copy.deepcopy(value))
    for container in spec.get("containers") or []:
        if isinstance(container, dict):
            _container(container, requests_from_limits=pod)


def _container(container: Object, *, requests_from_limits: bool) -> None:
    image = str(container.get("image", ""))
    tagged = ":" in image.rsplit("/", 1)[-1] and not image.endswith(":latest")
    container.setdefault("imagePullPolicy", "IfNotPresent" if tagged or "@" in image else "Always")
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    resources = container.setdefault("resources", {})
    limits = resources.get("limits") or {}
    if limits and requests_from_limits:  # Pods only: templates keep what was written
        # "If Requests is omitted for a container, it defaults to Limits if that is explicitly
        # specified" (ResourceRequirements).
        resources["requests"] = limits | (resources.get("requests") or {})
    for port in container.get("ports") or []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")


def _service(spec: Object, old: Object | None) -> None:
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    if spec.get("clusterIP") != "None":
        previous = ((old or {}).get("spec") or {}).get("clusterIP")
        if previous:
            spec["clusterIP"] = previous  # immutable once allocated
        elif not spec.get("clusterIP"):
            number = next(_CLUSTER_IPS)
            spec["clusterIP"] = f"10.100.{number // 250}.{number % 250 + 1}"
        spec["clusterIPs"] = [spec["clusterIP"]]
    for port in spec.get("ports") or []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port.get("port"))
