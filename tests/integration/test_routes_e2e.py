"""The Gateway API router on routes as they are in production, end to end against the sandbox's
API server, with the fleet's gateway serving each route and writing its status.

The routes are the Gateway API project's own traffic-splitting and routing examples, read from
the ``sigs.k8s.io/gateway-api`` Go module (the version scripts/control-plane.sh installs the CRDs
of), plus the shapes users run: a baseline in several rules with backend filters, a route in a
shared gateway namespace with and without a ReferenceGrant, a full rule. For each: the weights
the gateway applies equal the trial's at every step, rollback restores the route byte for byte,
a candidate the gateway refuses ends the trial with the gateway's reason, and another writer's
change pauses the trial naming its field manager without any write into a rule not recorded.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import config

from acceltrial.api.spec import TrialSpec
from acceltrial.api.status import OriginalRouting, TrialStatus, original_routing
from acceltrial.engine.lifecycle import decide
from acceltrial.engine.routes import RouteShape, Service
from acceltrial.engine.schedule import criteria_hash
from acceltrial.engine.ticks import Observation, RestoreRouting, SetWeight
from acceltrial.kube.gateway import Kube
from acceltrial.providers.routing.gatewayapi import TRIAL_ANNOTATION, GatewayApiRouter
from acceltrial_testbed.sandbox.cluster import Sandbox
from acceltrial_testbed.sandbox.fleet.exporter import Fleet, FleetSpec
from acceltrial_testbed.sandbox.fleet.gateway import route_requests
from acceltrial_testbed.sandbox.fleet.model import ServingProfile
from acceltrial_testbed.sandbox.fleet.traffic import Entry, read_cluster, resolved_rules
from acceltrial_testbed.sandbox.objects import pod_ready
from acceltrial_testbed.sandbox.realplane.plane import RealControlPlane
from tests.integration.e2e_kit import BACKENDS, backend_of
from tests.sandbox.conftest import IMMEDIATE, Api, Backend, eventually

GATEWAY_API_VERSION = "v1.6.3"  # as scripts/control-plane.sh
EXAMPLES = "examples/standard"
GATEWAY = "/apis/gateway.networking.k8s.io"
CANDIDATE = "llama3-inf2-candidate"
WORKLOADS = "serving"
STEPS = (5, 25, 50, 100)
START = datetime(2026, 12, 4, tzinfo=UTC)
HEALTHY = ServingProfile(p50=0.2, p99=0.6, capacity_rps=100)


@cache
def gateway_api_dir() -> Path:
    """The gateway-api module's directory in Go's module cache (downloaded if absent)."""
    if shutil.which("go") is None:
        if os.environ.get("CI"):
            pytest.fail("CI must have go to read the Gateway API examples")
        pytest.skip("no go command: the Gateway API examples cannot be read")
    found = subprocess.run(
        ["go", "mod", "download", "-json", f"sigs.k8s.io/gateway-api@{GATEWAY_API_VERSION}"],
        capture_output=True, text=True, check=True, timeout=300, cwd=tempfile.gettempdir(),
    )  # fmt: skip
    return Path(json.loads(found.stdout)["Dir"])


def upstream(path: str) -> dict[str, Any]:
    """One manifest of the Gateway API project's examples, as published."""
    text = (gateway_api_dir() / EXAMPLES / path).read_text()
    return next(doc for doc in yaml.safe_load_all(text) if doc)


@dataclass
class Case:
    """A route as found, the baseline Service among its backends, where things live."""

    route: dict[str, Any]
    baseline: str
    route_namespace: str = WORKLOADS
    grant: dict[str, Any] | None = None
    chosen: tuple[str | int, ...] = ()
    split_rules: int = 1
    """How many rules the trial splits."""
    services: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.route = copy.deepcopy(self.route)
        meta = self.route["metadata"]
        meta["namespace"] = self.route_namespace
        # The examples name their gateway by a label; attached, the gateway reports on them.
        self.route["spec"].setdefault("parentRefs", [{"name": "prod-web-gw"}])
        for rule in self.route["spec"]["rules"]:
            for ref in rule.get("backendRefs") or []:
                self.services.add(ref["name"])
        self.services.add(self.baseline)


def example(path: str, baseline: str, **extra: Any) -> Case:
    return Case(upstream(path), baseline, **extra)


