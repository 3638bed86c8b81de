"""Words printed around numbers: a count and its noun, singular for one (the subcommands' output, the lessons'
feedback)."""

from __future__ import annotations


def counted(n, singular: str, plural: str | None = None, fmt: str = "") -> str:
    """`n` (formatted with `fmt`) and its noun, singular for exactly one (plural defaults to the singular + "es" after
    s, x, z, ch or sh, else + "s"). Lessons 4 and 7.

    >>> counted(1, "microbatch"), counted(4.0, "microbatch", fmt="g"), counted(2, "stage")
    ('1 microbatch', '4 microbatches', '2 stages')
    """
    if plural is None:
        plural = singular + ("es" if singular.endswith(("s", "x", "z", "ch", "sh")) else "s")
    return f"{n:{fmt}} {singular if n == 1 else plural}"
