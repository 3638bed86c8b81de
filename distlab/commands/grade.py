"""distlab grade: run submitted exercise notebooks in a sandboxed kernel and check the answers here."""

from __future__ import annotations

import json
from pathlib import Path

NAME = "grade"
HELP = "grade exercise notebooks: run each in a fresh sandboxed kernel, check its answers outside it"


def add_arguments(parser) -> None:
    from ..grading import grade

    parser.add_argument("notebooks", nargs="+", metavar="NOTEBOOK",
                        help="submitted .ipynb files (a folder: every .ipynb in it)")
    parser.add_argument("--lesson", default=None,
                        help="the lesson the submissions must belong to, e.g. memory_wall (older names such as "
                             "data_parallel still work; default: read from each notebook's metadata, file name or "
                             "imports)")
    parser.add_argument("--timeout", type=float, default=grade.DEFAULT_TIMEOUT,
                        help=f"time limit per notebook in seconds (default {grade.DEFAULT_TIMEOUT:g})")
    parser.add_argument("--cell-timeout", type=float, default=grade.DEFAULT_CELL_TIMEOUT,
                        help=f"time limit per cell in seconds (default {grade.DEFAULT_CELL_TIMEOUT:g})")
    parser.add_argument("--sandbox", choices=grade.SANDBOXES, default="auto",
                        help="auto, bwrap (default): bubblewrap plus the audit hook, refused where bubblewrap cannot "
                             "run; container: see --container; trusted (old name: audit): see --trusted")
    parser.add_argument("--container", dest="sandbox", action="store_const", const="container",
                        help="this already runs in a throw-away container (e.g. Gradescope): no bubblewrap, the "
                             "audit hook and resource limits only")
    parser.add_argument("--trusted", dest="sandbox", action="store_const", const="trusted",
                        help="the notebooks are trusted: the Python audit hook only, no operating-system sandbox "
                             "(named so in the report)")
    parser.add_argument("--json", metavar="FILE", help="write the JSON summary (score, max_score, questions)")
    parser.add_argument("--gradescope", metavar="FILE",
                        help="write Gradescope's results.json (needs --lesson: the assignment names the lesson)")
    parser.add_argument("--quiet", action="store_true", help="do not print the table")


def run(args) -> int:
    from ..grading import discover, grade
    from ..errors import ConfigurationError

    import math

    for flag, value in (("--timeout", args.timeout), ("--cell-timeout", args.cell_timeout)):
        if not math.isfinite(value) or not 1 <= value <= grade.MAX_TIMEOUT:
            raise ConfigurationError(f"{flag} {value!r}: give a finite number of seconds from 1 to "
                                     f"{grade.MAX_TIMEOUT:g}")
    if args.gradescope and not args.lesson:
        raise ConfigurationError("--gradescope needs --lesson NAME: Gradescope keeps only the score, so the "
                                 "lesson must come from the assignment, not from the submitted notebook; "
                                 f"lessons: {', '.join(discover.lesson_names())}")
    report = grade.grade_notebooks(args.notebooks, lesson=args.lesson, timeout=args.timeout,
                                   cell_timeout=args.cell_timeout, sandbox=args.sandbox)
    if not args.quiet:
        print(report.table(), end="")
    for target, data in ((args.json, report.to_json), (args.gradescope, report.to_gradescope)):
        if target:
            path = Path(target)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(data(), indent=2) + "\n", encoding="utf-8")
    return 0