def shaped(rules: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "llama3"},
        "spec": {"parentRefs": [{"name": "shared-gw", "namespace": "gateways"}], "rules": rules},
        **extra,
    }


GPU = {"name": "llama3-gpu", "port": 8000}
FILTERED = {
    **GPU,
    "filters": [
        {"type": "RequestHeaderModifier",
         "requestHeaderModifier": {"set": [{"name": "x-model", "value": "llama3"}]}},
    ],
}  # fmt: skip
SEVERAL_RULES = shaped(
    [
        {"name": "chat", "matches": [{"path": {"type": "PathPrefix", "value": "/v1/chat"}}],
         "backendRefs": [FILTERED]},
        {"matches": [{"path": {"type": "PathPrefix", "value": "/v1/completions"}}],
         "backendRefs": [{**GPU, "weight": 3}, {"name": "llama3-legacy", "port": 8000}]},
        {"name": "health", "matches": [{"path": {"type": "Exact", "value": "/health"}}],
         "backendRefs": [{"name": "llama3-legacy", "port": 8000}]},
    ]
)  # fmt: skip
CROSS = shaped(
    [{"matches": [{"path": {"type": "PathPrefix", "value": "/v1"}}],
      "backendRefs": [{**GPU, "namespace": WORKLOADS}]}]
)  # fmt: skip


def grant(names: list[str] | None) -> dict[str, Any]:
    """A ReferenceGrant in the workloads' namespace for routes of ``gateways``."""
    to: list[dict[str, Any]] = [{"group": "", "kind": "Service", **({"name": n} if n else {})}
                                for n in (names or [None])]  # type: ignore[list-item]  # fmt: skip
    return {
        "apiVersion": "gateway.networking.k8s.io/v1beta1",
        "kind": "ReferenceGrant",
        "metadata": {"name": "from-gateways", "namespace": WORKLOADS},
        "spec": {
            "from": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute",
                      "namespace": "gateways"}],
            "to": to,
        },
    }  # fmt: skip


def cases() -> dict[str, Case]:
    return {
        "simple-split": example("traffic-splitting/simple-split.yaml", "foo-v1"),
        "traffic-split-1": example("traffic-splitting/traffic-split-1.yaml", "foo-v1"),
        "traffic-split-2": example("traffic-splitting/traffic-split-2.yaml", "foo-v1"),
        "traffic-split-3": example("traffic-splitting/traffic-split-3.yaml", "foo-v2"),
        "http-routing-bar": example("http-routing/bar-httproute.yaml", "bar-svc"),
        "httproute-three-rules": example("httproute.yaml", "my-service-2"),
        "several-rules": Case(SEVERAL_RULES, "llama3-gpu", split_rules=2),
        "chosen-rule": Case(SEVERAL_RULES, "llama3-gpu", chosen=("chat",)),
        "cross-namespace": Case(CROSS, "llama3-gpu", "gateways", grant([])),
    }


CASES = (
    "simple-split", "traffic-split-1", "traffic-split-2", "traffic-split-3", "http-routing-bar",
    "httproute-three-rules", "several-rules", "chosen-rule", "cross-namespace",
)  # fmt: skip


