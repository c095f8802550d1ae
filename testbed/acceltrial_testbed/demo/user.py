"""The scenario's scripted user: actions a person, an autoscaler or a GitOps tool takes while the
trial runs (fired once, on a phase or after a delay), and which variant serves all traffic when
the scenario ends, read from the route and the Ready pods as a gateway would route."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from acceltrial.api.actions import ACTION_ANNOTATION
from acceltrial.engine.routing import serving
from acceltrial_testbed.demo.cluster import DEPLOYMENTS, ROUTES, SERVICES, TRIALS, Client
from acceltrial_testbed.demo.route import POOL_KIND, POOLS, is_pool
from acceltrial_testbed.demo.scenario import TRIAL_ACTIONS, Manifest, ScenarioAction, seconds

VARIANT_LABEL = "acceltrial.dev/variant"


@dataclass
class ScriptedUser:
    """Fires each scenario action once, when its moment comes."""

    actions: list[ScenarioAction]
    speed: float
    fired: set[int] = field(default_factory=set)
    deleted_trial: bool = False

    @property
    def waiting_for_time(self) -> bool:
        """Whether an action due after a delay has yet to fire (the scenario waits for it)."""
        return any(
            a.when.after is not None
            for index, a in enumerate(self.actions)
            if index not in self.fired
        )

    def due(self, phase: str | None, elapsed: float) -> list[ScenarioAction]:
        """The actions whose moment has come, each returned once."""
        ready = []
        for index, action in enumerate(self.actions):
            when = action.when
            if index in self.fired:
                continue
            if (when.phase is not None and when.phase == phase) or (
                when.after is not None and elapsed >= seconds(when.after, self.speed)
            ):
                self.fired.add(index)
                ready.append(action)
        return ready

    def perform(self, action: ScenarioAction, client: Client, trial: Manifest) -> str:
        """Do it against the cluster; a sentence saying what was done."""
        meta, spec = trial["metadata"], trial["spec"]
        namespace = str(meta.get("namespace", "default"))
        trial_path = f"{TRIALS.format(namespace)}/{meta['name']}"
        if action.do in TRIAL_ACTIONS:
            client.merge(trial_path, {"metadata": {"annotations": {ACTION_ANNOTATION: action.do}}})
            return f"a person asks to {action.do} (annotation {ACTION_ANNOTATION}: {action.do})"
        if action.do == "delete-trial":
            client.request("DELETE", trial_path)
            self.deleted_trial = True
            return f"the trial is deleted (kubectl delete acceleratortrial {meta['name']})"
        if action.do == "scale-baseline":
            name = spec["baseline"]["deploymentRef"]["name"]
            path = f"{DEPLOYMENTS.format(namespace)}/{name}/scale"
            client.merge(path, {"spec": {"replicas": action.replicas}})
            return (
                f"the baseline Deployment {name} is scaled to {action.replicas} "
                "(as Argo CD self-heal or an autoscaler would)"
            )
        return self._set_route_weights(action, client, spec, namespace)

    @staticmethod
    def _set_route_weights(
        action: ScenarioAction, client: Client, spec: Manifest, namespace: str
    ) -> str:
        routing = spec["traffic"].get("gatewayapi") or {}
        route_ref = routing.get("httpRouteRef") or {}
        path = f"{ROUTES.format(route_ref.get('namespace') or namespace)}/{route_ref.get('name')}"
        route = client.get(path)
        if route is None:
            return f"no HTTPRoute at {path} to set weights on"
        weights = action.weights or {}
        for rule in route["spec"]["rules"]:
            rule["backendRefs"] = [
                {**ref, "weight": weights[ref["name"]]} if ref.get("name") in weights else ref
                for ref in rule.get("backendRefs") or []
            ]
        client.merge(path, {"spec": {"rules": route["spec"]["rules"]}})
        said = ", ".join(f"{name}={weight}" for name, weight in weights.items())
        return f"the HTTPRoute's weights are set to {said} (as a GitOps sync would)"


def served_by(client: Client, trial: Manifest) -> tuple[str | None, str]:
    """Which variant receives all traffic now: "candidate", "baseline", or None, with why."""
    namespace = str(trial["metadata"].get("namespace", "default"))
    spec = trial["spec"]
    baseline = spec["baseline"]
    services: list[str]
    if spec["traffic"]["router"] == "gatewayapi":
        routing = spec["traffic"]["gatewayapi"]
        ref = routing["httpRouteRef"]
        route = client.get(f"{ROUTES.format(ref.get('namespace') or namespace)}/{ref['name']}")
        if route is None:
            return None, f"HTTPRoute {ref['name']} is gone"
        refs = [r for rule in route["spec"]["rules"] for r in rule.get("backendRefs") or []]
        weighted = [r for r in refs if int(r.get("weight", 1)) > 0]
        services = sorted({_backend(r) for r in weighted})
    else:
        services = [(baseline.get("serviceRef") or baseline["deploymentRef"])["name"]]
    variants: set[str] = set()
    for name in services:
        found = _ready_variants(client, namespace, name)
        if isinstance(found, str):
            return None, found
        variants |= found
    if len(variants) != 1:
        return None, f"traffic goes to {', '.join(sorted(variants)) or 'no Ready pod'}"
    variant = variants.pop()
    return variant, f"all traffic reaches Ready {variant} pods through {', '.join(services)}"


def _backend(ref: Manifest) -> str:
    """A backendRef as this module names it: a Service's name, ``InferencePool/<name>``."""
    return f"{POOL_KIND}/{ref['name']}" if is_pool(ref) else str(ref["name"])


def _ready_variants(client: Client, namespace: str, service_name: str) -> set[str] | str:
    kind, _, name = service_name.rpartition("/")
    if kind == POOL_KIND:
        pool = client.get(f"{POOLS.format(namespace)}/{name}")
        if pool is None:
            return f"the route sends traffic to InferencePool {name}, which does not exist"
        selector: dict[str, Any] = (pool["spec"].get("selector") or {}).get("matchLabels") or {}
        return _variants_of(client, namespace, selector, f"InferencePool {name}")
    service = client.get(f"{SERVICES.format(namespace)}/{service_name}")
    if service is None:
        return f"the route sends traffic to Service {service_name}, which does not exist"
    selector = service["spec"].get("selector") or {}
    return _variants_of(client, namespace, selector, f"Service {service_name}")


def _variants_of(
    client: Client, namespace: str, selector: dict[str, Any], what: str
) -> set[str] | str:
    label_selector = ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
    pods = client.get(f"/api/v1/namespaces/{namespace}/pods?labelSelector={label_selector}")
    # As the endpoints see them: a terminating pod (removed by a rollback, still Ready while it
    # shuts down) takes no new request, so it serves nothing.
    ready = [p for p in (pods or {}).get("items", []) if serving(p)]
    if not ready:
        return f"{what} has no Ready pods"
    return {
        "candidate"
        if (p["metadata"].get("labels") or {}).get(VARIANT_LABEL) == "candidate"
        else "baseline"
        for p in ready
    }
