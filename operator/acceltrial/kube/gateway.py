"""The Kubernetes gateway: reads and writes of the objects a trial touches, as plain dicts.

Answers are taken as the JSON the API server sent (no typed client models, which reject objects
that lack fields they consider required). Writes of objects acceltrial owns use server-side
apply under the field manager ``acceltrial``; the HTTPRoute is changed with a JSON patch that
first tests the resourceVersion read, so a concurrent change by someone else fails with 409
instead of being overwritten.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from acceltrial.api.trial import TRIAL_GVR
from acceltrial.kube.calls import (
    REQUEST_TIMEOUT_SECONDS,
    KubeError,
    call,
    read,
    refusal,
    versioned,
)
from acceltrial.kube.nodes import NodeList

Manifest = dict[str, Any]
FIELD_MANAGER = "acceltrial"
HANDOVER_MANAGER = "acceltrial-handover"
_HANDOVER_ATTEMPTS = 5
"""Field manager of the handover patch, kept apart so the operator owns no applied field after."""
GATEWAY_GROUP, GATEWAY_VERSION, HTTPROUTES = "gateway.networking.k8s.io", "v1", "httproutes"
POOL_GROUP, POOL_VERSION, POOLS = "inference.networking.k8s.io", "v1", "inferencepools"
TRIAL_GROUP, TRIAL_VERSION, TRIALS = TRIAL_GVR
LOG_LIMIT_BYTES = 8 * 1024 * 1024
"""The most of a log read whole: a training run's step lines for the trial's steps."""
_APPLY = "application/apply-patch+yaml"


@dataclass
class Kube:
    """Access to the API, returning JSON-shaped dicts."""

    api: client.ApiClient
    timeout_seconds: float = REQUEST_TIMEOUT_SECONDS
    node_list: NodeList = field(default_factory=NodeList, compare=False, repr=False)
    """Every Node, one listing shared by the trials that ask while another is in flight
    (kube/nodes.py)."""

    def __post_init__(self) -> None:
        # Read back by _call from the client a method is bound to.
        setattr(self.api, "acceltrial_timeout_seconds", self.timeout_seconds)  # noqa: B010

    @property
    def _apps(self) -> client.AppsV1Api:
        return client.AppsV1Api(self.api)

    @property
    def _core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    @property
    def _custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.api)

    @property
    def _autoscaling(self) -> client.AutoscalingV2Api:
        return client.AutoscalingV2Api(self.api)

    @property
    def _batch(self) -> client.BatchV1Api:
        return client.BatchV1Api(self.api)

    def job(self, namespace: str, name: str) -> Manifest | None:
        return read(self._batch.read_namespaced_job, name, namespace)

    def pod_log(
        self, namespace: str, name: str, tail_lines: int | None, *, timestamps: bool = False
    ) -> str:
        """The last lines of a pod's (first container's) log, as text (every line, at most
        :data:`LOG_LIMIT_BYTES`, when ``tail_lines`` is None; each line prefixed with the
        kubelet's RFC 3339 time with ``timestamps``)."""
        options: dict[str, Any] = {"timestamps": True} if timestamps else {}
        if tail_lines is None:
            options["limit_bytes"] = LOG_LIMIT_BYTES
        else:
            options["tail_lines"] = tail_lines
        try:
            reply: Any = self._core.read_namespaced_pod_log(
                name, namespace, _preload_content=False, **options
            )
        except ApiException as error:
            raise KubeError(int(error.status or 0), refusal(error)) from None
        except (OSError, urllib3.exceptions.HTTPError) as error:
            raise KubeError(0, f"the API server cannot be reached: {error}") from None
        return bytes(reply.data or b"").decode(errors="replace")

    def deployment(self, namespace: str, name: str) -> Manifest | None:
        return read(self._apps.read_namespaced_deployment, name, namespace)

    def service(self, namespace: str, name: str) -> Manifest | None:
        return read(self._core.read_namespaced_service, name, namespace)

    def http_route(self, namespace: str, name: str) -> Manifest | None:
        return read(
            self._custom.get_namespaced_custom_object,
            GATEWAY_GROUP, GATEWAY_VERSION, namespace, HTTPROUTES, name,
        )  # fmt: skip

    def config_map(self, namespace: str, name: str) -> Manifest | None:
        return read(self._core.read_namespaced_config_map, name, namespace)

    def pods(self, namespace: str, selector: dict[str, str]) -> list[Manifest]:
        label_selector = ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
        reply = call(self._core.list_namespaced_pod, namespace, label_selector=label_selector)
        return list(reply.get("items") or [])

    def autoscalers(self, namespace: str) -> list[Manifest]:
        """The namespace's HorizontalPodAutoscalers (autoscaling/v2)."""
        reply = call(self._autoscaling.list_namespaced_horizontal_pod_autoscaler, namespace)
        return list(reply.get("items") or [])

    def autoscaler(self, namespace: str, name: str) -> Manifest | None:
        return read(self._autoscaling.read_namespaced_horizontal_pod_autoscaler, name, namespace)

    def set_autoscaler_target(self, namespace: str, name: str, target: Manifest) -> None:
        """Point an HPA at ``target`` (its bounds and metrics untouched); a missing HPA is fine."""
        hpa = self.autoscaler(namespace, name)
        if hpa is None or hpa.get("spec", {}).get("scaleTargetRef") == target:
            return
        operations = [
            _test_version(hpa),
            {"op": "replace", "path": "/spec/scaleTargetRef", "value": target},
        ]
        versioned(
            self._autoscaling.patch_namespaced_horizontal_pod_autoscaler,
            name, namespace, operations, field_manager=FIELD_MANAGER,
            _content_type="application/json-patch+json",
        )  # fmt: skip

    def release(
        self, kind: str, namespace: str, name: str, owner_uid: str, labels: dict[str, str]
    ) -> None:
        """Hand an object over (a Deployment, Service or InferencePool): drop the
        ownerReference to ``owner_uid`` and every server-side apply entry of our field manager,
        and add ``labels``. Idempotent; 404 is fine."""
        methods: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
            "Deployment": (
                self._apps.read_namespaced_deployment,
                self._apps.patch_namespaced_deployment,
            ),
            "Service": (self._core.read_namespaced_service, self._core.patch_namespaced_service),
            "InferencePool": (self._read_inference_pool, self._patch_inference_pool),
        }
        get, patch = methods[kind]
        for attempt in range(_HANDOVER_ATTEMPTS):
            live = read(get, name, namespace)
            if live is None:
                return
            operations = handover_operations(live, owner_uid, labels)
            if len(operations) == 1:
                return  # nothing left to hand over
            try:
                versioned(
                    patch, name, namespace, operations, field_manager=HANDOVER_MANAGER,
                    _content_type="application/json-patch+json",
                )  # fmt: skip
                return
            except KubeError as error:
                # A controller's status write in between: read again, a few times, then let
                # the tick retry.
                if error.status != 409 or attempt == _HANDOVER_ATTEMPTS - 1:
                    raise

    def nodes(self) -> list[Manifest]:
        return list(call(self._core.list_node).get("items") or [])

    def recent_nodes(self) -> list[Manifest]:
        """Every Node as a capacity check reads it, from a listing that started after the call
        (shared by the trials of this process asking meanwhile); read-only."""
        return self.node_list.all(self)

    def node(self, name: str) -> Manifest | None:
        return read(self._core.read_node, name)

    def node_pools(self) -> list[Manifest]:
        """Karpenter's NodePools (karpenter.sh/v1); none where Karpenter is not installed."""
        reply = read(self._custom.list_cluster_custom_object, "karpenter.sh", "v1", "nodepools")
        return list((reply or {}).get("items") or [])

    def trials(self, namespace: str) -> list[Manifest]:
        reply = call(
            self._custom.list_namespaced_custom_object,
            TRIAL_GROUP, TRIAL_VERSION, namespace, TRIALS,
        )  # fmt: skip
        return list(reply.get("items") or [])

    def trial(self, namespace: str, name: str, plural: str = TRIALS) -> Manifest | None:
        """An AcceleratorTrial (a TrainingTrial with ``plural`` trainingtrials)."""
        return read(
            self._custom.get_namespaced_custom_object,
            TRIAL_GROUP, TRIAL_VERSION, namespace, plural, name,
        )  # fmt: skip

    def patch_trial_status(
        self, namespace: str, name: str, status: Manifest, plural: str = TRIALS
    ) -> None:
        """Merge ``status`` into a trial's status subresource (None removes a key); a
        TrainingTrial's with ``plural`` trainingtrials."""
        call(
            self._custom.patch_namespaced_custom_object_status,
            TRIAL_GROUP, TRIAL_VERSION, namespace, plural, name, {"status": status},
            _content_type="application/merge-patch+json",
        )  # fmt: skip

    def annotate_trial(self, namespace: str, name: str, annotations: dict[str, str | None]) -> None:
        """Merge ``annotations`` into a trial's metadata (how people ask for an action; None
        removes one)."""
        call(
            self._custom.patch_namespaced_custom_object,
            TRIAL_GROUP, TRIAL_VERSION, namespace, TRIALS, name,
            {"metadata": {"annotations": annotations}},
            _content_type="application/merge-patch+json",
        )  # fmt: skip

    def secret(self, namespace: str, name: str) -> Manifest | None:
        """A Secret as stored (its data base64-encoded), None when it does not exist."""
        return read(self._core.read_namespaced_secret, name, namespace)

    def apply(self, manifest: Manifest) -> Manifest:
        """Server-side apply of a Deployment, Service, ConfigMap or Job we own."""
        name, namespace = manifest["metadata"]["name"], manifest["metadata"]["namespace"]
        patch = {
            "Deployment": self._apps.patch_namespaced_deployment,
            "Service": self._core.patch_namespaced_service,
            "ConfigMap": self._core.patch_namespaced_config_map,
            "Job": self._batch.patch_namespaced_job,
        }[manifest["kind"]]
        return call(
            patch, name, namespace, manifest,
            field_manager=FIELD_MANAGER, force=True, _content_type=_APPLY,
        )  # fmt: skip

    def inference_pool(self, namespace: str, name: str) -> Manifest | None:
        return read(self._read_inference_pool, name, namespace)

    def _read_inference_pool(self, name: str, namespace: str, **options: Any) -> Any:
        return self._custom.get_namespaced_custom_object(
            POOL_GROUP, POOL_VERSION, namespace, POOLS, name, **options
        )

    def _patch_inference_pool(self, name: str, namespace: str, body: Any, **options: Any) -> Any:
        return self._custom.patch_namespaced_custom_object(
            POOL_GROUP, POOL_VERSION, namespace, POOLS, name, body, **options
        )

    def deployments(self, namespace: str) -> list[Manifest]:
        reply = call(self._apps.list_namespaced_deployment, namespace)
        return list(reply.get("items") or [])

    def apply_inference_pool(self, manifest: Manifest) -> Manifest:
        """Server-side apply of an InferencePool we own (the candidate's)."""
        meta = manifest["metadata"]
        return call(
            self._custom.patch_namespaced_custom_object,
            POOL_GROUP, POOL_VERSION, meta["namespace"], POOLS, meta["name"], manifest,
            field_manager=FIELD_MANAGER, force=True, _content_type=_APPLY,
        )  # fmt: skip

    def delete_inference_pool(self, namespace: str, name: str) -> None:
        read(
            self._custom.delete_namespaced_custom_object,
            POOL_GROUP, POOL_VERSION, namespace, POOLS, name,
        )  # fmt: skip

    def delete(self, kind: str, namespace: str, name: str) -> None:
        """Delete a Deployment, Service or Job (and, in the background, what it owns); 404 is
        fine."""
        remove = {
            "Deployment": self._apps.delete_namespaced_deployment,
            "Service": self._core.delete_namespaced_service,
            "Job": self._batch.delete_namespaced_job,
        }[kind]
        read(remove, name, namespace, propagation_policy="Background")

    def scale(self, namespace: str, name: str, replicas: int) -> None:
        scale = {"spec": {"replicas": replicas}}
        call(self._apps.patch_namespaced_deployment_scale, name, namespace, scale)

    def set_service_selector(self, service: Manifest, selector: dict[str, str]) -> None:
        """Replace a Service's spec.selector, only if the Service is unchanged since it was
        read."""
        meta = service["metadata"]
        operations = [
            _test_version(service),
            {"op": "replace", "path": "/spec/selector", "value": selector},
        ]
        call(
            self._core.patch_namespaced_service, meta["name"], meta["namespace"], operations,
            field_manager=FIELD_MANAGER, _content_type="application/json-patch+json",
        )  # fmt: skip

    def set_route_rules(
        self,
        route: Manifest,
        backend_refs: dict[int, list[Manifest]],
        annotations: dict[str, str | None] | None = None,
        filters: dict[int, list[Manifest] | None] | None = None,
    ) -> Manifest:
        """Replace the backendRefs of the rules at the given indices and, for those in
        ``filters``, their filters (None: none at all), and set or, with None, remove
        ``annotations``; only if the route is unchanged since it was read."""
        meta = route["metadata"]
        operations = [
            _test_version(route),
            *(
                {"op": "replace", "path": f"/spec/rules/{index}/backendRefs", "value": refs}
                for index, refs in sorted(backend_refs.items())
            ),
            *_filter_operations(route, filters or {}),
            *annotation_operations(route, annotations or {}),
        ]
        return call(
            self._custom.patch_namespaced_custom_object,
            GATEWAY_GROUP, GATEWAY_VERSION, meta["namespace"], HTTPROUTES, meta["name"], operations,
            field_manager=FIELD_MANAGER, _content_type="application/json-patch+json",
        )  # fmt: skip

    def disown_route(self, route: Manifest, annotations: dict[str, str | None]) -> None:
        """After promotion: set or remove ``annotations`` and forget our field manager's
        ownership of the route (the weights it wrote), so whoever applies the route next (a
        GitOps sync, a person with ``kubectl apply --server-side``) meets no conflict with us.
        Only if the route is unchanged since it was read; nothing is sent if nothing is left."""
        managed = route["metadata"].get("managedFields") or []
        others = [m for m in managed if m.get("manager") != FIELD_MANAGER]
        operations = annotation_operations(route, annotations)
        if len(others) != len(managed):
            operations.append(
                {"op": "replace", "path": "/metadata/managedFields", "value": others or [{}]}
            )
        if not operations:
            return
        meta = route["metadata"]
        versioned(
            self._custom.patch_namespaced_custom_object,
            GATEWAY_GROUP, GATEWAY_VERSION, meta["namespace"], HTTPROUTES, meta["name"],
            [_test_version(route), *operations],
            field_manager=HANDOVER_MANAGER, _content_type="application/json-patch+json",
        )  # fmt: skip

    def reference_grants(self, namespace: str) -> list[Manifest]:
        """The namespace's Gateway API ReferenceGrants (none where the kind is not served)."""
        try:
            reply = call(
                self._custom.list_namespaced_custom_object,
                GATEWAY_GROUP, "v1beta1", namespace, "referencegrants",
            )  # fmt: skip
        except KubeError as error:
            if error.status == 404:
                return []
            raise
        return list(reply.get("items") or [])


