"""A scripted session with the real kubectl v1.33 against the sandbox."""

from __future__ import annotations

import json
import subprocess
import textwrap

import pytest
import yaml

from acceltrial_testbed.sandbox.cluster import Sandbox
from tests.conftest import REPO
from tests.sandbox.conftest import Api, Kubectl, configmap, eventually

CONFIGMAPS = """
apiVersion: v1
kind: ConfigMap
metadata: {name: web, labels: {app: web, tier: front}}
data: {k: v}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: db, labels: {app: db}}
data: {k: v}
"""
NAMESPACE = "apiVersion: v1\nkind: Namespace\nmetadata: {name: serving}\n"


def test_discovery_and_version(kubectl: Kubectl) -> None:
    """kubectl reads /version and the discovery documents (/api, /apis, group versions)."""
    assert "Server Version: v1.3" in kubectl.ok("version")  # emulator v1.33, real v1.36
    resources = kubectl.ok("api-resources")
    for expected in ("deployments", "httproutes", "customresourcedefinitions", "pods"):
        assert expected in resources


def test_apply_get_patch_wait_delete(kubectl: Kubectl) -> None:
    """The everyday commands: apply (client-side, validated on the server with
    fieldValidation=Strict), get -l and -o json|yaml, patch --type=merge|json, wait
    --for=jsonpath, delete."""
    assert "configmap/web created" in kubectl.ok("apply", "-f", "-", stdin=CONFIGMAPS)
    assert "configmap/web unchanged" in kubectl.ok("apply", "-f", "-", stdin=CONFIGMAPS)

    listed = json.loads(kubectl.ok("get", "configmaps", "-l", "app in (web),tier", "-o", "json"))
    assert [item["metadata"]["name"] for item in listed["items"]] == ["web"]
    assert yaml.safe_load(kubectl.ok("get", "configmap", "db", "-o", "yaml"))["data"] == {"k": "v"}
    table = kubectl.ok("get", "configmaps")
    header = table.splitlines()[0].split()
    assert (header[0], header[-1]) == ("NAME", "AGE")  # the real server adds DATA between

    kubectl.ok("patch", "configmap", "web", "--type=merge", "-p", '{"data":{"x":"1"}}')
    kubectl.ok("patch", "configmap", "web", "--type=json", "-p",
               '[{"op":"replace","path":"/data/x","value":"2"}]')  # fmt: skip
    failed = kubectl("patch", "configmap", "web", "--type=json", "-p",
                     '[{"op":"test","path":"/data/x","value":"1"}]')  # fmt: skip
    assert failed.returncode != 0
    # a 422: kubectl v1.33 words it by the Status reason (the emulator's, the real server's)
    assert "UnprocessableEntity" in failed.stderr or "The request is invalid" in failed.stderr
    kubectl.ok("wait", "--for=jsonpath={.data.x}=2", "configmap/web", "--timeout=10s")

    assert 'configmap "db" deleted' in kubectl.ok("delete", "configmap", "db")
    assert kubectl("get", "configmap", "db").returncode != 0


def test_server_side_apply(kubectl: Kubectl) -> None:
    """kubectl apply --server-side creates the object, then updates it."""
    assert "serverside-applied" in kubectl.ok("apply", "--server-side", "-f", "-", stdin=CONFIGMAPS)
    changed = CONFIGMAPS.replace("data: {k: v}\n---", "data: {k: w}\n---")
    kubectl.ok("apply", "--server-side", "-f", "-", stdin=changed)

    assert kubectl.ok("get", "configmap", "web", "-o", "jsonpath={.data.k}") == "w"


SERVICE = """
apiVersion: v1
kind: Service
metadata: {name: llama3, namespace: default}
spec:
  selector: {app: llama3}
  ports: [{name: http, port: 8000, targetPort: 8000}]
"""


def test_server_side_apply_of_a_service_merges_ports_by_port(kubectl: Kubectl) -> None:
    """A Service's ports are keyed by port (a container's by containerPort), as GitOps tools
    re-apply them after promotion."""
    kubectl.ok("apply", "--server-side", "-f", "-", stdin=SERVICE)
    again = SERVICE.replace("targetPort: 8000", "targetPort: 8080")
    assert "serverside-applied" in kubectl.ok("apply", "--server-side", "-f", "-", stdin=again)
    ports = kubectl.ok("get", "service", "llama3", "-o", "jsonpath={.spec.ports[*].targetPort}")
    assert ports == "8080"


def test_crd_and_trials(kubectl: Kubectl) -> None:
    """Applying the CRD registers AcceleratorTrial (short name ``at``); a valid example is
    created, an invalid one refused with the field path, as a real API server does."""
    kubectl.ok("apply", "-f", str(REPO / "crds"))
    kubectl.ok("apply", "-f", "-", stdin=NAMESPACE)
    kubectl.ok("apply", "-f", str(REPO / "examples" / "llama3-8b-inf2-httproute.yaml"))

    listed = kubectl.ok("get", "at", "-n", "serving")
    assert "llama3-8b-inf2" in listed
    assert "PHASE" in listed.splitlines()[0]

    bad = kubectl("apply", "-f", str(REPO / "tests/manifests/invalid/03-weight-150.yaml"))
    assert bad.returncode != 0
    assert "spec.steps[2].weight" in bad.stderr
    assert "should be less than or equal to 100" in bad.stderr

    typo = kubectl("apply", "-f", str(REPO / "tests/manifests/invalid/12-unknown-field.yaml"))
    assert typo.returncode != 0
    assert 'unknown field "spec.analysis.critera"' in typo.stderr


