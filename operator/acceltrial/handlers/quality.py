"""The quality check as one trial's world runs it: the prompt set read from its ConfigMap, both
variants' Services reached through the ``ACCELTRIAL_MODEL_URL`` template (the cluster's DNS by
default), the set run by providers/quality. Decides nothing itself: engine/quality/gate.py
judges what comes back."""

from __future__ import annotations

from acceltrial.api.spec.quality import QualitySpec
from acceltrial.engine.quality.check import QualityCheck
from acceltrial.handlers.config import config_from_env
from acceltrial.handlers.snapshot import TickSnapshot
from acceltrial.kube.gateway import Manifest
from acceltrial.providers.quality.check import QualityRun
from acceltrial.providers.quality.openai import OpenAiClient
from acceltrial.providers.quality.services import prompt_set, service_port, service_url

TIMEOUT_SECONDS = 30.0
"""Per request: a 64-token greedy answer takes well under a second on a warm server."""


def run_quality_check(snapshot: TickSnapshot) -> QualityCheck:
    """Both variants' answers to the prompt set, compared."""
    settings = snapshot.spec.quality
    assert settings is not None  # only run when the spec asks for it
    prompts = prompt_set(snapshot.kube, snapshot.namespace, settings)
    if isinstance(prompts, str):
        return QualityCheck(problem=prompts)
    service = snapshot.baseline_service
    if service is None:
        return QualityCheck(unreachable=f"Service {snapshot.baseline_service_name} not found")
    template = config_from_env().model_url
    run = QualityRun(
        baseline=_client(template, snapshot, snapshot.baseline_service_name, service, settings),
        candidate=_client(template, snapshot, snapshot.candidate_name, service, settings),
        max_tokens=settings.max_tokens,
        concurrency=settings.concurrency,
    )
    return run.run(prompts)


def _client(
    template: str, snapshot: TickSnapshot, name: str, service: Manifest, settings: QualitySpec
) -> OpenAiClient:
    """The client of Service ``name``; the candidate's Service is derived from the baseline's,
    so both listen on the baseline Service's first port."""
    url = service_url(template, name, snapshot.namespace, service_port(service))
    return OpenAiClient(url, settings.model, TIMEOUT_SECONDS)
