"""No secret value leaves the operator: canary credentials are planted (a Prometheus bearer
token, basic auth, AWS keys in the operator's environment), trials run through a pause and an
abort, and every output is searched: the trials' status, Events, the report ConfigMaps and the
operator's log."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from acceltrial_testbed.sandbox.cluster import Sandbox
from tests.integration.e2e_kit import (  # fixtures and helpers, one instance per module
    act,
    api,
    cluster,
    prometheus_url,
    start,
    start_operator,
    wait_for,
)
from tests.sandbox.conftest import Api

pytestmark = pytest.mark.slow
__all__ = ["api", "cluster", "prometheus_url"]  # re-exported fixtures

TOKEN = "canary-bearer-7f3a9c2e51d84b06"
USER, PASSWORD = "canary-user-41d2", "canary-password-9b8e77a0c3"
AWS_KEY_ID, AWS_SECRET = "AKIACANARY7Q2XW4ZK5M", "canary/aws+secret/Zp8uR3vT6yN1bQ4hL0"
CANARIES = (TOKEN, PASSWORD, AWS_KEY_ID, AWS_SECRET)
NAMESPACES = ("leak-bearer", "leak-basic")


def encoded(value: str) -> str:
    return base64.b64encode(value.encode()).decode()


def secret(name: str, **data: str) -> dict[str, object]:
    """A Secret opted in to be named by trials (docs/security.md)."""
    metadata = {"name": name, "labels": {"acceltrial.dev/trial-readable": "true"}}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": metadata,
            "data": {k: encoded(v) for k, v in data.items()}}  # fmt: skip


@pytest.fixture(scope="module")
def operator_log(cluster: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    folder = tmp_path_factory.mktemp("operator")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("AWS_ACCESS_KEY_ID", AWS_KEY_ID)
        env.setenv("AWS_SECRET_ACCESS_KEY", AWS_SECRET)
        env.setenv("ACCELTRIAL_LOG_LEVEL", "debug")
        process = start_operator(cluster.kubeconfig, folder, *NAMESPACES)
    try:
        yield folder / "operator.log"
    finally:
        process.terminate()
        process.wait(timeout=30)


def run_with(api: Api, namespace: str, prometheus: str, auth: dict[str, object]) -> str:
    api.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                    "metadata": {"name": namespace}})  # fmt: skip
    secrets = f"/api/v1/namespaces/{namespace}/secrets"
    assert api.post(secrets, secret("prom-token", token=TOKEN)).status == 201
    assert api.post(secrets, secret("prom-basic", username=USER, password=PASSWORD)).status == 201
    analysis = {"inconclusiveLimit": 1, "prometheus": {"address": prometheus, "auth": auth}}
    path = start(api, namespace, prometheus, analysis=analysis)
    status = wait_for(api, path, ("Paused", "RolledBack", "Failed"))
    if status["phase"] == "Paused":
        act(api, path, "abort")
        wait_for(api, path, ("Aborted",))
    return path


def outputs(api: Api, namespace: str, path: str) -> str:
    """Everything a person or a tool can read about a trial, as text."""
    parts = [api.get(path).body]
    parts.append(api.get(f"/api/v1/namespaces/{namespace}/events").body)
    parts.append(api.get(f"/api/v1/namespaces/{namespace}/configmaps").body)
    return json.dumps(parts)


def test_no_secret_value_appears_in_any_output(
    api: Api, prometheus_url: str, operator_log: Path
) -> None:
    # The two trials wait for their phases at once (about a minute each).
    bearer_auth = {"bearerTokenSecretRef": {"name": "prom-token", "key": "token"}}
    basic_auth = {"basicAuthSecretRef": {"name": "prom-basic"}}
    with ThreadPoolExecutor(2) as pool:
        bearer_run = pool.submit(run_with, api, "leak-bearer", prometheus_url, bearer_auth)
        basic_run = pool.submit(run_with, api, "leak-basic", prometheus_url, basic_auth)
        bearer, basic = bearer_run.result(), basic_run.result()
    texts = {
        "leak-bearer": outputs(api, "leak-bearer", bearer),
        "leak-basic": outputs(api, "leak-basic", basic),
        "operator log": operator_log.read_text(errors="replace"),
    }
    for path in (bearer, basic):
        phase = api.get(path).body["status"]["phase"]
        assert phase in ("Aborted", "RolledBack", "Failed"), "the trial ran to its end"
    assert "report" in texts["leak-basic"], "a report was written"
    forms = [c for value in CANARIES for c in (value, encoded(value))]
    forms.append(encoded(f"{USER}:{PASSWORD}"))  # the Authorization: Basic header
    for where, text in texts.items():
        for canary in forms:
            assert canary not in text, f"a secret value appears in {where}"
