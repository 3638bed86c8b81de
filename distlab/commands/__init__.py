"""One module per `distlab` subcommand. Each defines NAME, HELP, add_arguments(parser) and run(args) -> int.

cli.py discovers them, so a new topic adds a file here and touches nothing else.
"""

__all__ = []
