"""Words the subcommands print around numbers. Not a subcommand (cli.py skips modules whose name starts with an
underscore)."""

from __future__ import annotations


def counted(n, singular: str, plural: str | None = None) -> str:
    """`n` and its noun, singular for exactly one: counted(1, "microbatch") -> "1 microbatch", counted(4,
    "microbatch") -> "4 microbatches" (plural defaults to the singular + "es" after s, x, z, ch or sh, else + "s")."""
    if plural is None:
        plural = singular + ("es" if singular.endswith(("s", "x", "z", "ch", "sh")) else "s")
    return f"{n} {singular if n == 1 else plural}"
