"""Choices the local-cluster commands offer, importable without loading the sandbox (the trial
commands' parser names them, and must not load the local cluster to do so)."""

from __future__ import annotations

from typing import Literal

ControlPlane = Literal["auto", "real", "emulator"]
CONTROL_PLANES: tuple[ControlPlane, ...] = ("auto", "real", "emulator")
