"""The Secrets ``analysis.prometheus`` names are read only when they opted in (the label
``acceltrial.dev/trial-readable: "true"``), as notification URLs are: a trial author who may
not read Secrets cannot have the operator send one to a Prometheus of their choosing."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import pytest

from acceltrial.api.spec import PrometheusSpec
from acceltrial.handlers.metrics_source import resolve_secrets, secret_findings
from acceltrial.handlers.secrets import SecretProblem
from acceltrial.kube.calls import KubeError

LABEL = {"acceltrial.dev/trial-readable": "true"}


class Secrets:
    """The kube gateway's Secret read, from a dict; ``failing`` answers as a busy API server."""

    def __init__(self, secrets: Mapping[str, dict[str, Any]], failing: bool = False) -> None:
        self.secrets = secrets
        self.failing = failing
        self.read: list[str] = []

    def secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        if self.failing:
            raise KubeError(503, "503 Service Unavailable")
        self.read.append(f"{namespace}/{name}")
        return self.secrets.get(name)


def secret(labelled: bool = True, **data: str) -> dict[str, Any]:
    encoded = {key: base64.b64encode(value.encode()).decode() for key, value in data.items()}
    return {"metadata": {"labels": LABEL if labelled else {}}, "data": encoded}


def prometheus(**spec: Any) -> PrometheusSpec:
    return PrometheusSpec.model_validate({"address": "https://prom.example:9090", **spec})


BEARER = {"auth": {"bearerTokenSecretRef": {"name": "prom-token", "key": "token"}}}
BASIC = {"auth": {"basicAuthSecretRef": {"name": "prom-basic"}}}
CA = {"tls": {"caSecretRef": {"name": "prom-ca", "key": "ca.crt"}}}


def test_labelled_secrets_give_their_values() -> None:
    kube = Secrets({"prom-token": secret(token="t0k3n"), "prom-ca": secret(**{"ca.crt": "PEM"}),
                    "prom-basic": secret(username="u", password="p")})  # fmt: skip
    both = prometheus(**BEARER, **CA)
    resolved = resolve_secrets(kube, "serving", both)  # type: ignore[arg-type]
    assert (resolved.bearer_token, resolved.ca_pem, resolved.basic) == ("t0k3n", "PEM", None)
    basic = resolve_secrets(kube, "serving", prometheus(**BASIC))  # type: ignore[arg-type]
    assert basic.basic == ("u", "p")
    assert secret_findings(kube, "serving", both) == ([], [])  # type: ignore[arg-type]


@pytest.mark.parametrize("spec", [BEARER, BASIC, CA], ids=["bearer", "basic", "ca"])
def test_a_secret_not_labelled_is_a_preflight_problem_naming_the_label(
    spec: dict[str, Any],
) -> None:
    kube = Secrets({"prom-token": secret(False, token="t0k3n"),
                    "prom-basic": secret(False, username="u", password="p"),
                    "prom-ca": secret(False, **{"ca.crt": "PEM"})})  # fmt: skip
    problems, waits = secret_findings(kube, "serving", prometheus(**spec))  # type: ignore[arg-type]
    assert waits == []
    (problem,) = problems
    assert problem.startswith("analysis.prometheus: Secret serving/prom-")
    assert problem.endswith(
        'is not labelled acceltrial.dev/trial-readable: "true"; label it to let trials name it'
    )


def test_a_missing_secret_or_key_is_a_problem_and_a_busy_api_server_a_wait() -> None:
    missing = secret_findings(Secrets({}), "serving", prometheus(**BEARER))  # type: ignore[arg-type]
    assert missing == (["analysis.prometheus: Secret serving/prom-token not found"], [])
    keyless = Secrets({"prom-token": secret(other="x")})
    assert secret_findings(keyless, "serving", prometheus(**BEARER)) == (  # type: ignore[arg-type]
        ["analysis.prometheus: Secret serving/prom-token has no key token"],
        [],
    )
    busy = Secrets({}, failing=True)
    problems, waits = secret_findings(busy, "serving", prometheus(**BEARER))  # type: ignore[arg-type]
    assert problems == []
    (wait,) = waits
    assert "503" in wait


def test_no_secret_named_none_read() -> None:
    kube = Secrets({})
    assert secret_findings(kube, "serving", prometheus()) == ([], [])  # type: ignore[arg-type]
    assert kube.read == []


def test_the_value_is_never_in_the_refusal() -> None:
    kube = Secrets({"prom-token": secret(False, token="s3cr3t-value")})
    with pytest.raises(SecretProblem) as refused:
        resolve_secrets(kube, "serving", prometheus(**BEARER))  # type: ignore[arg-type]
    assert "s3cr3t-value" not in str(refused.value)
