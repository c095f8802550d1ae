"""The operator's own settings, read once from the environment (the Helm chart sets them)."""

from __future__ import annotations

import os
from typing import Literal

from pydantic import BaseModel, Field, ValidationError, field_validator

from acceltrial.providers.quality.services import MODEL_URL, MODEL_URL_VARIABLE, checked_model_url

LogLevel = Literal["debug", "info", "warning", "error"]


class OperatorConfig(BaseModel):
    """Settings of the running operator."""

    log_level: LogLevel = "info"
    metrics_port: int = Field(default=8080, ge=0, le=65535)
    tick_seconds: float = Field(default=10.0, gt=0, le=3600)
    api_timeout_seconds: float = Field(default=30.0, gt=0, le=600)
    peering_lifetime_seconds: int = Field(default=15, ge=2, le=600)
    workers: int = Field(default=16, ge=1, le=256)
    """Trials ticked at once: a tick mostly waits on the API server and Prometheus, so the
    threads overlap their waits (kopf's default is the CPU count + 4)."""
    model_url: str = MODEL_URL
    """Where the quality check reaches a variant's Service (docs/quality.md): a template of
    ``{service}``, ``{namespace}`` and ``{port}``; the cluster's DNS by default, another
    address when the operator runs outside the cluster (a port-forward, a proxy)."""

    @field_validator("model_url")
    @classmethod
    def _names_the_service(cls, value: str) -> str:
        return checked_model_url(value)


class ConfigError(Exception):
    """An environment variable holds a value the operator cannot use."""


def config_from_env(environ: dict[str, str] | None = None) -> OperatorConfig:
    """Read ``ACCELTRIAL_*`` variables; raise ConfigError naming the variable on a bad value."""
    env = os.environ if environ is None else environ
    raw = {
        "log_level": env.get("ACCELTRIAL_LOG_LEVEL", "info").lower(),
        "metrics_port": env.get("ACCELTRIAL_METRICS_PORT", "8080"),
        "tick_seconds": env.get("ACCELTRIAL_TICK_SECONDS", "10"),
        "api_timeout_seconds": env.get("ACCELTRIAL_API_TIMEOUT_SECONDS", "30"),
        "peering_lifetime_seconds": env.get("ACCELTRIAL_PEERING_LIFETIME_SECONDS", "15"),
        "workers": env.get("ACCELTRIAL_WORKERS", "16"),
        "model_url": env.get(MODEL_URL_VARIABLE, MODEL_URL),
    }
    try:
        return OperatorConfig.model_validate(raw)
    except ValidationError as error:
        first = error.errors(include_url=False)[0]
        variable = "ACCELTRIAL_" + str(first["loc"][0]).upper()
        raise ConfigError(f"{variable}: {first['msg']} (got {first.get('input')!r})") from None