@pytest.fixture(scope="module", params=BACKENDS)
def sandbox(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """The real control plane when it is built (always in CI), else the emulator (without its
    controllers: the tests' pods are marked Ready by hand there)."""
    if request.param == "emulator":
        with Sandbox(controllers=False) as emulated:
            yield emulated
        return
    with backend_of(request.param, nodes_per_group=2) as running:
        yield running


@dataclass
class World:
    """A route in the sandbox with the Services and Ready pods behind it, the router, the
    fleet's gateway."""

    api: Api
    kube: Kube
    case: Case
    router: GatewayApiRouter
    fleet: Fleet
    entry: Entry

    @property
    def path(self) -> str:
        name = self.case.route["metadata"]["name"]
        return f"{GATEWAY}/v1/namespaces/{self.case.route_namespace}/httproutes/{name}"

    def route(self) -> dict[str, Any]:
        return self.api.get(self.path).body  # type: ignore[no-any-return]

    def shares(self) -> list[float]:
        """Per rule the trial splits: the candidate's percentage of what the gateway sends to
        the baseline and the candidate, as the fleet's gateway serves the route now."""
        view = read_cluster(self.fleet.access, self.entry)
        found: list[float] = []
        for rule in resolved_rules(view, self.entry):
            routed = route_requests([rule], 100.0, honors_weights=True)
            baseline = sum(
                r
                for pod, r in routed.offered.items()
                if pod.startswith(f"{self.case.baseline}-pod")
            )
            candidate = sum(r for pod, r in routed.offered.items() if pod.startswith(CANDIDATE))
            if candidate or any(b.ref["name"] == CANDIDATE for b in rule.backends):
                found.append(round(100 * candidate / (baseline + candidate), 6))
        return found


_counter = iter(range(1000))


def build(sandbox: Backend, case: Case) -> World:
    api = Api.to(sandbox.access)
    suffix = next(_counter)
    workloads, route_ns = f"{WORKLOADS}-{suffix}", f"{case.route_namespace}-{suffix}"
    case = _relocated(case, workloads, route_ns)
    for namespace in {workloads, route_ns}:
        api.post("/api/v1/namespaces", {"metadata": {"name": namespace}})
    pods = [_serve(api, workloads, service) for service in sorted(case.services | {CANDIDATE})]
    if isinstance(sandbox, RealControlPlane):  # served once kwok, its kubelet, ran each pod
        eventually(lambda: all(_ready(api.get(pod).body) for pod in pods))
    if case.grant is not None:
        posted = api.post(f"{GATEWAY}/v1beta1/namespaces/{workloads}/referencegrants", case.grant)
        assert posted.status == 201, posted.body
    created = api.post(f"{GATEWAY}/v1/namespaces/{route_ns}/httproutes", case.route)
    assert created.status == 201, created.body
    kube = Kube(config.new_client_from_config(config_file=str(sandbox.kubeconfig)))
    shape = RouteShape(route_ns, Service(case.baseline, workloads), Service(CANDIDATE, workloads))
    router = GatewayApiRouter(
        kube, case.route["metadata"]["name"], shape, case.chosen, f"{workloads}/trial", STEPS
    )
    entry = Entry(workloads, route=case.route["metadata"]["name"], route_namespace=route_ns)
    profiles: dict[Any, ServingProfile] = {"baseline": HEALTHY, "candidate": HEALTHY}
    spec = FleetSpec(entry=entry, rps=100.0, prompt_tokens=100, generated_tokens=50,
                     profiles=profiles)  # fmt: skip
    fleet = Fleet(sandbox.access, spec)
    return World(api, kube, case, router, fleet, entry)


def _relocated(case: Case, workloads: str, route_ns: str) -> Case:
    """The case in namespaces of its own (one sandbox serves every test)."""
    text = json.dumps(case.route).replace(f'"{WORKLOADS}"', f'"{workloads}"')
    route = json.loads(text)
    grant_ = None
    if case.grant is not None:
        grant_ = json.loads(
            json.dumps(case.grant).replace('"gateways"', f'"{route_ns}"')
            .replace(f'"{WORKLOADS}"', f'"{workloads}"')
        )  # fmt: skip
    return Case(route, case.baseline, route_ns, grant_, case.chosen, case.split_rules)


def _serve(api: Api, namespace: str, service: str) -> str:
    """The Service and one pod behind it, marked Ready; the pod's path. On the real control
    plane it is Ready once kwok ran it (its stages' 1-6 s delays taken away: it stands in for a
    server, it does not test scheduling)."""
    labels = {
        "app": service,
        **({"acceltrial.dev/variant": "candidate"} if service == CANDIDATE else {}),
    }
    api.post(f"/api/v1/namespaces/{namespace}/services",
             {"metadata": {"name": service}, "spec": {"selector": {"app": service},
                                                      "ports": [{"port": 8080}]}})  # fmt: skip
    pods = f"/api/v1/namespaces/{namespace}/pods"
    name = f"{service}-pod"
    api.post(pods, {"metadata": {"name": name, "labels": labels, "annotations": IMMEDIATE},
                    "spec": {"containers": [{"name": "server", "image": "vllm"}]}})  # fmt: skip
    ready = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    assert api.merge(f"{pods}/{name}/status", ready).status == 200
    return f"{pods}/{name}"


def _ready(pod: dict[str, Any]) -> bool:
    """Ready, and Running: kwok has run it (the Ready the test sets by hand comes first)."""
    return pod_ready(pod) and (pod.get("status") or {}).get("phase") == "Running"


def spec_and_annotations(route: dict[str, Any]) -> str:
    """What rollback must restore exactly, serialised as stored."""
    return json.dumps([route["spec"], route["metadata"].get("annotations")])


@pytest.mark.parametrize("name", CASES)
def test_each_route_is_split_as_the_trial_says_and_restored_byte_for_byte(
    sandbox: Backend, name: str
) -> None:
    world = build(sandbox, cases()[name])
    assert world.router.problems() == []
    before = spec_and_annotations(world.route())
    original = world.router.snapshot()
    assert original.http_route is not None
    assert len(original.http_route.split_rules or []) == world.case.split_rules

    for weight in STEPS:
        world.router.set_weight(weight, original)
        world.fleet.advance()
        assert world.shares() == [weight] * world.case.split_rules, f"at {weight}%"
        assert world.router.weight(original) == weight
        assert world.router.conflict(weight, original) is None
        assert world.router.refusal() is None
        assert world.fleet.gateway_answered.get(500, 0) == 0

    world.router.restore(original)
    assert spec_and_annotations(world.route()) == before


def test_filters_of_the_baseline_ref_are_carried_to_the_candidate(sandbox: Backend) -> None:
    world = build(sandbox, cases()["several-rules"])
    original = world.router.snapshot()
    world.router.set_weight(25, original)
    chat = world.route()["spec"]["rules"][0]["backendRefs"]
    expected = {**FILTERED, "name": CANDIDATE, "weight": 25}
    # The real API server stores the CRD's defaults too (group "", kind Service).
    assert {key: chat[1][key] for key in expected} == expected
    assert (chat[1].get("group", ""), chat[1].get("kind", "Service")) == ("", "Service")


def test_a_baseline_at_weight_zero_is_left_alone_and_reported(sandbox: Backend) -> None:
    world = build(sandbox, example("traffic-splitting/traffic-split-3.yaml", "foo-v1"))
    assert world.router.problems() == [
        f"HTTPRoute {world.router.namespace}/foo-route: the baseline Service foo-v1 has weight 0 "
        "in every rule that references it, so it receives no traffic to share with the candidate"
    ]


def test_a_cross_namespace_route_without_a_grant_stops_with_the_manifest_to_create(
    sandbox: Backend,
) -> None:
    world = build(sandbox, Case(CROSS, "llama3-gpu", "gateways", grant(["llama3-gpu"])))
    before = spec_and_annotations(world.route())
    [problem] = world.router.problems()
    assert "no ReferenceGrant" in problem
    assert "(the gateway would answer HTTP 500)" in problem
    manifest = yaml.safe_load(problem.split("Create:\n", 1)[1])
    posted = world.api.post(
        f"{GATEWAY}/v1beta1/namespaces/{world.router.shape.candidate.namespace}/referencegrants",
        manifest,
    )
    assert posted.status == 201, posted.body
    assert world.router.problems() == [], "the printed manifest is the one needed"
    assert spec_and_annotations(world.route()) == before, "preflight changed nothing"


def test_a_full_rule_is_refused_in_preflight(sandbox: Backend) -> None:
    refs = [GPU, *({"name": f"shard-{i}", "port": 8000} for i in range(15))]
    world = build(sandbox, Case(shaped([{"backendRefs": refs}]), "llama3-gpu"))
    assert any("already holds 16 backendRefs" in p for p in world.router.problems())


def trial_spec() -> TrialSpec:
    return TrialSpec.model_validate(
        {
            "baseline": {"deploymentRef": {"name": "llama3-gpu"}, "instanceType": "g5.2xlarge"},
            "candidate": {"image": "neuron:1", "instanceType": "inf2.8xlarge", "neuronCores": 2},
            "traffic": {"router": "gatewayapi",
                        "gatewayapi": {"httpRouteRef": {"name": "llama3"}}},
            "steps": [{"weight": w, "duration": "1m"} for w in STEPS[:-1]],
            "analysis": {"interval": "1m", "prometheus": {"address": "http://p:9090"},
                         "criteria": [{"name": "errors", "metric": "error_ratio",
                                       "absolute": {"max": 0.01}}]},
        }
    )  # fmt: skip


def at_first_step(original: OriginalRouting) -> TrialStatus:
    return TrialStatus(
        phase="Progressing", step=1, canary_weight=STEPS[0], original=original,
        step_started_at=START, started_at=START, criteria_hash=criteria_hash(trial_spec()),
    )  # fmt: skip


def observe(world: World, status: TrialStatus) -> Observation:
    """What the operator's world observes of the routing on a tick (a router lives one tick, as
    the operator's does: it reads the route once)."""
    assert status.original is not None
    assert status.canary_weight is not None
    router = dataclasses.replace(world.router)
    return Observation(
        now=START + timedelta(seconds=30),
        generation=1,
        observed_weight=router.weight(status.original),
        routing_conflict=router.conflict(status.canary_weight, status.original),
        route_refused=router.refusal(),
        candidate_available=True,
        candidate_available_replicas=1,
    )


def test_a_candidate_the_gateway_refuses_ends_the_trial_with_its_reason(sandbox: Backend) -> None:
    world = build(sandbox, cases()["cross-namespace"])
    before = spec_and_annotations(world.route())
    original = world.router.snapshot()
    world.router.set_weight(STEPS[0], original)
    world.fleet.advance()
    assert world.router.refusal() is None
    # The grant goes (someone tidies the namespace): the gateway no longer may use the candidate.
    grants = (
        f"{GATEWAY}/v1beta1/namespaces/{world.router.shape.candidate.namespace}/referencegrants"
    )
    assert world.api.delete(f"{grants}/from-gateways").status == 200

    def answered_500() -> bool:
        world.fleet.advance()  # requests are drawn at random: the first 500 comes in time
        return world.fleet.gateway_answered.get(500, 0) > 0

    assert eventually(answered_500, timeout=10), "the gateway answers the share 500"

    result = decide(trial_spec(), at_first_step(original), observe(world, at_first_step(original)))
    assert result.status.phase == "RollingBack"
    assert result.status.decision is not None
    assert "ResolvedRefs=False, reason RefNotPermitted" in result.status.decision.reason
    rolled = decide(trial_spec(), result.status, observe(world, result.status))
    assert RestoreRouting() in rolled.actions
    world.router.restore(original)
    assert spec_and_annotations(world.route()) == before


def test_another_writer_pauses_the_trial_naming_it_and_nothing_lands_outside_our_rules(
    sandbox: Backend,
) -> None:
    world = build(sandbox, cases()["several-rules"])
    original = world.router.snapshot()
    world.router.set_weight(STEPS[0], original)
    status = at_first_step(original)
    assert observe(world, status).routing_conflict is None

    # GitOps syncs an older state of the route: a rule inserted first, a backend added to our
    # rule, and the weights back to what Git holds.
    route = world.route()
    rules = route["spec"]["rules"]
    inserted = {"name": "canary-header",
                "matches": [{"headers": [{"name": "x-canary", "value": "1"}]}],
                "backendRefs": [{"name": "llama3-gpu", "port": 8000}]}  # fmt: skip
    rules[0]["backendRefs"] = [FILTERED, {"name": "llama3-legacy", "port": 8000}]
    rules[1]["backendRefs"] = copy.deepcopy(SEVERAL_RULES["spec"]["rules"][1]["backendRefs"])
    patched = world.api.request(
        "PATCH", world.path,
        [{"op": "replace", "path": "/spec/rules", "value": [inserted, *rules]}],
        "application/json-patch+json", fieldManager="argocd-controller",
    )  # fmt: skip
    assert patched.status == 200, patched.body
    after_gitops = world.route()

    observed = observe(world, status)
    assert observed.routing_conflict is not None
    # Named, alone or beside the route's creator when both wrote within one second.
    assert "'argocd-controller'" in observed.routing_conflict
    result = decide(trial_spec(), status, observed)
    assert result.status.phase == "Paused"
    assert result.status.pause_reason == "RouteChanged"
    changed = next(c for c in result.status.conditions or [] if c.type == "RouteChanged")
    assert "argocd-controller" in changed.message
    assert not [a for a in result.actions if isinstance(a, SetWeight)]
    assert world.route() == after_gitops, "nothing written while paused"

    # A person aborts: only what the trial changed is undone, in the rules it recorded.
    aborted = decide(
        trial_spec(),
        result.status,
        dataclasses.replace(observe(world, result.status), action="abort"),
    )
    assert aborted.status.phase == "RollingBack"
    world.router.restore(original)
    restored = world.route()["spec"]["rules"]
    # As GitOps left them (with the defaults a real API server stores, e.g. kind: Service).
    synced = after_gitops["spec"]["rules"]
    assert restored[0]["name"] == inserted["name"]
    assert restored[0] == synced[0], "the rule someone else inserted is untouched"
    assert [r["name"] for r in restored[1]["backendRefs"]] == ["llama3-gpu", "llama3-legacy"]
    assert restored[1]["backendRefs"] == synced[1]["backendRefs"]
    assert restored[2]["backendRefs"] == synced[2]["backendRefs"]
    assert TRIAL_ANNOTATION not in (world.route()["metadata"].get("annotations") or {})


def test_a_route_the_gateway_already_refuses_stops_preflight(sandbox: Backend) -> None:
    missing = {"name": "llama3-gone", "port": 8000}
    rules = [{"name": "main", "backendRefs": [GPU]}, {"name": "old", "backendRefs": [missing]}]
    world = build(sandbox, Case(shaped(rules), "llama3-gpu"))
    world.api.delete(
        f"/api/v1/namespaces/{world.router.shape.candidate.namespace}/services/llama3-gone"
    )
    world.fleet.advance()
    [problem] = world.router.problems()
    assert "already does not use it" in problem
    assert "ResolvedRefs=False, reason BackendNotFound" in problem


def test_a_trial_recorded_by_an_older_version_still_moves_and_restores_its_rule(
    sandbox: Backend,
) -> None:
    world = build(sandbox, cases()["traffic-split-2"])
    before = spec_and_annotations(world.route())
    rule = world.route()["spec"]["rules"][0]
    older = original_routing(
        {"router": "gatewayapi",
         "httpRoute": {"name": "foo-route", "namespace": world.router.namespace, "ruleIndex": 0,
                       "backendRefs": rule["backendRefs"]}}
    )  # fmt: skip
    world.router.set_weight(25, older)
    world.fleet.advance()
    assert world.shares() == [25]
    assert world.router.conflict(25, older) is None
    world.router.restore(older)
    assert spec_and_annotations(world.route()) == before


def test_a_shadow_step_beside_the_users_own_mirror_serves_no_user_and_restores_exactly(
    sandbox: Backend,
) -> None:
    """The Gateway API's request-mirroring example (foo-v1 answers, foo-v2 gets copies): the
    trial's mirror is added beside the route's own, the candidate gets copies and no user, the
    first weighted step removes only the trial's mirror, and rollback restores the route byte
    for byte."""
    world = build(sandbox, example("http-request-mirroring/httproute-mirroring.yaml", "foo-v1"))
    _serve(world.api, world.router.shape.candidate.namespace, "foo-v2")  # the route's own mirror
    assert world.router.problems() == []
    before = spec_and_annotations(world.route())
    theirs = world.route()["spec"]["rules"][0]["filters"]
    original = world.router.snapshot()

    world.router.set_weight(0, original, mirror=100)
    rule = world.route()["spec"]["rules"][0]
    assert rule["filters"][:1] == theirs, "the route's own mirror stays first, unchanged"
    assert rule["filters"][1]["requestMirror"]["backendRef"]["name"] == CANDIDATE
    assert rule["backendRefs"] == json.loads(before)[0]["rules"][0]["backendRefs"]
    view = read_cluster(world.fleet.access, world.entry)
    routed = route_requests(resolved_rules(view, world.entry), 100.0, honors_weights=True)
    assert not any(pod.startswith(CANDIDATE) for pod in routed.offered), "no user's request"
    assert routed.mirrored == {f"{CANDIDATE}-pod": 100.0, "foo-v2-pod": 100.0}
    assert world.router.conflict(0, original, mirror=100) is None

    world.router.set_weight(5, original)
    rule = world.route()["spec"]["rules"][0]
    assert rule["filters"] == theirs
    assert world.shares() == [5]

    world.router.restore(original)
    assert spec_and_annotations(world.route()) == before
