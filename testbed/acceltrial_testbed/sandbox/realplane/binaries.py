"""Where the real control plane's programs and data files are.

``make control-plane`` builds kube-apiserver, kube-controller-manager, kube-scheduler, etcd and
kwok into the repository's ``.tools/bin`` and puts kwok's stages and the Gateway API CRDs into
``.tools/share``. They are looked for in ``$ACCELTRIAL_CONTROL_PLANE_BIN``, then in the
repository's ``.tools/bin``, then on ``PATH``; the data files sit in ``../share`` beside the
directory the API server was found in.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

PROGRAMS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
ENVIRONMENT_VARIABLE = "ACCELTRIAL_CONTROL_PLANE_BIN"
REPOSITORY_BIN = Path(__file__).resolve().parents[4] / ".tools" / "bin"
SERVED_CRDS = (
    "gateway.networking.k8s.io_gatewayclasses.yaml",
    "gateway.networking.k8s.io_gateways.yaml",
    "gateway.networking.k8s.io_httproutes.yaml",
    "gateway.networking.k8s.io_referencegrants.yaml",
    "inference.networking.k8s.io_inferencepools.yaml",
)
"""The CRDs of the build's share the plane installs: the kinds acceltrial and its users' routes
use. The standard channel's others (GRPCRoute, TLSRoute, BackendTLSPolicy, ...) cost the API
server 1.4 CPU-seconds of every start, and nothing reads them."""


class MissingBinaries(RuntimeError):
    """The programs are not built; the message names the missing ones and the fix."""


@dataclass(frozen=True)
class Binaries:
    etcd: Path
    kube_apiserver: Path
    kube_controller_manager: Path
    kube_scheduler: Path
    kwok: Path
    share: Path

    @property
    def kwok_stages(self) -> Path:
        return self.share / "kwok" / "stages.yaml"

    @property
    def kwok_logs_crd(self) -> Path | None:
        """kwok's ``Logs`` CRD (how its kubelet server finds a pod's log file); None in a build
        made before it was copied (the plane then serves no pod logs)."""
        path = self.share / "kwok" / "logs-crd.yaml"
        return path if path.is_file() else None

    @property
    def gateway_api_crds(self) -> list[Path]:
        found = (self.share / "gateway-api" / name for name in SERVED_CRDS)
        return [path for path in found if path.is_file()]


def find_binaries() -> Binaries:
    """The programs and data files, or :class:`MissingBinaries` saying what to run."""
    found = {name: _find(name) for name in PROGRAMS}
    missing = [name for name, path in found.items() if path is None]
    if missing:
        raise MissingBinaries(
            f"the real control plane is not built (missing: {', '.join(missing)}): "
            "run `make control-plane` (needs Go 1.26), or use the emulator "
            "(--control-plane emulator)"
        )
    paths = {name: path for name, path in found.items() if path is not None}
    share = paths["kube-apiserver"].parent.parent / "share"
    binaries = Binaries(
        etcd=paths["etcd"],
        kube_apiserver=paths["kube-apiserver"],
        kube_controller_manager=paths["kube-controller-manager"],
        kube_scheduler=paths["kube-scheduler"],
        kwok=paths["kwok"],
        share=share,
    )
    if not binaries.kwok_stages.is_file() or not binaries.gateway_api_crds:
        raise MissingBinaries(
            f"the control plane's data files are missing from {share} (kwok/stages.yaml, "
            "gateway-api/*.yaml): run `make control-plane`"
        )
    return binaries


def binaries_available() -> bool:
    try:
        find_binaries()
    except MissingBinaries:
        return False
    return True


def _find(name: str) -> Path | None:
    directories = [os.environ.get(ENVIRONMENT_VARIABLE, ""), str(REPOSITORY_BIN)]
    for directory in filter(None, directories):
        candidate = Path(directory) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    on_path = shutil.which(name)
    return Path(on_path) if on_path else None
