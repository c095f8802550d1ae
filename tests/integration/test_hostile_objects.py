"""The operator (`kopf run -m acceltrial.handlers`) facing hostile objects: trials that reached
the cluster without the CRD's schema (a CRD installed without it stands in for a cluster whose
admission was bypassed), a baseline Deployment without containers, an HTTPRoute with fields it
does not know, and a status edited by a person.

The operator never crashes and never logs a traceback; every refused trial gets a status saying
what is wrong, field by field, and nothing is created in the cluster for it."""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given

from acceltrial.api.validation import validate_trial
from tests.hostile.strategies import FUZZ, TRIED, hostile_manifests
from tests.integration.e2e_kit import (
    BACKENDS,
    CRDS,
    TRIALS,
    backend_of,
    install_baseline,
    start_operator,
    trial,
)
from tests.integration.operator_account import operator_kubeconfig
from tests.sandbox.conftest import Api, eventually

pytestmark = pytest.mark.slow
HOSTILE = "hostile"
# The AcceleratorTrial kind with no schema at all: anything is stored as sent.
OPEN_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "acceleratortrials.acceltrial.dev"},
    "spec": {
        "group": "acceltrial.dev",
        "scope": "Namespaced",
        "names": {"kind": "AcceleratorTrial", "plural": "acceleratortrials",
                  "singular": "acceleratortrial", "listKind": "AcceleratorTrialList"},
        "versions": [{
            "name": "v1alpha1", "served": True, "storage": True,
            "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {
                "type": "object", "x-kubernetes-preserve-unknown-fields": True}},
        }],
    },
}  # fmt: skip


@pytest.fixture(scope="module", params=BACKENDS)
def api(request: pytest.FixtureRequest) -> Iterator[Api]:
    """The real control plane when it is built (always in CI), else the emulator."""
    with backend_of(request.param, nodes_per_group=2) as cluster:
        api = Api.to(cluster.access)
        assert api.post(CRDS, OPEN_CRD).status == 201
        eventually(lambda: api.get(TRIALS.format("default")).status == 200)
        api.cluster = cluster  # type: ignore[attr-defined]
        yield api


@pytest.fixture(scope="module")
def log(api: Api, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    folder = tmp_path_factory.mktemp("operator")
    namespaces = (HOSTILE, "no-containers", "odd-route", "edited")
    cluster = api.cluster  # type: ignore[attr-defined]
    identity = operator_kubeconfig(cluster, tmp_path_factory.mktemp("identity"))
    process = start_operator(identity, folder, *namespaces)
    try:
        yield folder / "operator.log"
        assert process.poll() is None, "the operator is still running"
    finally:
        process.terminate()
        process.wait(timeout=30)


def namespace(api: Api, name: str) -> None:
    api.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                    "metadata": {"name": name}})  # fmt: skip


def hostile_trials() -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []

    @FUZZ
    @given(hostile_manifests())
    def collect(manifest: Any) -> None:
        if isinstance(manifest, dict) and validate_trial(manifest):
            found.append(manifest)

    collect()
    return found


def status_of(api: Api, ns: str, name: str) -> dict[str, Any]:
    status: dict[str, Any] = api.get(f"{TRIALS.format(ns)}/{name}").body.get("status") or {}
    return status


def test_refused_trials_are_reported_and_change_nothing(api: Api, log: Path) -> None:
    namespace(api, HOSTILE)
    sent: dict[str, list[str]] = {}
    for index, manifest in enumerate(hostile_trials()):
        body = copy.deepcopy(manifest)
        body["apiVersion"], body["kind"] = "acceltrial.dev/v1alpha1", "AcceleratorTrial"
        name = f"hostile-{index}"
        body["metadata"] = {"name": name}
        if not validate_trial(body):
            continue  # its only mistakes were in apiVersion, kind or metadata, now set right
        reply = api.post(TRIALS.format(HOSTILE), body)
        if reply.status == 201:
            sent[name] = [p.path for p in validate_trial(reply.body) if p.path]
    TRIED["handlers"] += len(sent)
    assert len(sent) >= 10

    def reported() -> bool:
        return all(status_of(api, HOSTILE, n).get("conditions") for n in sent)

    eventually(reported, timeout=120)
    time.sleep(3)  # a few more ticks of the lifecycle timer over every refused trial
    for name, paths in sent.items():
        status = status_of(api, HOSTILE, name)
        ready = next(c for c in status["conditions"] if c["type"] == "Ready")
        assert (ready["status"], ready["reason"]) == ("False", "InvalidSpec"), status
        for path in paths:
            assert path in ready["message"], (path, ready["message"])
    for kind in ("apis/apps/v1/namespaces/{}/deployments", "api/v1/namespaces/{}/services",
                 "api/v1/namespaces/{}/configmaps"):  # fmt: skip
        items = api.get("/" + kind.format(HOSTILE)).body["items"]
        assert [i for i in items if i["metadata"]["name"] != "kube-root-ca.crt"] == []
    assert "Traceback" not in log.read_text(errors="replace")


