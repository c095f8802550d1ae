"""``acceltrial check``'s model-server part, for a trial with ``spec.quality``: one prompt sent to
each variant's Service through the quality check's own client (providers/quality/openai.py), and
per variant whether the endpoint answers, the API answers (completions or chat, as the prompt
is), log-probabilities come back, and prompt log-probabilities (echo) come back, which decides how
the check teacher-forces the baseline's answers through the candidate.

The prompt is the first of the prompt set when the check reads the cluster (its ConfigMap, read
as the operator reads it), else a fixed short one. Services are reached as the operator reaches
them: the ``ACCELTRIAL_MODEL_URL`` template (``--model-url``), the cluster's DNS by default. A
candidate not deployed yet, as before any trial, is said so, not failed: the operator asks it
once it is Available.
"""

from __future__ import annotations

import http.client
import json
import os
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from acceltrial.api.spec import TrialSpec
from acceltrial.engine.candidate import TrialRef, candidate_name
from acceltrial.engine.metrics import Variant
from acceltrial.engine.preflight import available
from acceltrial.engine.quality.prompts import Prompt
from acceltrial.kube.gateway import Kube
from acceltrial.providers.quality.openai import (
    AnswerError,
    LogprobsMissing,
    OpenAiClient,
    RequestRefused,
    ScoringUnsupported,
)
from acceltrial.providers.quality.services import (
    MODEL_URL,
    MODEL_URL_VARIABLE,
    checked_model_url,
    prompt_set,
    service_port,
    service_url,
)

FIXED_PROMPT = Prompt(line=0, text="The capital of France is")
"""Asked where the prompt set cannot be read (offline): short, with one obvious answer."""
MAX_TOKENS = 8
TIMEOUT_SECONDS = 10.0
OFFLINE_PORT = 80
"""``{port}`` offline, where the baseline Service cannot be read."""
NOT_DEPLOYED = "candidate not deployed yet: checked when it is Available"
REPROMPTS = "the check will re-prompt at each divergence"
SHOWN = 60
"""Characters of an answer shown."""
Mark = Literal["ok", "NO", "--"]


@dataclass(frozen=True)
class Said:
    """One line of the check: ``ok``, ``NO`` (the quality check could not run) or ``--`` (not
    checked, or a fallback the check copes with)."""

    mark: Mark
    who: str
    """``baseline``, ``candidate`` or ``prompts``."""
    said: str


@dataclass(frozen=True)
class ModelPlan:
    """What the check asks, of whom, and what it already knows without asking."""

    prompt: Prompt
    source: str
    """Where the prompt comes from, in words."""
    urls: dict[Variant, str]
    """The variants to ask, by their Service's URL."""
    known: list[Said] = field(default_factory=list)
    """What was found before asking: a prompt set that cannot be used, a candidate not deployed."""


def model_url(flag: str | None, environ: Mapping[str, str] | None = None) -> str:
    """The template Services are reached through: ``--model-url``, else ``ACCELTRIAL_MODEL_URL``,
    else the cluster's DNS; ValueError with the fix for one the operator would refuse too."""
    env = os.environ if environ is None else environ
    value = flag or env.get(MODEL_URL_VARIABLE) or MODEL_URL
    try:
        return checked_model_url(value)
    except ValueError as error:
        raise ValueError(f"--model-url {value!r}: {error}") from None


def _service_names(spec: TrialSpec, trial: TrialRef) -> dict[Variant, str]:
    ref = spec.baseline.service_ref
    baseline = ref.name if ref is not None else spec.baseline.deployment_ref.name
    return {"baseline": baseline, "candidate": candidate_name(trial)}


def offline_plan(
    spec: TrialSpec, trial: TrialRef, template: str, candidate_deployed: bool
) -> ModelPlan:
    """Without the cluster: the fixed prompt, ``{port}`` as :data:`OFFLINE_PORT`, the candidate
    asked only when its pods were named."""
    names = _service_names(spec, trial)
    asked: tuple[Variant, ...] = ("baseline", "candidate") if candidate_deployed else ("baseline",)
    urls = {v: service_url(template, names[v], trial.namespace, OFFLINE_PORT) for v in asked}
    known = [] if candidate_deployed else [Said("--", "candidate", NOT_DEPLOYED)]
    source = "a fixed prompt (offline: the prompt set is not read)"
    return ModelPlan(FIXED_PROMPT, source, urls, known)


