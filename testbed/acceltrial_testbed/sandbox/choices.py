"""Which control plane a local cluster runs on, importable without loading either (the
commands' parsers name the choices, and must not load a local cluster to do so)."""

from __future__ import annotations

from typing import Literal

ControlPlane = Literal["auto", "real", "emulator"]
CONTROL_PLANES: tuple[ControlPlane, ...] = ("auto", "real", "emulator")


def uses_real_control_plane(choice: ControlPlane) -> bool:
    """real when asked, or when asked for auto and ``make control-plane`` has built it."""
    from acceltrial_testbed.sandbox.realplane.binaries import binaries_available  # noqa: PLC0415

    return choice == "real" or (choice == "auto" and binaries_available())
