"""The manifests a GitOps user commits after a promotion: what the operator read back from the API
server, without what the server added, so that a commit shows only what someone wrote."""

from __future__ import annotations

import copy
from typing import Any

import yaml

from acceltrial.engine.candidate import TrialRef, derive_deployment
from acceltrial.engine.gitops import committable
from acceltrial_testbed.sandbox.cluster import Sandbox
from tests.sandbox.conftest import Api
from tests.unit.test_lifecycle import make_spec

NAMESPACE = "ml"
BASELINE: dict[str, Any] = yaml.safe_load("""
apiVersion: apps/v1
kind: Deployment
metadata: {name: llama3-gpu, namespace: ml, labels: {app: llama3}}
spec:
  replicas: 2
  selector: {matchLabels: {app: llama3}}
  template:
    metadata: {labels: {app: llama3}}
    spec:
      nodeSelector: {node.kubernetes.io/instance-type: g5.xlarge}
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.6.3
          ports: [{name: http, containerPort: 8000}]
          resources: {limits: {nvidia.com/gpu: "1"}}
""")


def applied_and_read_back(manifest: dict[str, Any]) -> dict[str, Any]:
    with Sandbox(controllers=False) as cluster:
        api = Api(cluster.url)
        api.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                        "metadata": {"name": NAMESPACE}})  # fmt: skip
        path = {
            "Deployment": f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments",
            "Service": f"/api/v1/namespaces/{NAMESPACE}/services",
        }[manifest["kind"]]
        assert api.post(path, manifest).status == 201
        live = api.get(f"{path}/{manifest['metadata']['name']}").body
    assert isinstance(live, dict)
    return live


def test_the_candidate_to_commit_is_what_was_applied_without_server_defaults() -> None:
    spec = make_spec()
    trial = TrialRef("llama3", NAMESPACE, "uid-1")
    candidate = derive_deployment(copy.deepcopy(BASELINE), None, spec, trial)
    live = applied_and_read_back(candidate)
    assert live["spec"]["strategy"]["type"] == "RollingUpdate", "the server filled in defaults"
    assert "terminationMessagePath" in live["spec"]["template"]["spec"]["containers"][0]

    committed = committable(live)

    assert committed["spec"] == candidate["spec"]
    assert set(committed) == {"apiVersion", "kind", "metadata", "spec"}
    assert set(committed["metadata"]) <= {"name", "namespace", "labels", "annotations"}
    assert yaml.safe_load(yaml.safe_dump(committed)) == committed


def test_a_value_someone_chose_is_kept_even_where_a_default_exists() -> None:
    chosen = copy.deepcopy(BASELINE)
    chosen["spec"]["revisionHistoryLimit"] = 3
    chosen["spec"]["strategy"] = {"type": "Recreate"}
    container = chosen["spec"]["template"]["spec"]["containers"][0]
    container["imagePullPolicy"] = "Always"
    container["resources"]["requests"] = {"nvidia.com/gpu": "1", "cpu": "4"}

    committed = committable(applied_and_read_back(chosen))

    assert committed["spec"] == chosen["spec"]


def test_a_service_to_commit_has_no_cluster_ip_and_no_defaults() -> None:
    service = yaml.safe_load("""
apiVersion: v1
kind: Service
metadata: {name: llama3-candidate, namespace: ml}
spec:
  selector: {app: llama3}
  ports: [{name: http, port: 8000}]
""")
    live = applied_and_read_back(service)
    assert live["spec"]["clusterIP"], "the server allocated a cluster IP"

    assert committable(live)["spec"] == service["spec"]


def test_an_httproute_loses_the_gateway_api_defaults_only() -> None:
    live = yaml.safe_load("""
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: llama3
  namespace: ml
  uid: 0b5c
  resourceVersion: "812"
  generation: 4
  creationTimestamp: "2026-12-03T09:00:00Z"
  managedFields: [{manager: kubectl}]
  annotations: {kubectl.kubernetes.io/last-applied-configuration: "{}", team: ml}
spec:
  parentRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: inference}]
  rules:
    - matches: [{path: {type: PathPrefix, value: /}}]
      backendRefs:
        - {group: "", kind: Service, name: llama3-gpu, port: 8000, weight: 0}
        - {group: "", kind: Service, name: llama3-candidate, port: 8000, weight: 100}
    - matches: [{path: {type: PathPrefix, value: /v2}}]
      backendRefs: [{group: "", kind: Service, name: other, port: 80, weight: 1}]
status: {parents: []}
""")
    assert committable(live) == yaml.safe_load("""
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: llama3, namespace: ml, annotations: {team: ml}}
spec:
  parentRefs: [{name: inference}]
  rules:
    - backendRefs:
        - {name: llama3-gpu, port: 8000, weight: 0}
        - {name: llama3-candidate, port: 8000, weight: 100}
    - matches: [{path: {type: PathPrefix, value: /v2}}]
      backendRefs: [{name: other, port: 80}]
""")