def cluster_plan(spec: TrialSpec, trial: TrialRef, kube: Kube, template: str) -> ModelPlan:
    """From the cluster: the prompt set's first prompt, the baseline Service's first port (the
    candidate's Service copies its ports), the candidate asked once it is Available."""
    known: list[Said] = []
    first = _first_prompt(spec, trial.namespace, kube)
    if isinstance(first, str):
        known.append(Said("NO", "prompts", first))
        first = FIXED_PROMPT, "a fixed prompt, the prompt set aside"
    prompt, source = first
    names = _service_names(spec, trial)
    service = kube.service(trial.namespace, names["baseline"])
    if service is None:
        missing = f"Service {trial.namespace}/{names['baseline']} not found"
        return ModelPlan(prompt, source, {}, [*known, Said("NO", "baseline", missing)])
    port = service_port(service)
    urls: dict[Variant, str] = {
        "baseline": service_url(template, names["baseline"], trial.namespace, port)
    }
    candidate = kube.deployment(trial.namespace, names["candidate"])
    if candidate is not None and available(candidate):
        urls["candidate"] = service_url(template, names["candidate"], trial.namespace, port)
    else:
        known.append(Said("--", "candidate", NOT_DEPLOYED))
    return ModelPlan(prompt, source, urls, known)


def _first_prompt(spec: TrialSpec, namespace: str, kube: Kube) -> tuple[Prompt, str] | str:
    """The set's first prompt and where it is, or why the set cannot be used, read as the
    operator reads it; every line is parsed, so a bad one far down is found before the trial."""
    settings = spec.quality
    assert settings is not None  # planned only for a trial asking quality
    prompts = prompt_set(kube, namespace, settings)
    if isinstance(prompts, str):
        return prompts
    ref = settings.prompts.config_map_ref
    source = f"the first prompt of ConfigMap {namespace}/{ref.name}, key {ref.key}"
    return prompts[0], f"{source} (line {prompts[0].line})"


def probe(
    variant: Variant, url: str, prompt: Prompt, model: str | None, timeout: float = TIMEOUT_SECONDS
) -> list[Said]:
    """What one variant's Service does with ``prompt``, stage by stage, up to the first that
    fails."""
    endpoint = _endpoint(variant, url, timeout)
    if endpoint.mark != "ok":
        return [endpoint]
    client = OpenAiClient(url, model, timeout)
    api = "chat API" if prompt.chat else "completions API"
    try:
        answer = client.answer(prompt, MAX_TOKENS)
    except RequestRefused as error:
        return [endpoint, Said("NO", variant, f"the {api} refuses the prompt: {error}")]
    except LogprobsMissing as error:
        missing = f"log-probabilities do not come back: {error}"
        return [endpoint, Said("ok", variant, f"the {api} answers"), Said("NO", variant, missing)]
    except AnswerError as error:
        return [endpoint, Said("NO", variant, f"the {api} does not answer: {error}")]
    shown = json.dumps(answer.text[:SHOWN], ensure_ascii=False)
    return [
        endpoint,
        Said("ok", variant, f"the {api} answers: {shown}"),
        Said("ok", variant, f"log-probabilities come back ({len(answer.tokens)} tokens)"),
        _echo(variant, client, prompt, answer.tokens),
    ]


def _endpoint(variant: Variant, url: str, timeout: float) -> Said:
    """Whether anything answers HTTP at ``url``: any status will do, the API is asked next."""
    try:
        with urllib.request.urlopen(url + "/v1/models", timeout=timeout) as reply:
            status = reply.status
    except urllib.error.HTTPError as error:
        status = error.code
    except (OSError, http.client.HTTPException) as error:
        reason = error.reason if isinstance(error, urllib.error.URLError) else error
        return Said("NO", variant, f"the endpoint does not answer at {url}: {reason}")
    return Said("ok", variant, f"the endpoint answers at {url} (GET /v1/models: HTTP {status})")


def _echo(
    variant: Variant, client: OpenAiClient, prompt: Prompt, tokens: tuple[tuple[str, float], ...]
) -> Said:
    """Whether the server scores a given continuation (``echo``): the candidate's answer says
    how the check teacher-forces; the baseline's matters to nothing, so it is never a failure."""
    echo = "prompt log-probabilities (echo)"
    if prompt.chat:
        return Said("--", variant, f"{echo} not asked of a chat prompt: {REPROMPTS}")
    if not tokens:
        return Said("--", variant, f"{echo} not asked: the answer is empty")
    candidate = variant == "candidate"
    try:
        client.score(prompt.text or "", "".join(t for t, _ in tokens), len(tokens))
    except ScoringUnsupported:
        then = REPROMPTS if candidate else "the check needs them of the candidate only"
        return Said("--", variant, f"{echo} do not come back: {then}")
    except AnswerError as error:
        return Said("NO" if candidate else "--", variant, f"{echo}: {error}")
    then = ": the check teacher-forces by them" if candidate else ""
    return Said("ok", variant, f"{echo} come back{then}")


def check_models(plan: ModelPlan, model: str | None) -> list[Said]:
    """Every line: what was known before asking, then each variant asked."""
    said = list(plan.known)
    for variant, url in plan.urls.items():
        said += probe(variant, url, plan.prompt, model)
    order = {"prompts": 0, "baseline": 1, "candidate": 2}
    return sorted(said, key=lambda s: order.get(s.who, 3))
