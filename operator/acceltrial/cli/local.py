"""The local-cluster commands, ``acceltrial demo`` and ``acceltrial sandbox``, which come with
the test bed (``testbed/``, a package of its own that ``pip install .`` never installs).

The test bed registers each as an entry point of the group :data:`GROUP` naming a
:class:`LocalCommand`; the CLI adds the ones installed. Without the test bed the commands stay
listed and say how to install it, so a user of the operator's CLI alone learns where they went.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, TextIO

GROUP = "acceltrial.commands"
LOCAL_COMMANDS = ("sandbox", "demo")
INSTALL_HINT = (
    "it comes with the acceltrial test bed, which is not installed here. In a checkout of "
    "acceltrial run `make setup`, or `pip install -e '.[test]'` then `pip install -e testbed/`."
)

if TYPE_CHECKING:
    from typing import TypeAlias

    SubParsers: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]


@dataclass(frozen=True)
class LocalCommand:
    """One command the test bed adds: its parser, and what running it does."""

    name: str
    add: Callable[[SubParsers], None]
    run: Callable[[argparse.Namespace], int]


def installed() -> dict[str, LocalCommand]:
    """The local commands the installed test bed registers, by name."""
    found: dict[str, LocalCommand] = {}
    for point in entry_points(group=GROUP):
        if point.name not in LOCAL_COMMANDS:
            continue
        try:
            command = point.load()
        except ImportError:
            continue  # registered by a test bed no longer importable: as not installed
        if isinstance(command, LocalCommand):
            found[command.name] = command
    return found


def add_local(commands: SubParsers) -> dict[str, LocalCommand]:
    """Add the installed local commands, and a placeholder for each missing one."""
    found = installed()
    for name in LOCAL_COMMANDS:
        if name in found:
            found[name].add(commands)
        else:
            commands.add_parser(
                name, help=f"(needs the test bed: `pip install -e testbed/`) the {name} command"
            )
    return found


def missing_local(found: dict[str, LocalCommand], argv: Sequence[str], err: TextIO) -> bool:
    """Whether ``argv`` asks for a local command the test bed would add but is not installed
    (then said on ``err``, before its options could be refused as unknown)."""
    if not argv or argv[0] not in LOCAL_COMMANDS or argv[0] in found:
        return False
    print(f"acceltrial {argv[0]}: {INSTALL_HINT}", file=err)
    return True
