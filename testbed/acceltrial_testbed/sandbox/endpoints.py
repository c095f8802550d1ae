"""The Endpoints and EndpointSlice a Service's selected pods make, as the endpoints and
endpointslice controllers write them; both are owned by the Service (the real Endpoints object is
removed by its controller rather than by garbage collection)."""

from __future__ import annotations

from typing import Any

from acceltrial_testbed.sandbox.objects import owner_reference, pod_ready, stable_hash

Object = dict[str, Any]

_MANAGED_BY = "endpointslice.kubernetes.io/managed-by"
_SLICE_MANAGER = "endpointslice-controller.k8s.io"


def endpoints_of(service: Object, members: list[Object], ports: list[Object]) -> Object:
    """The v1 Endpoints of a Service: one subset with ready and not-ready addresses."""
    meta = service["metadata"]
    subset: Object = {"ports": ports} if ports else {}
    ready = [p for p in members if pod_ready(p)]
    not_ready = [p for p in members if not pod_ready(p)]
    if ready:
        subset["addresses"] = [_address(p) for p in ready]
    if not_ready:
        subset["notReadyAddresses"] = [_address(p) for p in not_ready]
    return {
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {
            "name": meta["name"],
            "labels": meta.get("labels") or {},
            "ownerReferences": [owner_reference(service)],
        },
        "subsets": [subset] if members else [],
    }


def endpoint_slice_of(service: Object, members: list[Object], ports: list[Object]) -> Object:
    meta = service["metadata"]
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{meta['name']}-{stable_hash(meta['uid'])[:5]}",
            "labels": {"kubernetes.io/service-name": meta["name"], _MANAGED_BY: _SLICE_MANAGER},
            "ownerReferences": [owner_reference(service)],
        },
        "addressType": "IPv4",
        "ports": ports,
        "endpoints": [
            {
                "addresses": [p["status"]["podIP"]],
                "nodeName": p["spec"].get("nodeName"),
                "conditions": {
                    "ready": pod_ready(p),
                    "serving": pod_ready(p),
                    "terminating": False,
                },
                "targetRef": _address(p)["targetRef"],
            }
            for p in members
        ],
    }


def endpoint_port(port: Object, pods: list[Object]) -> Object:
    target = port.get("targetPort", port.get("port"))
    if isinstance(target, str):
        # A named target port resolves to the container port of that name.
        target = next(
            (
                p.get("containerPort")
                for pod in pods
                for c in pod["spec"].get("containers") or []
                for p in c.get("ports") or []
                if p.get("name") == target
            ),
            port.get("port"),
        )
    result: Object = {"port": target, "protocol": port.get("protocol", "TCP")}
    if port.get("name"):
        result["name"] = port["name"]
    return result


def _address(pod: Object) -> Object:
    meta = pod["metadata"]
    return {
        "ip": pod["status"]["podIP"],
        "nodeName": pod["spec"].get("nodeName"),
        "targetRef": {
            "kind": "Pod",
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta["uid"],
        },
    }