def test_conflicting_write_answers_409(kubectl: Kubectl) -> None:
    """kubectl replace with a stale resourceVersion is refused with a Conflict."""
    kubectl.ok("apply", "-f", "-", stdin=CONFIGMAPS)
    stale = yaml.safe_load(kubectl.ok("get", "configmap", "web", "-o", "yaml"))
    kubectl.ok("patch", "configmap", "web", "--type=merge", "-p", '{"data":{"k":"new"}}')

    result = kubectl("replace", "-f", "-", stdin=yaml.safe_dump(stale))

    assert result.returncode != 0
    assert "the object has been modified" in result.stderr


@pytest.mark.emulator_only  # reads the emulator's store
def test_get_watch_streams_changes(cluster: Sandbox, kubectl: Kubectl, api: Api) -> None:
    """kubectl get -w lists, then prints each change from its watch (as Table rows)."""
    kubectl.ok("apply", "-f", "-", stdin=CONFIGMAPS)
    process = subprocess.Popen(
        [kubectl.binary, "get", "configmaps", "-w", "-o", "name", "--request-timeout=3s"],
        stdout=subprocess.PIPE,
        text=True,
        env=kubectl.env,
    )
    eventually(lambda: cluster.call(lambda: cluster.store.watch_count) > 0)
    api.post("/api/v1/namespaces/default/configmaps", configmap("late"))

    output, _ = process.communicate(timeout=30)

    assert output.split() == ["configmap/db", "configmap/web", "configmap/late"]


def test_strategic_patch_of_a_deployment(kubectl: Kubectl) -> None:
    """kubectl patch (strategic by default) merges containers by name."""
    manifest = textwrap.dedent(
        """
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: web}
        spec:
          selector: {matchLabels: {app: web}}
          template:
            metadata: {labels: {app: web}}
            spec: {containers: [{name: main, image: "nginx:1"}, {name: side, image: "envoy:1"}]}
        """
    )
    kubectl.ok("apply", "-f", "-", stdin=manifest)

    patch = '{"spec":{"template":{"spec":{"containers":[{"name":"side","image":"envoy:2"}]}}}}'
    kubectl.ok("patch", "deployment", "web", "-p", patch)

    images = kubectl.ok(
        "get", "deployment", "web", "-o", "jsonpath={.spec.template.spec.containers[*].image}"
    )
    assert images == "nginx:1 envoy:2"


def test_server_dry_run_changes_nothing(kubectl: Kubectl) -> None:
    """kubectl apply --dry-run=server is validated by the server and not persisted."""
    result = kubectl.ok("apply", "--dry-run=server", "-f", "-", stdin=CONFIGMAPS)

    assert "configmap/web created (server dry run)" in result
    assert kubectl("get", "configmap", "web").returncode != 0


def test_describe_and_explain(kubectl: Kubectl) -> None:
    """kubectl describe (which lists the object's events by field selector) and kubectl
    explain (which reads the CRD's schema from OpenAPI v3) work."""
    kubectl.ok("apply", "-f", "-", stdin=CONFIGMAPS)
    kubectl.ok("apply", "-f", str(REPO / "crds"))
    # kubectl wait errors instead of waiting when it reads the new CRD before the real server's
    # controller has written any condition ("status.conditions accessor error: <nil>"), as a
    # busy CI machine once showed: ask again until it waits.
    established = ("wait", "--for=condition=Established", "--timeout=30s",
                   "crd/acceleratortrials.acceltrial.dev")  # fmt: skip
    eventually(lambda: kubectl(*established).returncode == 0)

    assert "Name:         web" in kubectl.ok("describe", "configmap", "web")
    # the real server publishes a new CRD's OpenAPI document moments after it is Established
    eventually(lambda: kubectl("explain", "acceleratortrials.spec.steps").returncode == 0)
    explained = kubectl.ok("explain", "acceleratortrials.spec.steps")
    assert "weight\t<integer>" in explained
    assert "mirror\t<integer>" in explained, "a shadow step's field"
    assert "duration\t<string> -required-" in explained


@pytest.mark.emulator_only
def test_a_protobuf_body_is_refused_with_the_command_to_use_instead(kubectl: Kubectl) -> None:
    """kubectl sends protobuf for ``create namespace``; the sandbox reads JSON and YAML only, and
    its 415 says which kubectl commands work instead."""
    refused = kubectl("create", "namespace", "team")
    assert refused.returncode != 0
    assert "UnsupportedMediaType" in refused.stderr
    assert "kubectl apply -f FILE" in refused.stderr
    assert "kubectl create -f FILE" in refused.stderr
    assert "namespace/serving created" in kubectl.ok("create", "-f", "-", stdin=NAMESPACE)
