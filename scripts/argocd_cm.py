#!/usr/bin/env python3
"""Print the argocd-cm keys that install AcceleratorTrial's health check and resource actions.

Argo CD reads resource customizations from its ConfigMap ``argocd-cm``:
``resource.customizations.health.acceltrial.dev_AcceleratorTrial`` (the health script) and
``resource.customizations.actions.acceltrial.dev_AcceleratorTrial`` (the discovery script and one
definition per action). This script builds both from the files under
``integrations/argocd/resource_customizations/acceltrial.dev/AcceleratorTrial`` so they are never
copied by hand (docs/gitops.md):

    python3 scripts/argocd_cm.py > acceltrial-argocd-cm.yaml
    kubectl -n argocd patch configmap argocd-cm --type merge --patch-file acceltrial-argocd-cm.yaml

``--values`` prints the same keys under ``configs.cm`` for the argo-cd Helm chart instead.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

CUSTOMIZATION = (
    Path(__file__).resolve().parents[1]
    / "integrations/argocd/resource_customizations/acceltrial.dev/AcceleratorTrial"
)
KEY = "acceltrial.dev_AcceleratorTrial"
ACTIONS = ("pause", "resume", "abort", "approve")


class _Literal(str):
    """A string YAML writes as a literal block, so the Lua stays readable."""


def _literal(dumper: yaml.SafeDumper, text: _Literal) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", str(text), style="|")


yaml.SafeDumper.add_representer(_Literal, _literal)


def cm_data(folder: Path = CUSTOMIZATION) -> dict[str, str]:
    """The argocd-cm data keys, as Argo CD expects their values (YAML text for the actions)."""
    actions = {
        "discovery.lua": _Literal((folder / "actions/discovery.lua").read_text()),
        "definitions": [
            {
                "name": name,
                "action.lua": _Literal((folder / f"actions/{name}/action.lua").read_text()),
            }
            for name in ACTIONS
        ],
    }
    return {
        f"resource.customizations.health.{KEY}": _Literal((folder / "health.lua").read_text()),
        f"resource.customizations.actions.{KEY}": _Literal(
            yaml.safe_dump(actions, sort_keys=False, width=100)
        ),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--values", action="store_true", help="print argo-cd Helm chart values (configs.cm)"
    )
    args = parser.parse_args()
    data = cm_data()
    document: dict[str, Any] = {"configs": {"cm": data}} if args.values else {"data": data}
    sys.stdout.write(yaml.safe_dump(document, sort_keys=False, width=100))
    return 0


if __name__ == "__main__":
    sys.exit(main())