def _filter_operations(
    route: Manifest, filters: dict[int, list[Manifest] | None]
) -> list[Manifest]:
    rules = route.get("spec", {}).get("rules") or []
    operations: list[Manifest] = []
    for index, wanted in sorted(filters.items()):
        path = f"/spec/rules/{index}/filters"
        present = "filters" in rules[index]
        if wanted is not None:
            operations.append({"op": "add", "path": path, "value": wanted})  # add replaces too
        elif present:
            operations.append({"op": "remove", "path": path})
    return operations


def annotation_operations(obj: Manifest, wanted: dict[str, str | None]) -> list[Manifest]:
    """JSON patch operations setting (or, for None, removing) annotations of ``obj``; the map
    goes when nothing is left in it."""
    current = obj["metadata"].get("annotations")
    if current is None:
        kept = {k: v for k, v in wanted.items() if v is not None}
        return [{"op": "add", "path": "/metadata/annotations", "value": kept}] if kept else []
    left = {k: v for k, v in {**current, **wanted}.items() if v is not None}
    if not left and current:
        # An empty map is stored as none at all (as the API server serialises it).
        return [{"op": "remove", "path": "/metadata/annotations"}]
    operations: list[Manifest] = []
    for key, value in wanted.items():
        path = "/metadata/annotations/" + key.replace("~", "~0").replace("/", "~1")
        if value is None and key in current:
            operations.append({"op": "remove", "path": path})
        elif value is not None and current.get(key) != value:
            operations.append({"op": "add", "path": path, "value": value})
    return operations


