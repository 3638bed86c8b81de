"""distlab grade: run submitted exercise notebooks in a sandboxed kernel and check the answers here."""

from __future__ import annotations

import json
import sys
from pathlib import Path

__all__ = ["NAME", "HELP", "add_arguments", "run"]

NAME = "grade"
HELP = "grade exercise notebooks: run each in a fresh sandboxed kernel, check its answers outside it"


def add_arguments(parser) -> None:
    from ..grading import grade

    parser.add_argument(
        "notebooks", nargs="+", metavar="NOTEBOOK", help="submitted .ipynb files (a folder: every .ipynb in it)"
    )
    parser.add_argument(
        "--lesson",
        default=None,
        help="the lesson the submissions must belong to, e.g. memory_wall (older names such as "
        "data_parallel still work; default: read from each notebook's metadata, file name or "
        "imports)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=grade.DEFAULT_TIMEOUT,
        help=f"time limit per notebook in seconds (default {grade.DEFAULT_TIMEOUT:g})",
    )
    parser.add_argument(
        "--cell-timeout",
        type=float,
        default=grade.DEFAULT_CELL_TIMEOUT,
        help=f"time limit per cell in seconds (default {grade.DEFAULT_CELL_TIMEOUT:g})",
    )
    parser.add_argument(
        "--sandbox",
        choices=grade.SANDBOXES,
        default="auto",
        help="auto, bwrap (default): bubblewrap plus the audit hook, refused where bubblewrap cannot "
        "run; container: see --container; trusted (old name: audit): see --trusted",
    )
    parser.add_argument(
        "--container",
        dest="sandbox",
        action="store_const",
        const="container",
        help="this already runs in a throw-away container (e.g. Gradescope): no bubblewrap, the "
        "audit hook and resource limits only",
    )
    parser.add_argument(
        "--trusted",
        dest="sandbox",
        action="store_const",
        const="trusted",
        help="the notebooks are trusted: the Python audit hook only, no operating-system sandbox "
        "(named so in the report)",
    )
    parser.add_argument("--json", metavar="FILE", help="write the JSON summary (score, max_score, questions)")
    parser.add_argument(
        "--gradescope",
        metavar="FILE",
        help="write Gradescope's results.json (needs --lesson: the assignment names the lesson)",
    )
    parser.add_argument("--quiet", action="store_true", help="do not print the table")
    classroom = parser.add_argument_group("a class (distlab.grading.classroom, distlab.grading.variants)")
    classroom.add_argument(
        "--out",
        metavar="DIR",
        help="grade a class into DIR: results.csv/journal.jsonl as each notebook finishes "
        "(re-running skips what is done), results.json, gradescope/, summary.txt, "
        "histogram.png",
    )
    classroom.add_argument(
        "--roster",
        metavar="CSV",
        help="the class roster (column id, optional email): per-student variants are graded "
        "with the seed issued to each student, any other seed is refused",
    )
    classroom.add_argument(
        "--secret-file",
        metavar="FILE",
        help="the instructor secret that signs the seeds (default: $DISTLAB_VARIANT_SECRET)",
    )
    classroom.add_argument(
        "--submission-metadata",
        metavar="FILE",
        help="Gradescope's submission_metadata.json: the submitter whose variant is graded",
    )
    classroom.add_argument("--no-progress", action="store_true", help="no progress bar (with --out)")


def run(args) -> int:
    from ..grading import discover, grade
    from ..errors import ConfigurationError

    import math

    for flag, value in (("--timeout", args.timeout), ("--cell-timeout", args.cell_timeout)):
        if not math.isfinite(value) or not 1 <= value <= grade.MAX_TIMEOUT:
            raise ConfigurationError(
                f"{flag} {value!r}: give a finite number of seconds from 1 to {grade.MAX_TIMEOUT:g}"
            )
    if args.gradescope and not args.lesson:
        raise ConfigurationError(
            "--gradescope needs --lesson NAME: Gradescope keeps only the score, so the "
            "lesson must come from the assignment, not from the submitted notebook; "
            f"lessons: {', '.join(discover.lesson_names())}"
        )
    if args.sandbox in ("trusted", "audit"):
        from ..grading.classroom import TRUSTED_CLASS

        folders = [n for n in args.notebooks if Path(n).is_dir()]
        given = [f"--out {args.out}"] * bool(args.out) + [f"--roster {args.roster}"] * bool(args.roster)
        if folders or given:
            raise ConfigurationError(f"{TRUSTED_CLASS} (given: {', '.join([*folders[:3], *given])})")
    options = dict(
        lesson=args.lesson,
        timeout=args.timeout,
        cell_timeout=args.cell_timeout,
        sandbox=args.sandbox,
        **_class_options(args),
    )
    if args.out:
        from ..grading import classroom

        try:
            report = classroom.grade_class(args.notebooks, args.out, progress=not args.no_progress, **options)
        except KeyboardInterrupt as stop:
            print(f"distlab: {stop}", file=sys.stderr)
            return 130
        if not args.quiet:
            print(classroom.summary_text(report.notebooks), end="")
    else:
        report = grade.grade_notebooks(args.notebooks, **options)
        if not args.quiet:
            print(report.table(), end="")
    for target, data in ((args.json, report.to_json), (args.gradescope, report.to_gradescope)):
        if target:
            path = Path(target)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(data(), indent=2) + "\n", encoding="utf-8")
    return 0


def _class_options(args) -> dict:
    """variants= (the roster policy) and identity= (Gradescope's submitter) for grade_notebook."""
    from ..grading import variants

    options: dict[str, object] = {}
    if args.roster:
        options["variants"] = variants.VariantPolicy(
            variants.load_roster(args.roster, variants.read_secret(args.secret_file))
        )
    if args.submission_metadata:
        # no readable submitter: refused when a roster is given, never the student the notebook claims to be
        options["identity"] = variants.submitter(args.submission_metadata) or ("(no submitter in the metadata)",)
    return options
