"""The workload controllers a real control plane runs, simplified: Deployment, ReplicaSet,
scheduler and kubelet.

- Deployment: one ReplicaSet per pod template (``<deployment>-<pod-template-hash>``, owned by the
  Deployment); the current one is scaled to ``spec.replicas`` and older ones down as the new
  pods become available (a rolling update without surge limits). Status as the real controller
  keeps it: ``observedGeneration``, ``replicas``, ``updatedReplicas``, ``readyReplicas``,
  ``availableReplicas``, ``unavailableReplicas`` (zeros omitted), and the ``Available``
  (``maxUnavailable``-aware) and ``Progressing`` conditions with the real reasons.
- ReplicaSet: creates pods named ``<replicaset>-<5 chars>`` from the template (labels, owner
  reference) and deletes the surplus, unscheduled and unready first.
- Scheduler: binds pending pods (:mod:`acceltrial_testbed.sandbox.scheduling`), or marks them
  ``PodScheduled=False`` with reason ``Unschedulable``.
- Kubelet: a bound pod becomes Running and Ready ``ready_delay`` seconds after binding.
- HorizontalPodAutoscaler (no metrics API here): keeps its target Deployment's replicas within
  ``minReplicas``..``maxReplicas``; like the real controller it leaves a target scaled to zero
  alone (condition ``ScalingActive=False``, reason ``ScalingDisabled``).
- Endpoints: each Service with a selector gets an Endpoints object and an EndpointSlice
  (``kubernetes.io/service-name``) listing its pods' IPs
  (:mod:`acceltrial_testbed.sandbox.endpoints`).

They are level-triggered: any change to these kinds wakes one reconcile pass over all of them;
writes that change nothing are no-ops in the store, so the passes settle.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import math
from collections import defaultdict
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from acceltrial_testbed.sandbox.endpoints import endpoint_port, endpoint_slice_of, endpoints_of
from acceltrial_testbed.sandbox.errors import ApiError
from acceltrial_testbed.sandbox.jobs import JobController
from acceltrial_testbed.sandbox.objects import owner_reference, pod_ready, stable_hash
from acceltrial_testbed.sandbox.resources import ResourceType
from acceltrial_testbed.sandbox.scheduling import choose_node, pod_requests
from acceltrial_testbed.sandbox.store import Change, Object, Store, timestamp

_BATCH_SECONDS = 0.005
_WATCHED = {
    ("autoscaling", "horizontalpodautoscalers"),
    ("apps", "deployments"),
    ("apps", "replicasets"),
    ("", "pods"),
    ("", "nodes"),
    ("", "services"),
    ("batch", "jobs"),
}


class Controllers:
    """Runs the controllers on the store's event loop (see the module docstring)."""

    def __init__(self, store: Store, ready_delay: float) -> None:
        self.store = store
        self.ready_delay = ready_delay
        self._wake = asyncio.Event()
        self._bound_at: dict[str, float] = {}
        self._ips = 0
        self._owned: dict[str, list[Object]] = {}
        store.listeners.append(self._on_change)
        self.deployments = self._type("apps", "deployments")
        self.replicasets = self._type("apps", "replicasets")
        self.pods = self._type("", "pods")
        self.nodes = self._type("", "nodes")
        self.services = self._type("", "services")
        self.endpoints = self._type("", "endpoints")
        autoscalers = self.store.registry.find("autoscaling", "v2", "horizontalpodautoscalers")
        assert autoscalers is not None
        self.autoscalers = autoscalers
        slices = self.store.registry.find("discovery.k8s.io", "v1", "endpointslices")
        assert slices is not None
        self.slices = slices
        jobs = self.store.registry.find("batch", "v1", "jobs")
        assert jobs is not None
        self.jobs = JobController(store, jobs, self.pods, self._wake.set, self._write_status)

    def _type(self, group: str, plural: str) -> ResourceType:
        found = self.store.registry.find(group, "v1", plural)
        assert found is not None  # built-in kinds
        return found

    def _on_change(self, change: Change) -> None:
        if change.resource.key in _WATCHED:
            self._wake.set()

    async def run(self) -> None:
        self._wake.set()
        while True:
            await self._wake.wait()
            # A short batching window: a burst of writes (a client creating many objects)
            # then costs one pass instead of one per write.
            await asyncio.sleep(_BATCH_SECONDS)
            self._wake.clear()
            self.reconcile()

    def reconcile(self) -> None:
        """One pass over every controller."""
        self._owned = _by_controller(self._all(self.replicasets) + self._all(self.pods))
        for autoscaler in self._all(self.autoscalers):
            self._guard(functools.partial(self._autoscale, autoscaler))
        for deployment in self._all(self.deployments):
            self._guard(functools.partial(self._deployment, deployment))
        for replicaset in self._all(self.replicasets):
            self._guard(functools.partial(self._replicaset, replicaset))
        self._guard(functools.partial(self.jobs.reconcile, self._owned))
        self._schedule()
        self._kubelet()
        pods = self._all(self.pods)
        for service in self._all(self.services):
            self._guard(functools.partial(self._service_endpoints, service, pods))

    def _guard(self, step: Callable[[], None]) -> None:
        """A write racing a client's (409, or an object deleted meanwhile) is retried on the
        next pass, as a real controller requeues."""
        try:
            step()
        except ApiError as error:
            if error.code not in (404, 409):
                raise
            self._wake.set()

    def _all(self, resource: ResourceType) -> list[Object]:
        # Read-only views: every write below builds new dicts instead of editing these.
        return self.store.peek(resource)

    # Deployment

    def _deployment(self, deployment: Object) -> None:
        meta = deployment["metadata"]
        if meta.get("deletionTimestamp"):
            return
        spec = deployment.get("spec") or {}
        desired = int(spec.get("replicas", 1))
        template_hash = stable_hash(spec.get("template") or {})
        owned = [rs for rs in self._owned.get(meta["uid"], []) if rs["kind"] == "ReplicaSet"]
        new = next((rs for rs in owned if _label(rs, "pod-template-hash") == template_hash), None)
        old = [rs for rs in owned if rs is not new]
        if new is None:
            new = self._new_replicaset(deployment, template_hash, desired, old)
        self._scale(new, desired)
        new_available = _status(new, "availableReplicas")
        for rs in old:
            keep = max(0, min(_spec_replicas(rs), desired - new_available))
            self._scale(rs, keep)
        self._deployment_status(deployment, new, [new, *old], desired)

    def _new_replicaset(
        self, deployment: Object, template_hash: str, desired: int, old: list[Object]
    ) -> Object:
        meta, spec = deployment["metadata"], deployment["spec"]
        template = copy.deepcopy(spec.get("template") or {})
        labels = (template.setdefault("metadata", {}).get("labels") or {}) | {
            "pod-template-hash": template_hash
        }
        template["metadata"]["labels"] = labels
        selector = copy.deepcopy(spec.get("selector") or {})
        selector["matchLabels"] = (selector.get("matchLabels") or {}) | {
            "pod-template-hash": template_hash
        }
        revision = 1 + max((_revision(rs) for rs in old), default=0)
        body = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": f"{meta['name']}-{template_hash}",
                "labels": labels,
                "annotations": {
                    "deployment.kubernetes.io/revision": str(revision),
                    "deployment.kubernetes.io/desired-replicas": str(desired),
                },
                "ownerReferences": [owner_reference(deployment)],
            },
            "spec": {"replicas": desired, "selector": selector, "template": template},
        }
        created, _ = self.store.create(self.replicasets, meta["namespace"], body)
        return created

    def _scale(self, replicaset: Object, replicas: int) -> None:
        if _spec_replicas(replicaset) != replicas:
            meta = replicaset["metadata"]
            self.store.update(
                self.replicasets,
                meta["namespace"],
                meta["name"],
                lambda current: _with_replicas(current, replicas),
            )

    def _deployment_status(
        self, deployment: Object, new: Object, owned: list[Object], desired: int
    ) -> None:
        replicas = sum(_status(rs, "replicas") for rs in owned)
        ready = sum(_status(rs, "readyReplicas") for rs in owned)
        available = sum(_status(rs, "availableReplicas") for rs in owned)
        updated = _status(new, "replicas")
        now = timestamp(self.store.clock())
        conditions = deployment.get("status", {}).get("conditions") or []
        minimum = desired - _max_unavailable(deployment, desired)
        available_condition = (
            _condition("Available", "True", "MinimumReplicasAvailable",
                       "Deployment has minimum availability.")
            if available >= minimum
            else _condition("Available", "False", "MinimumReplicasUnavailable",
                            "Deployment does not have minimum availability.")
        )  # fmt: skip
        conditions = _set_condition(conditions, now, available_condition)
        name = new["metadata"]["name"]
        complete = updated == replicas == available == desired
        progressing = (
            _condition("Progressing", "True", "NewReplicaSetAvailable",
                       f'ReplicaSet "{name}" has successfully progressed.')
            if complete
            else _condition("Progressing", "True", "ReplicaSetUpdated",
                            f'ReplicaSet "{name}" is progressing.')
        )  # fmt: skip
        conditions = _set_condition(conditions, now, progressing)
        counts = {
            "replicas": replicas,
            "updatedReplicas": updated,
            "readyReplicas": ready,
            "availableReplicas": available,
            "unavailableReplicas": max(0, replicas - available),
        }
        status = {
            "observedGeneration": deployment["metadata"]["generation"],
            **{key: value for key, value in counts.items() if value},
            "conditions": conditions,
        }
        self._write_status(self.deployments, deployment, status)

    # HorizontalPodAutoscaler

    def _autoscale(self, hpa: Object) -> None:
        meta, spec = hpa["metadata"], hpa.get("spec") or {}
        target = spec.get("scaleTargetRef") or {}
        if target.get("kind") != "Deployment":
            return
        try:
            deployment = self.store.get(self.deployments, meta["namespace"], str(target["name"]))
        except ApiError as error:
            if error.code != 404:
                raise
            return
        current = _spec_replicas(deployment)
        low, high = int(spec.get("minReplicas", 1)), int(spec["maxReplicas"])
        active = not (current == 0 and low != 0)
        desired = min(max(current, low), high) if active else 0
        if desired != current:
            self.store.update(
                self.deployments,
                meta["namespace"],
                target["name"],
                lambda obj: _with_replicas(obj, desired),
            )
        scaling = (
            _condition("ScalingActive", "True", "ValidMetricFound",
                       "the HPA was able to compute the replica count")
            if active
            else _condition("ScalingActive", "False", "ScalingDisabled",
                            "scaling is disabled since the replica count of the target is zero")
        )  # fmt: skip
        now = timestamp(self.store.clock())
        conditions = _set_condition(hpa.get("status", {}).get("conditions") or [], now, scaling)
        status = {"currentReplicas": current, "desiredReplicas": desired, "conditions": conditions}
        self._write_status(self.autoscalers, hpa, status)

    # ReplicaSet

    def _replicaset(self, replicaset: Object) -> None:
        meta = replicaset["metadata"]
        if meta.get("deletionTimestamp"):
            return
        pods = [
            pod
            for pod in self._owned.get(meta["uid"], [])
            if pod["kind"] == "Pod" and not pod["metadata"].get("deletionTimestamp")
        ]
        wanted = _spec_replicas(replicaset)
        for _ in range(wanted - len(pods)):
            pods.append(self._new_pod(replicaset))
        surplus = sorted(pods, key=_deletion_order)[: max(0, len(pods) - wanted)]
        for pod in surplus:
            self.store.delete(self.pods, pod["metadata"]["namespace"], pod["metadata"]["name"])
        pods = [pod for pod in pods if pod not in surplus]
        ready = sum(1 for pod in pods if pod_ready(pod))
        counts = {
            "replicas": len(pods),
            "fullyLabeledReplicas": len(pods),
            "readyReplicas": ready,
            "availableReplicas": ready,
        }
        status = {
            **{key: value for key, value in counts.items() if value or key == "replicas"},
            "observedGeneration": meta["generation"],
        }
        self._write_status(self.replicasets, replicaset, status)

    def _new_pod(self, replicaset: Object) -> Object:
        meta = replicaset["metadata"]
        template = copy.deepcopy((replicaset.get("spec") or {}).get("template") or {})
        template_meta = template.get("metadata") or {}
        spec = {
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "schedulerName": "default-scheduler",
        } | (template.get("spec") or {})
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "generateName": f"{meta['name']}-",
                "labels": template_meta.get("labels") or {},
                "annotations": template_meta.get("annotations") or {},
                "ownerReferences": [owner_reference(replicaset)],
            },
            "spec": spec,
        }
        created, _ = self.store.create(self.pods, meta["namespace"], body)
        return created

    # Scheduler and kubelet

    def _schedule(self) -> None:
        pods = self._all(self.pods)
        nodes = self._all(self.nodes)
        used: dict[str, dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
        for pod in pods:
            node = pod.get("spec", {}).get("nodeName")
            if node and pod.get("status", {}).get("phase") not in ("Succeeded", "Failed"):
                for name, amount in pod_requests(pod).items():
                    used[node][name] += amount
        for pod in pods:
            if pod.get("spec", {}).get("nodeName") or pod["metadata"].get("deletionTimestamp"):
                continue
            node, reason = choose_node(pod, nodes, used)
            if node is None:
                self._guard(functools.partial(self._unschedulable, pod, reason))
                continue
            for name, amount in pod_requests(pod).items():
                used[node][name] += amount
            self._guard(functools.partial(self._bind, pod, node))

    def _bind(self, pod: Object, node: str) -> None:
        meta = pod["metadata"]
        bound, _ = self.store.update(
            self.pods,
            meta["namespace"],
            meta["name"],
            lambda current: current | {"spec": current.get("spec", {}) | {"nodeName": node}},
        )
        conditions = _set_condition(
            [], timestamp(self.store.clock()), _condition("PodScheduled", "True")
        )
        self._write_status(self.pods, bound, {"phase": "Pending", "conditions": conditions})
        self._bound_at[meta["uid"]] = asyncio.get_running_loop().time()
        asyncio.get_running_loop().call_later(self.ready_delay, self._wake.set)

    def _unschedulable(self, pod: Object, reason: str) -> None:
        conditions = _set_condition(
            pod.get("status", {}).get("conditions") or [],
            timestamp(self.store.clock()),
            _condition("PodScheduled", "False", "Unschedulable", reason),
        )
        self._write_status(self.pods, pod, {"phase": "Pending", "conditions": conditions})

    def _kubelet(self) -> None:
        now = asyncio.get_running_loop().time()
        for pod in self._all(self.pods):
            uid = pod["metadata"]["uid"]
            if not pod.get("spec", {}).get("nodeName") or pod_ready(pod):
                continue
            if pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
                continue  # a Job's pod that exited stays as it ended
            bound_at = self._bound_at.setdefault(uid, now)
            if now - bound_at >= self.ready_delay:
                self._guard(functools.partial(self._start, pod))
            else:
                asyncio.get_running_loop().call_later(
                    self.ready_delay - (now - bound_at), self._wake.set
                )

    def _start(self, pod: Object) -> None:
        stamp = timestamp(self.store.clock())
        self._ips += 1
        conditions: list[Object] = pod.get("status", {}).get("conditions") or []
        for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready"):
            conditions = _set_condition(conditions, stamp, _condition(kind, "True"))
        containers = pod.get("spec", {}).get("containers") or []
        status = {
            "phase": "Running",
            "conditions": conditions,
            "hostIP": "",
            "podIP": f"10.244.{self._ips // 250}.{self._ips % 250 + 2}",
            "startTime": stamp,
            "containerStatuses": [
                {
                    "name": container.get("name"),
                    "image": container.get("image"),
                    "imageID": "",
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": stamp}},
                }
                for container in containers
            ],
        }
        self._write_status(self.pods, pod, status)

    # Endpoints

    def _service_endpoints(self, service: Object, pods: list[Object]) -> None:
        meta, spec = service["metadata"], service.get("spec") or {}
        selector = spec.get("selector") or {}
        if not selector or meta.get("deletionTimestamp"):
            return
        members = [
            pod
            for pod in pods
            if pod["metadata"]["namespace"] == meta["namespace"]
            and pod.get("status", {}).get("podIP")
            and all((pod["metadata"].get("labels") or {}).get(k) == v for k, v in selector.items())
        ]
        ports = [endpoint_port(port, members) for port in spec.get("ports") or []]
        self._upsert(self.endpoints, meta["namespace"], endpoints_of(service, members, ports))
        self._upsert(self.slices, meta["namespace"], endpoint_slice_of(service, members, ports))

    def _upsert(self, resource: ResourceType, namespace: str, body: Object) -> None:
        name = body["metadata"]["name"]
        try:
            current = self.store.get(resource, namespace, name)
        except ApiError as error:
            if error.code != 404:
                raise
            self.store.create(resource, namespace, body)
            return
        wanted = {k: v for k, v in body.items() if k != "metadata"}
        if any(current.get(k) != v for k, v in wanted.items()):
            self.store.update(resource, namespace, name, lambda obj: obj | wanted)

    def _write_status(self, resource: ResourceType, obj: Object, status: Object) -> None:
        meta = obj["metadata"]
        if obj.get("status") == status:
            return
        self.store.update(
            resource,
            meta.get("namespace", ""),
            meta["name"],
            lambda current: current | {"status": status},
            subresource="status",
        )


def _by_controller(objects: list[Object]) -> dict[str, list[Object]]:
    """Objects by the uid of their controlling owner (ownerReferences with controller: true)."""
    owned: dict[str, list[Object]] = defaultdict(list)
    for obj in objects:
        for ref in obj["metadata"].get("ownerReferences") or []:
            if ref.get("controller"):
                owned[ref["uid"]].append(obj)
    return owned


def _label(obj: Object, key: str) -> str | None:
    value = (obj["metadata"].get("labels") or {}).get(key)
    return None if value is None else str(value)


def _revision(replicaset: Object) -> int:
    annotations = replicaset["metadata"].get("annotations") or {}
    return int(annotations.get("deployment.kubernetes.io/revision", "0"))


def _spec_replicas(obj: Object) -> int:
    return int((obj.get("spec") or {}).get("replicas", 1))


def _status(obj: Object, field: str) -> int:
    return int((obj.get("status") or {}).get(field, 0))


def _with_replicas(obj: Object, replicas: int) -> Object:
    obj["spec"]["replicas"] = replicas
    return obj


def _max_unavailable(deployment: Object, desired: int) -> int:
    strategy = (deployment.get("spec") or {}).get("strategy") or {}
    value: Any = (strategy.get("rollingUpdate") or {}).get("maxUnavailable", "25%")
    if strategy.get("type") == "Recreate":
        return 0
    if isinstance(value, str) and value.endswith("%"):
        return math.floor(desired * int(value[:-1]) / 100)
    return int(value)


def _deletion_order(pod: Object) -> tuple[bool, bool, str, str]:
    """Which surplus pods go first: unscheduled, then unready, then the newest."""
    meta = pod["metadata"]
    return (
        bool(pod.get("spec", {}).get("nodeName")),
        pod_ready(pod),
        _invert(meta.get("creationTimestamp", "")),
        meta["name"],
    )


def _invert(text: str) -> str:
    return "".join(chr(0x10FFFF - ord(char)) for char in text)


def _condition(kind: str, status: str, reason: str = "", message: str = "") -> Object:
    condition: Object = {"type": kind, "status": status}
    if reason:
        condition["reason"] = reason
    if message:
        condition["message"] = message
    return condition


def _set_condition(conditions: list[Object], now: str, wanted: Object) -> list[Object]:
    """Set one condition; its lastTransitionTime changes only when its status does."""
    kind, status = wanted["type"], wanted["status"]
    old = next((c for c in conditions if c.get("type") == kind), None)
    condition = dict(wanted)
    unchanged = old is not None and all(old.get(k) == v for k, v in wanted.items())
    condition["lastTransitionTime"] = (
        old["lastTransitionTime"]
        if old is not None and old.get("status") == status and "lastTransitionTime" in old
        else now
    )
    if kind in ("Available", "Progressing"):
        condition["lastUpdateTime"] = (
            old.get("lastUpdateTime", now) if unchanged and old is not None else now
        )
    index = next((i for i, c in enumerate(conditions) if c.get("type") == kind), None)
    if index is None:
        return [*conditions, condition]
    return [*conditions[:index], condition, *conditions[index + 1 :]]
