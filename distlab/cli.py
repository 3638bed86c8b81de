"""The `distlab` command line. Every subcommand calls the same functions the lessons use.

Subcommands live in distlab/commands/, one module each (NAME, HELP, add_arguments, run).
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from . import commands
from . import grading  # noqa: F401  (importing it marks jsonschema's slow optional import absent: UNUSED_SLOW_IMPORT)
from .commands.memory import parse_count  # noqa: F401  (public: used by scripts and tests)
from .errors import DistlabError

__all__ = ["build_parser", "main"]


def _command_modules():
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue  # shared helpers, not subcommands
        yield importlib.import_module(f"{commands.__name__}.{info.name}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="distlab", description="Distributed-training formulas from the distlab course kit."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for module in _command_modules():
        command = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        module.add_arguments(command)
        command.set_defaults(run=module.run)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    unknown = _unknown_command(parser, argv)
    if unknown:
        print(unknown, file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    import numpy as np

    try:
        with np.errstate(all="ignore"):  # an overflow is reported as our error below, not as a NumPy warning
            return args.run(args)
    except DistlabError as exc:
        print(f"distlab: error: {exc}", file=sys.stderr)
        return 2


def _unknown_command(parser: argparse.ArgumentParser, argv: list) -> str | None:
    """The message for a misspelt subcommand ('colective'), naming the closest ones; None when it is known."""
    import difflib

    if not argv or argv[0].startswith("-"):
        return None
    commands = sorted(next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices)
    if argv[0] in commands:
        return None
    close = difflib.get_close_matches(argv[0], commands, n=3, cutoff=0.5)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    return (
        f"distlab: error: unknown command {argv[0]!r}{hint}\ncommands: {', '.join(commands)} (distlab COMMAND --help)"
    )


if __name__ == "__main__":
    sys.exit(main())
