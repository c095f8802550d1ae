"""Where the quality check finds its inputs in the cluster: the prompt set in its ConfigMap, and
each variant's Service through the ``ACCELTRIAL_MODEL_URL`` template. Shared by the operator's
handlers and ``acceltrial check``, so both read and refuse alike."""

from __future__ import annotations

from acceltrial.api.spec.quality import QualitySpec
from acceltrial.engine.quality.prompts import Prompt, PromptsError, parse_prompts
from acceltrial.kube.gateway import Kube, Manifest

MODEL_URL = "http://{service}.{namespace}.svc:{port}"
"""The default: the cluster's DNS, for the operator as the chart runs it."""
MODEL_URL_VARIABLE = "ACCELTRIAL_MODEL_URL"


def checked_model_url(value: str) -> str:
    """``value`` when it is a usable template; ValueError saying the fix otherwise."""
    if "{service}" not in value or not value.startswith(("http://", "https://")):
        raise ValueError(
            "give an http(s) URL template holding {service} (and {namespace}, {port} as "
            f"needed), e.g. {MODEL_URL}"
        )
    try:
        value.format(service="s", namespace="n", port=80)
    except (KeyError, IndexError, ValueError) as error:
        raise ValueError(
            f"only {{service}}, {{namespace}} and {{port}} may be used: {error}"
        ) from None
    return value


def service_url(template: str, service: str, namespace: str, port: int) -> str:
    return template.format(service=service, namespace=namespace, port=port)


def service_port(service: Manifest) -> int:
    """The Service's first port (the candidate's Service copies the baseline's ports)."""
    ports = (service.get("spec") or {}).get("ports") or [{}]
    return int(ports[0].get("port", 80))


def prompt_set(kube: Kube, namespace: str, settings: QualitySpec) -> list[Prompt] | str:
    """The prompts of ``quality.prompts.configMapRef``, every line parsed, or why they cannot be
    used."""
    ref = settings.prompts.config_map_ref
    where = f"quality.prompts.configMapRef: ConfigMap {namespace}/{ref.name}"
    config_map = kube.config_map(namespace, ref.name)
    if config_map is None:
        return f"{where} not found; create it with the prompt set under key {ref.key}"
    text = (config_map.get("data") or {}).get(ref.key)
    if text is None:
        keys = ", ".join(sorted(config_map.get("data") or {})) or "none"
        return f"{where} has no key {ref.key} (its keys: {keys})"
    try:
        return parse_prompts(text)
    except PromptsError as error:
        return f"{where}, key {ref.key}: {error}"
