"""``acceltrial demo``: run a scenario on the local sandbox (see acceltrial_testbed.demo). The
parser only: the demo itself is loaded when the command runs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from acceltrial.cli.local import LocalCommand
from acceltrial_testbed.sandbox.choices import CONTROL_PLANES


def add_demo(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    demo = commands.add_parser(
        "demo",
        help="run a complete trial on a local cluster with a simulated fleet and real Prometheus",
        description="Start a local control plane, a simulated inference fleet, a real "
        "Prometheus and the operator; install a GPU baseline; run the scenario's trial to its "
        "decision with live progress. Exits 0 when the outcome is the scenario's expect, 1 when "
        "not, 2 when the scenario or the machine cannot run it.",
    )
    demo.add_argument(
        "--scenario",
        default="promote",
        metavar="NAME|FILE",
        help="a shipped scenario (examples/scenarios/NAME.yaml) or a scenario file "
        "(default: promote)",
    )
    demo.add_argument(
        "--speed",
        type=float,
        default=1.0,
        metavar="N",
        help="divide every duration by N (default 1: the scenario's own, already compressed)",
    )
    demo.add_argument(
        "--result-file",
        type=Path,
        metavar="FILE",
        help="write the final status, the route and the started pids as JSON",
    )
    demo.add_argument(
        "--report-dir",
        type=Path,
        metavar="DIR",
        help="write the decision report there as report.json, report.md and report.html",
    )
    demo.add_argument(
        "--control-plane",
        choices=CONTROL_PLANES,
        default="auto",
        help="real: the upstream API server, controllers and etcd built by `make control-plane` "
        "(kwok plays the kubelet); emulator: the built-in one, no setup; auto (default): real "
        "when built, else the emulator",
    )
    demo.add_argument(
        "--keep", action="store_true", help="keep the operator log and Prometheus data"
    )


def run_demo_command(args: argparse.Namespace) -> int:
    from acceltrial_testbed.demo.runner import DemoOptions, run_demo  # noqa: PLC0415

    demo = DemoOptions(
        args.scenario,
        args.speed,
        args.result_file,
        args.keep,
        args.report_dir,
        control_plane=args.control_plane,
    )
    return run_demo(demo, sys.stdout)


COMMAND = LocalCommand("demo", add_demo, run_demo_command)
"""Registered as the ``demo`` entry point of ``acceltrial.commands`` (testbed/pyproject.toml)."""
