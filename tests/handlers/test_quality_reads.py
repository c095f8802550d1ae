"""The quality check as a trial's tick runs it, against the emulated API server and the fleet's
model servers over HTTP: the prompt set read from its ConfigMap (or why it cannot be), both
Services reached through ACCELTRIAL_MODEL_URL, a candidate not reachable yet told apart from a
check that cannot run."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from acceltrial.api.spec import TrialSpec
from acceltrial.api.spec.quality import QualitySpec
from acceltrial.api.status import TrialStatus
from acceltrial.engine.candidate import TrialRef
from acceltrial.engine.ticks import DeployCandidate
from acceltrial.handlers.quality import run_quality_check
from acceltrial.handlers.snapshot import TickSnapshot
from acceltrial.handlers.world import TrialWorld
from acceltrial.kube.gateway import Kube
from acceltrial.providers.quality.services import prompt_set
from acceltrial_testbed.sandbox.fleet.model_server import ModelServers, model_endpoint
from acceltrial_testbed.sandbox.topology import load_topology
from tests.handlers.conftest import PLANE, create_trial, trial_spec
from tests.integration.e2e_kit import control_plane
from tests.sandbox.conftest import Api, Backend

PROMPTS = '{"prompt": "The capital of France is"}\n{"prompt": "Steps to make tea:"}\n' + (
    '{"messages": [{"role": "user", "content": "Name a red fruit."}]}\n'
)


def quality_spec(name: str = "prompts", key: str = "set.jsonl") -> TrialSpec:
    body = trial_spec().model_dump(mode="json", by_alias=True, exclude_none=True)
    body["quality"] = {
        "prompts": {"configMapRef": {"name": name, "key": key}},
        "criteria": [{"name": "agreement", "metric": "token_agreement", "absolute": {"min": 0.9}}],
        "maxTokens": 16,
    }
    return TrialSpec.model_validate(body)


def store(api: Api, namespace: str, data: dict[str, str]) -> None:
    body = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "prompts", "namespace": namespace}, "data": data}  # fmt: skip
    assert api.post(f"/api/v1/namespaces/{namespace}/configmaps", body).status == 201


def snapshot_of(api: Api, kube: Kube, namespace: str) -> tuple[TickSnapshot, TrialRef]:
    spec = quality_spec()
    trial = create_trial(api, namespace, spec)
    return TickSnapshot(kube, spec, trial), trial


@pytest.fixture(scope="module")
def cluster() -> Iterator[Backend]:
    """A cluster of its own whose GPU and Neuron pools hold every test's pods: each test's
    baseline and candidate must be Ready to answer."""
    topology = load_topology()
    pools = [pool.model_copy(update={"count": pool.count * 8}) for pool in topology.node_groups]
    larger = topology.model_copy(update={"node_groups": pools})
    with control_plane(PLANE, larger, ready_delay=0.05) as sandbox:
        yield sandbox


@pytest.fixture
def models(cluster: Backend, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModelServers]:
    servers = ModelServers(cluster.access, {})
    with model_endpoint(servers) as url:
        monkeypatch.setenv("ACCELTRIAL_MODEL_URL", url + "/{namespace}/{service}")
        yield servers


def test_a_missing_config_map_is_named_with_the_key_to_create(
    api: Api, kube: Kube, namespace: str
) -> None:
    snapshot, _ = snapshot_of(api, kube, namespace)
    assert prompt_set(snapshot.kube, snapshot.namespace, quality_of(snapshot)) == (
        f"quality.prompts.configMapRef: ConfigMap {namespace}/prompts not found; create it "
        "with the prompt set under key set.jsonl"
    )


def test_a_missing_key_names_the_keys_there(api: Api, kube: Kube, namespace: str) -> None:
    store(api, namespace, {"other.jsonl": PROMPTS})
    snapshot, _ = snapshot_of(api, kube, namespace)
    said = prompt_set(snapshot.kube, snapshot.namespace, quality_of(snapshot))
    assert isinstance(said, str)
    assert said.endswith("has no key set.jsonl (its keys: other.jsonl)")


def test_an_unreadable_line_is_named_by_its_number(api: Api, kube: Kube, namespace: str) -> None:
    store(api, namespace, {"set.jsonl": PROMPTS + '{"promt": "typo"}\n'})
    snapshot, _ = snapshot_of(api, kube, namespace)
    said = prompt_set(snapshot.kube, snapshot.namespace, quality_of(snapshot))
    assert isinstance(said, str)
    assert "key set.jsonl: line 4: unknown key 'promt'" in said


def test_a_candidate_not_deployed_yet_is_unreachable_not_a_failure(
    api: Api, kube: Kube, namespace: str, models: ModelServers
) -> None:
    store(api, namespace, {"set.jsonl": PROMPTS})
    wait_for_ready_pods(kube, namespace, {"app": "llama3"}, 2)
    snapshot, _ = snapshot_of(api, kube, namespace)
    check = run_quality_check(snapshot)
    assert check.problem is None
    assert check.unreachable is not None
    assert "the candidate did not answer" in check.unreachable
    assert "503" in check.unreachable
    assert models.answered["baseline"] == 1, "one prompt asked, not the whole set"


def test_both_services_answer_through_the_model_url(
    api: Api, kube: Kube, namespace: str, models: ModelServers
) -> None:
    store(api, namespace, {"set.jsonl": PROMPTS})
    snapshot, trial = snapshot_of(api, kube, namespace)
    TrialWorld(kube, snapshot.spec, trial).execute(DeployCandidate(), TrialStatus())
    wait_for_ready_pods(kube, namespace, {"acceltrial.dev/variant": "candidate"}, 1)
    wait_for_ready_pods(kube, namespace, {"app": "llama3"}, 2)
    check = run_quality_check(TickSnapshot(kube, snapshot.spec, trial))
    assert (check.problem, check.unreachable, check.unanswered) == (None, None, 0)
    assert len(check.scores) == 3
    assert sum(s.positions for s in check.scores) == 48, "16 tokens each"
    assert check.scoring == "promptLogprobs"
    assert check.reprompted == 1, "the chat prompt"
    assert models.answered["baseline"] == 3
    assert models.answered["candidate"] >= 3 + 2, "answers, then the completions scored"


def wait_for_ready_pods(kube: Kube, namespace: str, labels: dict[str, str], count: int) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        pods = kube.pods(namespace, labels)
        ready = [
            p for p in pods
            if any(c.get("type") == "Ready" and c.get("status") == "True"
                   for c in (p.get("status") or {}).get("conditions") or [])
        ]  # fmt: skip
        if len(ready) >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"no {count} Ready pods {labels} in {namespace}")


def quality_of(snapshot: TickSnapshot) -> QualitySpec:
    assert snapshot.spec.quality is not None
    return snapshot.spec.quality
