"""Kubeconfigs for a ServiceAccount of the real control plane, so a program runs with the
permissions RBAC grants that account (as the operator does in a cluster) instead of the admin
certificate's ``system:masters``.

The token comes from the TokenRequest API (a bound token, as the kubelet projects into a pod);
the emulator has no authorizer, so this exists for the real control plane only.
"""

from __future__ import annotations

import base64
from pathlib import Path

from acceltrial_testbed.sandbox.kubeconfig import write_kubeconfig
from acceltrial_testbed.sandbox.realplane.client import AdminClient

TOKEN_SECONDS = 86_400  # longer than any test or demo run


def service_account_token(client: AdminClient, namespace: str, name: str) -> str:
    """A bound token of the ServiceAccount ``namespace/name`` (which must exist)."""
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": TOKEN_SECONDS},
    }
    path = f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token"
    token: str = client.create(path, request)["status"]["token"]
    return token


def write_service_account_kubeconfig(
    path: Path, client: AdminClient, ca: Path, namespace: str, name: str
) -> Path:
    """A kubeconfig that trusts the control plane's CA and authenticates as the account."""
    token = service_account_token(client, namespace, name)
    ca_data = base64.b64encode(ca.read_bytes()).decode()
    return write_kubeconfig(
        path, client.url, user={"token": token}, certificate_authority_data=ca_data
    )
