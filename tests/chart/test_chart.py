"""The Helm chart, rendered by the real helm: hardened pod, least-privilege RBAC, optional CRDs."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest
import yaml

from tests.conftest import REPO, tool

CHART = REPO / "charts" / "acceltrial"
ROLE_ARN = "arn:aws:iam::123456789012:role/acceltrial"


def render(*values: str) -> dict[str, dict[str, Any]]:
    """The chart's objects by kind (the last of a kind, where there are several)."""
    return {doc["kind"]: doc for doc in render_all(*values)}


def render_all(*values: str) -> list[dict[str, Any]]:
    args = [tool("helm"), "template", "acceltrial", str(CHART), "--namespace", "acceltrial-system"]
    args += ["--kube-version", "1.33.0"]
    for value in values:
        args += ["--set", value]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


@pytest.fixture(scope="module")
def rendered() -> dict[str, dict[str, Any]]:
    return render(f"serviceAccount.irsaRoleArn={ROLE_ARN}")


def test_lints_strictly() -> None:
    result = subprocess.run(
        [tool("helm"), "lint", "--strict", str(CHART)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_renders_every_object(rendered: dict[str, dict[str, Any]]) -> None:
    assert set(rendered) == {
        "CustomResourceDefinition",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Service",
        "Deployment",
    }


def test_rbac_has_no_wildcards(rendered: dict[str, dict[str, Any]]) -> None:
    for rule in rendered["ClusterRole"]["rules"]:
        for key in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[key], rule
        assert not {"deletecollection", "escalate", "bind", "impersonate"} & set(rule["verbs"])


def grants(rendered: dict[str, dict[str, Any]]) -> dict[str, set[str]]:
    verbs: dict[str, set[str]] = {}
    for rule in rendered["ClusterRole"]["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                verbs.setdefault(f"{group}/{resource}", set()).update(rule["verbs"])
    return verbs


def test_rbac_grants_only_what_the_operator_uses(rendered: dict[str, dict[str, Any]]) -> None:
    assert grants(rendered) == {
        "acceltrial.dev/acceleratortrials": {"get", "list", "watch", "patch"},
        "acceltrial.dev/acceleratortrials/status": {"patch"},
        "acceltrial.dev/trainingtrials": {"get", "list", "watch", "patch"},
        "acceltrial.dev/trainingtrials/status": {"patch"},
        "apiextensions.k8s.io/customresourcedefinitions": {"list", "watch"},
        "/namespaces": {"list", "watch"},
        "apps/deployments": {"get", "list", "create", "patch", "delete"},
        "apps/deployments/scale": {"patch"},
        "/services": {"get", "create", "patch", "delete"},
        "/configmaps": {"get", "create", "patch"},
        "/pods": {"list"},
        "/nodes": {"get", "list"},
        "karpenter.sh/nodepools": {"list"},
        "gateway.networking.k8s.io/httproutes": {"get", "patch"},
        "gateway.networking.k8s.io/referencegrants": {"list"},
        "inference.networking.k8s.io/inferencepools": {"get", "create", "patch", "delete"},
        "batch/jobs": {"get", "create", "patch", "delete"},
        "/pods/log": {"get"},
        "autoscaling/horizontalpodautoscalers": {"get", "list", "patch"},
        "/secrets": {"get"},
        "/events": {"create"},
    }
    assert "/secrets" not in grants(render("rbac.readPrometheusSecrets=false"))


def test_operator_pod_is_hardened(rendered: dict[str, dict[str, Any]]) -> None:
    pod = rendered["Deployment"]["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = pod["containers"]
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    assert container["resources"]["requests"]["cpu"]
    assert container["resources"]["requests"]["memory"]
    assert container["args"][:2] == ["run", "--standalone"]
    assert container["args"][-2:] == ["-m", "acceltrial.handlers"]


def test_irsa_role_lands_on_the_service_account(rendered: dict[str, dict[str, Any]]) -> None:
    annotations = rendered["ServiceAccount"]["metadata"]["annotations"]
    assert annotations["eks.amazonaws.com/role-arn"] == ROLE_ARN


def test_metrics_service_targets_the_metrics_port(rendered: dict[str, dict[str, Any]]) -> None:
    (port,) = rendered["Service"]["spec"]["ports"]
    assert port["targetPort"] == "metrics"
    container = rendered["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "metrics", "containerPort": port["port"], "protocol": "TCP"} in container[
        "ports"
    ]


def test_crds_are_the_generated_ones_and_optional() -> None:
    crds = {
        doc["metadata"]["name"]: doc
        for doc in render_all(f"serviceAccount.irsaRoleArn={ROLE_ARN}")
        if doc["kind"] == "CustomResourceDefinition"
        and doc["metadata"]["name"].endswith(".acceltrial.dev")
    }
    for plural in ("acceleratortrials", "trainingtrials"):
        generated = yaml.safe_load((REPO / "crds" / f"acceltrial.dev_{plural}.yaml").read_text())
        crd = crds[f"{plural}.acceltrial.dev"]
        assert crd["spec"] == generated["spec"]
        assert crd["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
    assert "CustomResourceDefinition" not in render("crds.install=false")


def test_watched_namespaces_replace_all_namespaces() -> None:
    rendered = render("watchNamespaces={serving,ml}")
    args = rendered["Deployment"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--all-namespaces" not in args
    assert {"--namespace=serving", "--namespace=ml"} <= set(args)


def test_values_schema_refuses_a_typo() -> None:
    result = subprocess.run(
        [tool("helm"), "template", "x", str(CHART), "--set", "metrics.prot=9000"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0
    assert "prot" in result.stderr


def test_two_replicas_join_kopf_peering_and_one_runs_standalone() -> None:
    docs = render_all("replicas=2")
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert deployment["spec"]["replicas"] == 2
    assert "--peering=acceltrial" in args
    assert "--standalone" not in args
    kinds = {(d["kind"], d["metadata"]["name"]) for d in docs}
    assert ("ClusterKopfPeering", "acceltrial") in kinds
    assert ("CustomResourceDefinition", "clusterkopfpeerings.kopf.dev") in kinds
    role = next(d for d in docs if d["kind"] == "ClusterRole")
    peering = [r for r in role["rules"] if r["apiGroups"] == ["kopf.dev"]]
    assert peering == [{"apiGroups": ["kopf.dev"],
                        "resources": ["clusterkopfpeerings", "kopfpeerings"],
                        "verbs": ["get", "list", "watch", "patch"]}]  # fmt: skip
    single = render_all()
    single_args = next(d for d in single if d["kind"] == "Deployment")["spec"]["template"]["spec"][
        "containers"
    ][0]["args"]
    assert "--standalone" in single_args
    assert not any(d["kind"].endswith("KopfPeering") for d in single)


def test_two_replicas_watching_namespaces_get_a_peering_in_each() -> None:
    docs = render_all("replicas=2", "watchNamespaces={serving,ml}")
    peerings = {(d["kind"], d["metadata"].get("namespace")) for d in docs if "Peering" in d["kind"]}
    assert peerings == {("KopfPeering", "serving"), ("KopfPeering", "ml")}
