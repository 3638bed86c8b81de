"""distlab gradescope-autograder: build the autograder zip that Gradescope runs for every submission."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["NAME", "HELP", "add_arguments", "run"]

NAME = "gradescope-autograder"
HELP = "build the Gradescope autograder package (setup.sh, run_autograder, distlab) for one lesson"


def add_arguments(parser) -> None:
    parser.add_argument("--lesson", required=True, help="the lesson the assignment grades, e.g. memory_wall")
    parser.add_argument("--out", default="autograder.zip", help="the zip to write (default autograder.zip)")
    parser.add_argument(
        "--pip",
        metavar="SPEC",
        default=None,
        help="what setup.sh installs (default: this distlab source tree, bundled in the zip)",
    )
    parser.add_argument("--roster", metavar="CSV", help="per-student variants: the roster (with --secret-file)")
    parser.add_argument(
        "--secret-file",
        metavar="FILE",
        help="per-student variants: the instructor secret (default: $DISTLAB_VARIANT_SECRET, with --roster)",
    )
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per notebook (default 300)")
    parser.add_argument("--cell-timeout", type=float, default=60.0, help="seconds per cell (default 60)")


def run(args) -> int:
    import math

    from ..errors import ConfigurationError
    from ..grading import gradescope, variants

    for name, value in (("--timeout", args.timeout), ("--cell-timeout", args.cell_timeout)):
        if not math.isfinite(value) or not 0 < value <= 86400:
            raise ConfigurationError(f"{name} must be a number of seconds between 0 and 86400, not {value}")
    with tempfile.TemporaryDirectory() as private:  # the environment's secret, as the file the zip packs (0600)
        secret_file = args.secret_file
        if args.roster and not secret_file and os.environ.get(variants.SECRET_ENV):
            secret_file = Path(private) / "variant_secret"
            fd = os.open(secret_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(variants.read_secret(None))
        path = gradescope.build_autograder(
            args.lesson,
            args.out,
            requirement=args.pip,
            roster=args.roster,
            secret_file=secret_file,
            timeout=args.timeout,
            cell_timeout=args.cell_timeout,
        )
    print(f"wrote {path}: upload it as the assignment's autograder (Gradescope: Configure Autograder, zip file)")
    return 0