def test_a_baseline_without_containers_fails_with_a_reason(api: Api, log: Path) -> None:
    install_baseline(api, "no-containers", serving=False)
    path = "/apis/apps/v1/namespaces/no-containers/deployments/llama3-gpu"
    reply = api.json_patch(path, [{"op": "replace", "path": "/spec/template/spec/containers",
                                   "value": []}])  # fmt: skip
    assert reply.status in (200, 422), reply  # the real server refuses it: only if it got in
    api.post(TRIALS.format("no-containers"), trial("no-containers", "http://127.0.0.1:9"))
    trial_path = f"{TRIALS.format('no-containers')}/llama3-inf2"
    eventually(lambda: status_of(api, "no-containers", "llama3-inf2").get("message"), 120)
    time.sleep(3)
    status = status_of(api, "no-containers", "llama3-inf2")
    assert status.get("phase") in ("Pending", "Preflight", "Failed", "Progressing"), status
    assert "Traceback" not in log.read_text(errors="replace")
    assert api.get(trial_path).status == 200


def test_an_httproute_with_unknown_fields_is_read_and_kept(api: Api, log: Path) -> None:
    """Fields of the installed Gateway API the operator does not model (a rule's timeouts, a
    backendRef's filters) are read and kept as they are."""
    install_baseline(api, "odd-route", serving=False)
    route = "/apis/gateway.networking.k8s.io/v1/namespaces/odd-route/httproutes/llama3"
    timeouts = {"request": "30s", "backendRequest": "20s"}
    header = {"type": "RequestHeaderModifier",
              "requestHeaderModifier": {"set": [{"name": "x-pool", "value": "gpu"}]}}  # fmt: skip
    odd = [
        {"op": "add", "path": "/spec/rules/0/timeouts", "value": timeouts},
        {"op": "add", "path": "/spec/rules/0/backendRefs/0/filters", "value": [header]},
    ]
    patched = api.json_patch(route, odd)
    assert patched.status == 200, patched.body
    api.post(TRIALS.format("odd-route"), trial("odd-route", "http://127.0.0.1:9"))
    eventually(lambda: status_of(api, "odd-route", "llama3-inf2").get("message"), 120)
    time.sleep(3)
    assert "Traceback" not in log.read_text(errors="replace")
    rules = api.get(route).body["spec"]["rules"]
    assert rules[0]["timeouts"] == timeouts, "fields it does not model are kept"
    assert rules[0]["backendRefs"][0]["filters"] == [header]


def test_a_status_edited_by_a_person_does_not_crash_the_operator(api: Api, log: Path) -> None:
    install_baseline(api, "edited", serving=False)
    api.post(TRIALS.format("edited"), trial("edited", "http://127.0.0.1:9"))
    path = f"{TRIALS.format('edited')}/llama3-inf2"
    eventually(lambda: status_of(api, "edited", "llama3-inf2").get("phase"), 120)
    edits = [{"step": "two", "canaryWeight": -5, "phase": "Progressing"},
             {"phase": "NoSuchPhase", "conditions": "broken"},
             {"analysis": [{"criterion": 5}], "original": [1, 2]}]  # fmt: skip
    for edit in edits:
        assert api.merge(f"{path}/status", {"status": edit}).status == 200
        time.sleep(2)  # a few ticks over the edited status
    assert "Traceback" not in log.read_text(errors="replace")
    text = json.dumps(api.get(path).body)
    assert "llama3-inf2" in text