def handover_operations(live: Manifest, owner_uid: str, labels: dict[str, str]) -> list[Manifest]:
    """The JSON patch that hands ``live`` over; only the resourceVersion test if nothing is left
    to do. managedFields written back without our apply entry make the server forget our
    ownership (an empty list would be ignored, so ``[{}]`` clears them all)."""
    meta = live.get("metadata", {})
    operations: list[Manifest] = [_test_version(live)]
    owners = meta.get("ownerReferences") or []
    kept = [owner for owner in owners if owner.get("uid") != owner_uid]
    if len(kept) != len(owners):
        if kept:
            operations.append({"op": "replace", "path": "/metadata/ownerReferences", "value": kept})
        else:
            operations.append({"op": "remove", "path": "/metadata/ownerReferences"})
    current = meta.get("labels") or {}
    missing = {k: v for k, v in labels.items() if current.get(k) != v}
    if missing:
        operations.append(
            {"op": "add", "path": "/metadata/labels", "value": {**current, **missing}}
        )
    managed = meta.get("managedFields") or []
    ours = [m for m in managed if m.get("manager") == FIELD_MANAGER]
    if ours:
        others = [m for m in managed if m.get("manager") != FIELD_MANAGER]
        operations.append(
            {"op": "replace", "path": "/metadata/managedFields", "value": others or [{}]}
        )
    return operations


def _test_version(obj: Manifest) -> Manifest:
    version = obj["metadata"]["resourceVersion"]
    return {"op": "test", "path": "/metadata/resourceVersion", "value": version}
