"""The operator's identity in the end-to-end tests: on the real control plane it runs as the
chart's ServiceAccount with exactly the chart's ClusterRole (rendered by the real helm), so a
permission the operator needs and the chart lacks fails the tests as it would in a cluster. The
emulator has no authorizer: there the operator uses the sandbox's kubeconfig."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from acceltrial_testbed.sandbox.cluster import Sandbox
from acceltrial_testbed.sandbox.realplane.plane import RealControlPlane
from tests.conftest import REPO, tool

CHART = REPO / "charts" / "acceltrial"
RELEASE_NAMESPACE = "acceltrial-system"
RBAC_TEMPLATES = ("templates/serviceaccount.yaml", "templates/rbac.yaml")


def operator_kubeconfig(cluster: Sandbox | RealControlPlane, folder: Path) -> Path:
    """The kubeconfig the operator runs with (see the module docstring)."""
    if isinstance(cluster, Sandbox):
        return cluster.kubeconfig
    objects = chart_rbac()
    account = next(o for o in objects if o["kind"] == "ServiceAccount")["metadata"]["name"]
    kubectl(cluster, "create", "namespace", RELEASE_NAMESPACE)
    kubectl(cluster, "apply", "-f", "-", stdin=yaml.safe_dump_all(objects))
    return cluster.service_account_kubeconfig(
        RELEASE_NAMESPACE, account, folder / "operator.kubeconfig"
    )


def chart_rbac() -> list[dict[str, Any]]:
    """The chart's ServiceAccount, ClusterRole and ClusterRoleBinding with default values."""
    args = [tool("helm"), "template", "acceltrial", str(CHART), "--namespace", RELEASE_NAMESPACE]
    for template in RBAC_TEMPLATES:
        args += ["--show-only", template]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def kubectl(cluster: RealControlPlane, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        [tool("kubectl"), "--kubeconfig", str(cluster.kubeconfig), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout
