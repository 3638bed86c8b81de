"""The `distlab` command line. Every subcommand calls the same functions the lessons use.

Subcommands live in distlab/commands/, one module each (NAME, HELP, add_arguments, run).
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from . import commands
from .commands.memory import parse_count  # noqa: F401  (public: used by scripts and tests)
from .errors import DistlabError


def _command_modules():
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue  # shared helpers, not subcommands
        yield importlib.import_module(f"{commands.__name__}.{info.name}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="distlab", description="Distributed-training formulas from the distlab course kit.")
    sub = parser.add_subparsers(dest="command", required=True)
    for module in _command_modules():
        command = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        module.add_arguments(command)
        command.set_defaults(run=module.run)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except DistlabError as exc:
        print(f"distlab: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
