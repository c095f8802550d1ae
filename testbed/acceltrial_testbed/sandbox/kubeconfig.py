"""The kubeconfig that points kubectl, kopf and the official client at a sandbox."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

CONTEXT = "acceltrial-sandbox"
EMULATOR_USER = {"token": "sandbox"}  # the emulator accepts any token


def kubeconfig(
    url: str, *, user: dict[str, str] | None = None, certificate_authority_data: str | None = None
) -> dict[str, object]:
    """A kubeconfig with one cluster, user and context named ``acceltrial-sandbox``."""
    cluster: dict[str, Any] = {"server": url}
    if certificate_authority_data is not None:
        cluster["certificate-authority-data"] = certificate_authority_data
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CONTEXT, "cluster": cluster}],
        "users": [{"name": CONTEXT, "user": user or EMULATOR_USER}],
        "contexts": [
            {
                "name": CONTEXT,
                "context": {"cluster": CONTEXT, "user": CONTEXT, "namespace": "default"},
            }
        ],
        "current-context": CONTEXT,
        "preferences": {},
    }


def write_kubeconfig(path: Path, url: str, **credentials: Any) -> Path:
    """Write :func:`kubeconfig` to ``path``, readable by its owner only (it may hold a key)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(kubeconfig(url, **credentials), sort_keys=False))
    path.chmod(0o600)
    return path
