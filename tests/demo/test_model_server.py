"""The fleet's model servers over HTTP, asked by the operator's own client as the quality check
will ask them: each Service answers with its variant's model, a Service without Ready pods
refuses, and the answers are counted apart from users' requests."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from acceltrial.engine.candidate import VARIANT_LABEL
from acceltrial.engine.quality.compare import score_prompt
from acceltrial.engine.quality.prompts import parse_prompts
from acceltrial.providers.quality.openai import AnswerError, OpenAiClient
from acceltrial_testbed.sandbox.cluster import Sandbox
from acceltrial_testbed.sandbox.fleet.language_model import Outputs
from acceltrial_testbed.sandbox.fleet.model_server import ModelServers, model_endpoint
from tests.integration.test_fleet_metrics import deployment
from tests.sandbox.conftest import Api


def service(name: str, selector: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": "fleet"},
            "spec": {"selector": selector, "ports": [{"port": 8000}]}}  # fmt: skip


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, ModelServers]]:
    with Sandbox(ready_delay=0.05) as sandbox:
        api = Api(sandbox.url)
        api.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                        "metadata": {"name": "fleet"}})  # fmt: skip
        gpu, neuron = {"app": "llama3"}, {"app": "llama3-c", VARIANT_LABEL: "candidate"}
        deployments = "/apis/apps/v1/namespaces/fleet/deployments"
        api.post(deployments, deployment("gpu", gpu, {"nvidia.com/gpu": "1"}))
        api.post(deployments, deployment("inf2", neuron, {"aws.amazon.com/neuroncore": "2"}))
        services = "/api/v1/namespaces/fleet/services"
        for name, selector in (("llama3", gpu), ("llama3-c", neuron), ("empty", {"app": "x"})):
            api.post(services, service(name, selector))
        outputs = {"candidate": Outputs(token_error_rate=0.2, prompt_logprobs=True)}
        servers = ModelServers(sandbox.url, outputs)
        with model_endpoint(servers) as url:
            deadline = time.monotonic() + 20
            while servers.variant_behind("fleet", "llama3-c") is None:
                assert time.monotonic() < deadline, "the candidate's pod never became Ready"
                time.sleep(0.1)  # bounded poll of the emulated kubelet
            yield url, servers


def test_each_service_answers_with_its_variants_model(
    served: tuple[str, ModelServers],
) -> None:
    url, servers = served
    baseline, candidate = OpenAiClient(f"{url}/fleet/llama3"), OpenAiClient(f"{url}/fleet/llama3-c")
    prompts = parse_prompts("\n".join(f'{{"prompt": "kaba lobe dimo {n}"}}' for n in range(10)))
    before = dict(servers.answered)

    scores = []
    for prompt in prompts:
        reference = baseline.answer(prompt, 16)
        scored = candidate.score(prompt.text or "", reference.text, len(reference.tokens))
        scores.append(score_prompt(reference.tokens, scored))

    agreed = sum(s.agreed for s in scores) / sum(s.positions for s in scores)
    assert 0.7 < agreed < 0.9, "20% of the candidate's positions are made wrong"
    assert servers.answered["baseline"] - before.get("baseline", 0) == 10
    assert servers.answered["candidate"] - before.get("candidate", 0) == 10


def test_a_service_without_ready_pods_refuses_and_nothing_is_counted(
    served: tuple[str, ModelServers],
) -> None:
    url, servers = served
    before = dict(servers.answered)
    (prompt,) = parse_prompts('{"prompt": "kaba"}')

    with pytest.raises(AnswerError, match=r"failed \(503\): service fleet/empty has no ready"):
        OpenAiClient(f"{url}/fleet/empty").answer(prompt, 4)
    assert dict(servers.answered) == before
