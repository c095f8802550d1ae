"""The kinds the sandbox serves: built-in ones and those registered by CRDs, plus discovery.

A :class:`ResourceType` says everything the server needs to route and store a kind (group,
version, plural, scope, subresources) and to describe it in discovery the way a real API server
does (``/api``, ``/apis``, ``/api/v1``, ``/apis/<group>/<version>``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


@dataclass(frozen=True)
class ResourceType:
    """One served kind in one group version."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    short_names: tuple[str, ...] = ()
    status: bool = True
    scale: bool = False
    schema: dict[str, Any] | None = field(default=None, compare=False)
    """The openAPIV3Schema of a custom kind; None for built-in kinds (not validated here)."""
    printer_columns: tuple[dict[str, Any], ...] = field(default=(), compare=False)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def subresources(self) -> tuple[str, ...]:
        return (("status",) if self.status else ()) + (("scale",) if self.scale else ())

    @property
    def key(self) -> tuple[str, str]:
        """Objects are stored per (group, plural), whatever version they are served in."""
        return (self.group, self.plural)

    def discovery(self) -> list[dict[str, Any]]:
        """This kind and its subresources as APIResource entries."""
        entry: dict[str, Any] = {
            "name": self.plural,
            "singularName": self.singular,
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": VERBS,
        }
        if self.short_names:
            entry["shortNames"] = list(self.short_names)
        entries = [entry]
        if self.status:
            entries.append(self._subresource("status", self.kind))
        if self.scale:
            entries.append(self._subresource("scale", "Scale", "autoscaling", "v1"))
        return entries

    def _subresource(
        self, name: str, kind: str, group: str | None = None, version: str | None = None
    ) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "name": f"{self.plural}/{name}",
            "singularName": "",
            "namespaced": self.namespaced,
            "kind": kind,
            "verbs": ["get", "patch", "update"],
        }
        if group is not None:
            entry |= {"group": group, "version": version}
        return entry


def _core(plural: str, kind: str, **options: Any) -> ResourceType:
    return ResourceType("", "v1", plural, kind, **options)


BUILTIN: tuple[ResourceType, ...] = (
    _core("namespaces", "Namespace", namespaced=False, short_names=("ns",)),
    _core("nodes", "Node", namespaced=False, short_names=("no",)),
    _core("pods", "Pod", short_names=("po",)),
    _core("services", "Service", short_names=("svc",)),
    _core("endpoints", "Endpoints", short_names=("ep",), status=False),
    _core("configmaps", "ConfigMap", short_names=("cm",), status=False),
    _core("secrets", "Secret", status=False),
    _core("serviceaccounts", "ServiceAccount", short_names=("sa",), status=False),
    _core("events", "Event", short_names=("ev",), status=False),
    ResourceType("events.k8s.io", "v1", "events", "Event", short_names=("ev",), status=False),
    ResourceType("apps", "v1", "deployments", "Deployment", short_names=("deploy",), scale=True),
    ResourceType("apps", "v1", "replicasets", "ReplicaSet", short_names=("rs",), scale=True),
    ResourceType("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", status=False),
    ResourceType(
        "autoscaling",
        "v2",
        "horizontalpodautoscalers",
        "HorizontalPodAutoscaler",
        short_names=("hpa",),
    ),
    ResourceType("coordination.k8s.io", "v1", "leases", "Lease", status=False),
    ResourceType("batch", "v1", "jobs", "Job"),
    ResourceType("gateway.networking.k8s.io", "v1", "httproutes", "HTTPRoute"),
    ResourceType(
        "gateway.networking.k8s.io", "v1beta1", "referencegrants", "ReferenceGrant", status=False
    ),
    ResourceType("networking.k8s.io", "v1", "ingresses", "Ingress", short_names=("ing",)),
    ResourceType(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        namespaced=False,
        short_names=("crd", "crds"),
    ),
)


class Registry:
    """The served kinds; CRDs add and remove theirs while the server runs."""

    def __init__(self) -> None:
        self._types: dict[tuple[str, str, str], ResourceType] = {}
        for resource in BUILTIN:
            self.add(resource)

    def add(self, resource: ResourceType) -> None:
        self._types[(resource.group, resource.version, resource.plural)] = resource

    def remove_group_resource(self, group: str, plural: str) -> None:
        for key in [k for k in self._types if (k[0], k[2]) == (group, plural)]:
            del self._types[key]

    def find(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._types.get((group, version, plural))

    def group_versions(self) -> dict[str, list[str]]:
        """Served versions per named group (the core group "" included), in a stable order."""
        groups: dict[str, list[str]] = {}
        for group, version, _ in sorted(self._types):
            versions = groups.setdefault(group, [])
            if version not in versions:
                versions.append(version)
        return groups

    def in_version(self, group: str, version: str) -> list[ResourceType]:
        return [r for (g, v, _), r in sorted(self._types.items()) if (g, v) == (group, version)]


def api_versions() -> dict[str, Any]:
    """``GET /api``: the core group's versions."""
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}],
    }


def api_group_list(registry: Registry) -> dict[str, Any]:
    """``GET /apis``: every named group with its versions."""
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [
            _api_group(group, versions)
            for group, versions in registry.group_versions().items()
            if group
        ],
    }


def _api_group(group: str, versions: list[str]) -> dict[str, Any]:
    entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": entries, "preferredVersion": entries[0]}


def api_group(registry: Registry, group: str) -> dict[str, Any] | None:
    """``GET /apis/<group>``, or None when the group is not served."""
    versions = registry.group_versions().get(group)
    if not group or versions is None:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1"} | _api_group(group, versions)


def api_resource_list(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    """``GET /api/v1`` or ``/apis/<group>/<version>``, or None when not served."""
    resources = registry.in_version(group, version)
    if not resources:
        return None
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": [entry for resource in resources for entry in resource.discovery()],
    }
