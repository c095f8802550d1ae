"""Entry point of ``acceltrial`` / ``kubectl-acceltrial``: argument parsing and dispatch only."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from acceltrial import __version__
from acceltrial.api.actions import ACTION_ANNOTATION as ACTION
from acceltrial.api.crd import render_crd
from acceltrial.api.kinds import ACCELERATOR_TRIAL, KINDS_BY_NAME
from acceltrial.cli.check import CheckOptions, add_check, run_check
from acceltrial.cli.local import LOCAL_COMMANDS, LocalCommand, add_local, missing_local
from acceltrial.cli.trials import (
    ACTIONS,
    CliError,
    act,
    connect,
    show_report,
    show_status,
)
from acceltrial.cli.validate import validate_files


def build_parser() -> argparse.ArgumentParser:
    return _build_parser()[0]


def _build_parser() -> tuple[argparse.ArgumentParser, dict[str, LocalCommand]]:
    parser = argparse.ArgumentParser(
        prog="acceltrial",
        description="Trial a Neuron (Inferentia2/Trainium) variant of a model server beside its "
        "GPU Deployment, judged on live traffic and cost.",
    )
    parser.add_argument("--version", action="version", version=f"acceltrial {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    crd = commands.add_parser(
        "crd", help="print a CRD generated from the API models (AcceleratorTrial by default)"
    )
    crd.add_argument(
        "--kind",
        choices=sorted(KINDS_BY_NAME),
        default=ACCELERATOR_TRIAL.kind,
        help="which kind's CRD to print (default: %(default)s)",
    )
    validate = commands.add_parser(
        "validate",
        help="check AcceleratorTrial and TrainingTrial manifests offline (schema and CEL "
        "rules, as the API server)",
        description="Check AcceleratorTrial and TrainingTrial manifests against the API models "
        "and the CRDs' CEL rules. Prints one line per problem (file#document name: field: what "
        "is expected) and exits 1 if there is any. Documents of other kinds are skipped.",
    )
    validate.add_argument("files", nargs="+", metavar="FILE", help="YAML file, or - for stdin")
    add_check(commands)
    local = add_local(commands)
    _add_trial_commands(commands)
    return parser, local


def _add_trial_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    namespace = argparse.ArgumentParser(add_help=False)
    namespace.add_argument(
        "-n", "--namespace", help="namespace of the trial (default: the kubeconfig context's)"
    )
    status = commands.add_parser(
        "status", parents=[namespace], help="phase, step, weight and verdicts of trials"
    )
    status.add_argument("name", nargs="?", metavar="NAME", help="one trial (default: all)")
    status.add_argument(
        "-w", "--watch", action="store_true", help="print again on every change, with progress"
    )
    report = commands.add_parser(
        "report", parents=[namespace], help="a trial's decision report (from <trial>-report)"
    )
    report.add_argument("name", metavar="NAME")
    report.add_argument(
        "-o", "--output", choices=("md", "html", "json"), default="md",
        help="md (default), html (one self-contained page with charts) or json",
    )  # fmt: skip
    for action in ACTIONS:
        command = commands.add_parser(
            action, parents=[namespace], help=f"ask a trial to {action} (annotation {ACTION})"
        )
        command.add_argument("name", metavar="NAME")


def _trial_command(args: argparse.Namespace) -> int:
    try:
        target = connect(args.namespace)
        if args.command == "status":
            return show_status(target, args.name, args.watch, sys.stdout)
        if args.command == "report":
            return show_report(target, args.name, args.output, sys.stdout)
        return act(target, args.name, args.command, sys.stdout)
    except CliError as error:
        print(f"acceltrial {args.command}: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def _offline(args: argparse.Namespace) -> int:
    if args.command == "crd":
        sys.stdout.write(render_crd(KINDS_BY_NAME[args.kind]))
        return 0
    return validate_files(args.files, sys.stdout)


def _check(args: argparse.Namespace) -> int:
    options = CheckOptions(
        args.file, args.prometheus, args.namespace, args.baseline_pods, args.candidate_pods,
        args.model_url,
    )  # fmt: skip
    return run_check(options, sys.stdout, sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    parser, local = _build_parser()
    arguments = sys.argv[1:] if argv is None else list(argv)
    if missing_local(local, arguments, sys.stderr):
        return 2
    args = parser.parse_args(arguments)
    if args.command in ("crd", "validate"):
        return _offline(args)
    if args.command == "check":
        return _check(args)
    if args.command in LOCAL_COMMANDS:
        return local[args.command].run(args)
    if args.command in ("status", "report", *ACTIONS):
        return _trial_command(args)
    return 2  # argparse rejects unknown commands before this


if __name__ == "__main__":
    sys.exit(main())
