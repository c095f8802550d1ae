"""The demo's part in the quality check and the capacity sweep: the fleet's model servers
answering both Services' OpenAI-compatible API (the tiny model, each variant with its scenario's
``outputs``; the sweep's load as the fleet's pods serve it), the
operator pointed at them through its documented ``ACCELTRIAL_MODEL_URL`` setting, and the
scenario's ``prompts`` stored as the ConfigMap the trial names."""

from __future__ import annotations

import contextlib
from typing import Any

from acceltrial_testbed.demo.cluster import Client
from acceltrial_testbed.demo.scenario import Scenario, prompts_jsonl
from acceltrial_testbed.sandbox.access import Access
from acceltrial_testbed.sandbox.fleet.exporter import Fleet
from acceltrial_testbed.sandbox.fleet.language_model import Outputs
from acceltrial_testbed.sandbox.fleet.model_server import ModelServers, model_endpoint

Manifest = dict[str, Any]


def serve_models(
    scenario: Scenario, access: Access, stack: contextlib.ExitStack, fleet: Fleet
) -> tuple[ModelServers, dict[str, str]]:
    """Start the model servers; the operator's environment that reaches them. The trial's
    own load (a capacity sweep) is answered as ``fleet``'s pods serve it."""
    outputs = {
        name: Outputs(
            token_error_rate=profile.outputs.token_error_rate,
            logprob_noise=profile.outputs.logprob_noise,
            prompt_logprobs=profile.outputs.prompt_logprobs,
        )
        for name, profile in (
            ("baseline", scenario.variants.baseline),
            ("candidate", scenario.variants.candidate),
        )
    }
    namespace = fleet.spec.entry.namespace
    servers = ModelServers(
        access,
        outputs,  # type: ignore[arg-type]
        trial_serving=lambda asked: fleet if asked == namespace else None,
    )
    url = stack.enter_context(model_endpoint(servers))
    return servers, {"ACCELTRIAL_MODEL_URL": url + "/{namespace}/{service}"}


def install_prompts(scenario: Scenario, trial: Manifest, client: Client) -> str | None:
    """Create the prompt set's ConfigMap; what was done, in words, or None without prompts."""
    quality = trial["spec"].get("quality")
    if scenario.prompts is None or quality is None:
        return None
    ref = quality["prompts"]["configMapRef"]
    namespace = trial["metadata"].get("namespace", "default")
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": ref["name"], "namespace": namespace},
        "data": {ref["key"]: prompts_jsonl(scenario.prompts)},
    }
    client.create(f"/api/v1/namespaces/{namespace}/configmaps", body)
    return (
        f"stored the quality check's {len(scenario.prompts)} prompts as ConfigMap "
        f"{ref['name']} (key {ref['key']})"
    )
