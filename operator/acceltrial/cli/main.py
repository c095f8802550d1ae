"""Entry point of ``acceltrial`` / ``kubectl-acceltrial``: argument parsing and dispatch only."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from acceltrial import __version__
from acceltrial.api.crd import render_crd
from acceltrial.cli.validate import validate_files


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="acceltrial",
        description="Trial a Neuron (Inferentia2/Trainium) variant of a model server beside its "
        "GPU Deployment, judged on live traffic and cost.",
    )
    parser.add_argument("--version", action="version", version=f"acceltrial {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.add_parser("crd", help="print the AcceleratorTrial CRD generated from the API models")
    validate = commands.add_parser(
        "validate",
        help="check AcceleratorTrial manifests offline (schema and CEL rules, as the API server)",
        description="Check AcceleratorTrial manifests against the API models and the CRD's CEL "
        "rules. Prints one line per problem (file#document name: field: what is expected) and "
        "exits 1 if there is any. Documents of other kinds are skipped.",
    )
    validate.add_argument("files", nargs="+", metavar="FILE", help="YAML file, or - for stdin")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "crd":
        sys.stdout.write(render_crd())
        return 0
    if args.command == "validate":
        return validate_files(args.files, sys.stdout)
    return 2  # argparse rejects unknown commands before this


if __name__ == "__main__":
    sys.exit(main())
