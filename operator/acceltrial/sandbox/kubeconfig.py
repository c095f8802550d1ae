"""The kubeconfig that points kubectl, kopf and the official client at a sandbox."""

from __future__ import annotations

from pathlib import Path

import yaml

CONTEXT = "acceltrial-sandbox"


def kubeconfig(url: str) -> dict[str, object]:
    """A kubeconfig with one cluster, user and context named ``acceltrial-sandbox``."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CONTEXT, "cluster": {"server": url}}],
        "users": [{"name": CONTEXT, "user": {"token": "sandbox"}}],
        "contexts": [
            {
                "name": CONTEXT,
                "context": {"cluster": CONTEXT, "user": CONTEXT, "namespace": "default"},
            }
        ],
        "current-context": CONTEXT,
        "preferences": {},
    }


def write_kubeconfig(path: Path, url: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(kubeconfig(url), sort_keys=False))
    return path
