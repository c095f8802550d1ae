"""One measured tick of the operator against the emulated API server reads each object once:
the requests its kube client sent are counted (the baseline Deployment used to be read four
times: preflight's targets, the measurement's targets, the prices, the report)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from acceltrial.api.status import (
    GatewayApiOriginal,
    HttpRouteOriginal,
    ReplicasOriginal,
    TrialStatus,
)
from acceltrial.api.trial import TRIAL_GVR
from acceltrial.engine.lifecycle import decide
from acceltrial.engine.ticks import ClearUserAction, DeployCandidate, SetWeight
from acceltrial.handlers.world import TrialWorld
from acceltrial.kube.gateway import Kube
from tests.handlers.conftest import ROUTE, RecordingClient, create_trial, trial_ref, trial_spec
from tests.sandbox.conftest import Api


def started_trial(api: Api, kube: Kube, namespace: str, router: str) -> TrialStatus:
    """A trial at step 1 (5%), as the operator leaves it: candidate deployed, weight set."""
    spec = trial_spec(router)
    ref = create_trial(api, namespace, spec)
    original = (
        GatewayApiOriginal(router="gatewayapi", baseline_replicas=2, http_route=HttpRouteOriginal(
            name="llama3", namespace=namespace, rule_index=0, backend_refs=[ROUTE]))
        if router == "gatewayapi"
        else ReplicasOriginal(router="replicas", baseline_replicas=2)
    )  # fmt: skip
    # The replicas router's share is its ready pods behind the Service: none is Ready here (no
    # kubelet runs them), so it reads 0%, and the status says so.
    share = 5 if router == "gatewayapi" else 0
    status = TrialStatus(
        phase="Progressing", step=1, canary_weight=share, requested_weight=5, original=original,
        step_started_at=datetime.now(UTC) - timedelta(seconds=4),
    )  # fmt: skip
    world = TrialWorld(kube, spec, ref)
    world.execute(DeployCandidate(), status)
    world.execute(SetWeight(5), status)
    return status


def measured_tick(kube: Kube, namespace: str, router: str, status: TrialStatus, uid: str) -> Any:
    """One tick as the lifecycle handler runs it: observe, decide, act, report."""
    world = TrialWorld(kube, trial_spec(router), trial_ref(namespace, uid))
    now = datetime.now(UTC)
    observation = world.observe(status, now, 1, None)
    result = decide(world.spec, status, observation)
    for action in result.actions:
        if not isinstance(action, ClearUserAction):
            world.execute(action, result.status)
    world.write_report(result.status, observation.measurement, now)
    return observation


@pytest.mark.parametrize("router", ["gatewayapi", "replicas"])
def test_a_measured_tick_reads_the_baseline_deployment_once(
    api: Api, kube: Kube, recorder: RecordingClient, namespace: str, router: str
) -> None:
    status = started_trial(api, kube, namespace, router)
    uid = api.get(f"{TRIAL_GVR.collection_path(namespace)}/llama3-inf2").body["metadata"]["uid"]
    # The replicas router reads the share of Ready pods, which the emulator's kubelet changes
    # while a busy machine runs this test; a tick measures only at the share its status holds
    # (else its window would straddle the change), so the tick is taken again at the share read.
    for _ in range(20):
        recorder.sent.clear()
        observation = measured_tick(kube, namespace, router, status, uid)
        if observation.measurement is not None or observation.observed_share is None:
            break
        status = status.model_copy(update={"canary_weight": observation.observed_share})

    assert observation.measurement is not None, ("the tick measured", observation, status)
    deployments = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    assert recorder.count("GET", f"{deployments}/llama3-gpu") == 1, recorder.sent
    assert recorder.count("GET", f"{deployments}/llama3-inf2-candidate") == 1, recorder.sent
    assert recorder.count("GET", "/api/v1/nodes") == 0, "no list of every Node per measurement"
    assert recorder.count("GET", f"/api/v1/namespaces/{namespace}/pods") == 2, "one per variant"
    if router == "gatewayapi":
        route = f"/apis/gateway.networking.k8s.io/v1/namespaces/{namespace}/httproutes/llama3"
        assert recorder.count("GET", route) == 1, "the weight is read back once"
