"""``acceltrial sandbox up``: the parser only; the local cluster is loaded when it runs
(``commands.sandbox``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from acceltrial.cli.local import LocalCommand
from acceltrial_testbed.sandbox.choices import CONTROL_PLANES


def add_sandbox(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sandbox = commands.add_parser(
        "sandbox", help="a local Kubernetes API server for trying the operator and for tests"
    )
    actions = sandbox.add_subparsers(dest="action", required=True, metavar="ACTION")
    up = actions.add_parser(
        "up",
        help="serve a local cluster on a loopback port until interrupted",
        description="Serve a local Kubernetes API server (discovery, CRDs with validation, "
        "watches) on 127.0.0.1, write a kubeconfig for it and serve until Ctrl-C.",
    )
    up.add_argument("--port", type=int, default=8001, help="port on 127.0.0.1 (0: any free port)")
    up.add_argument(
        "--kubeconfig",
        type=Path,
        default=Path("sandbox.kubeconfig"),
        metavar="FILE",
        help="where to write the kubeconfig (default: ./sandbox.kubeconfig)",
    )
    up.add_argument(
        "--topology",
        type=Path,
        metavar="FILE",
        help="node groups to simulate (default: a g5 GPU and an inf2 Neuron node group)",
    )
    up.add_argument(
        "--ready-delay",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="how long a scheduled pod takes to become Ready (default: 2; emulator only)",
    )
    up.add_argument(
        "--control-plane",
        choices=CONTROL_PLANES,
        default="auto",
        help="real: the upstream API server, controllers and etcd built by `make control-plane`; "
        "emulator: the built-in one; auto (default): real when built, else the emulator",
    )


def run_sandbox_command(args: argparse.Namespace) -> int:
    from acceltrial_testbed.commands.sandbox import SandboxOptions, sandbox_up  # noqa: PLC0415

    options = SandboxOptions(
        args.port, args.kubeconfig, args.topology, args.ready_delay, args.control_plane
    )
    return sandbox_up(options, sys.stdout)


COMMAND = LocalCommand("sandbox", add_sandbox, run_sandbox_command)
"""Registered as the ``sandbox`` entry point of ``acceltrial.commands`` (testbed/pyproject.toml)."""
