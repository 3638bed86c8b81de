"""distlab grade: run submitted exercise notebooks in a sandboxed kernel and check the answers here."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from .._words import counted

__all__ = ["NAME", "HELP", "add_arguments", "run"]

NAME = "grade"
HELP = "grade exercise notebooks: run each in a fresh sandboxed kernel, check its answers outside it"


class _Once(argparse.Action):
    """An option's value, given once: a second one, or a value that names a notebook (``--json=bob.ipynb``, a file
    named so and expanded by the instructor's glob), is refused instead of rewriting the command line."""

    def __call__(self, parser, namespace, values, option_string=None):
        given = vars(namespace).setdefault("_given_once", set())
        if self.dest in given:
            parser.error(
                f"{option_string} is given twice (the second: {str(values)[:80]!r}); give each option once -- a "
                "file named like an option? put -- before the notebooks: distlab grade --lesson L -- folder/*.ipynb"
            )
        if str(values).strip().lower().endswith(".ipynb"):
            parser.error(
                f"{option_string} {str(values)[:80]!r} names a notebook: a file named like an option? put -- before "
                "the notebooks (distlab grade --lesson L -- folder/*.ipynb)"
            )
        given.add(self.dest)
        setattr(namespace, self.dest, values)


def add_arguments(parser) -> None:
    """The options of distlab grade, in the order --help lists them; each option given once, never abbreviated
    (a student's file name such as "--gr=x.ipynb" in a glob is no option)."""
    parser.allow_abbrev = False
    _run_arguments(parser)
    _output_arguments(parser)
    _container_arguments(parser)
    _class_arguments(parser)


def _run_arguments(parser) -> None:
    """What to grade and how: the notebooks, the lesson, the time limits and the sandbox."""
    from ..grading import grade

    parser.add_argument(
        "notebooks", nargs="+", metavar="NOTEBOOK", help="submitted .ipynb files (a folder: every .ipynb in it)"
    )
    parser.add_argument(
        "--lesson",
        action=_Once,
        default=None,
        help="the lesson the submissions must belong to, e.g. memory_wall (older names such as "
        "data_parallel still work; default: read from each notebook's metadata, file name or "
        "imports)",
    )
    parser.add_argument(
        "--timeout",
        action=_Once,
        type=float,
        default=grade.DEFAULT_TIMEOUT,
        help=f"time limit per notebook in seconds (default {grade.DEFAULT_TIMEOUT:g})",
    )
    parser.add_argument(
        "--cell-timeout",
        action=_Once,
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
    parser.add_argument(
        "--rlimits-only",
        action="store_true",
        help="a grader that is not root: grade in bubblewrap with each kernel process's rlimits but no cgroup "
        "(the memory of all of a kernel's processes together is then not capped; refused without this flag)",
    )


def _output_arguments(parser) -> None:
    """What the run writes: JSON, Gradescope's results.json, the table."""
    parser.add_argument(
        "--json", action=_Once, metavar="FILE", help="write the JSON summary (score, max_score, questions)"
    )
    parser.add_argument(
        "--gradescope",
        action=_Once,
        metavar="FILE",
        help="write Gradescope's results.json (needs --lesson: the assignment names the lesson)",
    )
    parser.add_argument("--quiet", action="store_true", help="do not print the table")


def _container_arguments(parser) -> None:
    """One submission in a container: the generated Gradescope run_autograder's two phases."""
    container = parser.add_argument_group("one submission in a container (the generated Gradescope run_autograder)")
    container.add_argument(
        "--one-notebook",
        action="store_true",
        help="grade only the lesson's notebook among those given (by name: the exercise's file name first); "
        "the others are listed and ignored (needs --lesson)",
    )
    container.add_argument(
        "--answers-out",
        action=_Once,
        metavar="FILE",
        help="with --container: run the notebook and write only its answers to FILE (- for standard output; the unprivileged phase)",
    )
    container.add_argument(
        "--answers-from",
        action=_Once,
        metavar="FILE",
        help="with --container: check the answers in FILE (written by --answers-out) instead of running "
        "the notebook (root's phase); FILE is read as untrusted data",
    )


def _class_arguments(parser) -> None:
    """A class: the output folder, the roster and its secret, the submitter, a Gradescope export."""
    classroom = parser.add_argument_group("a class (distlab.grading.classroom, distlab.grading.variants)")
    classroom.add_argument(
        "--out",
        action=_Once,
        metavar="DIR",
        help="grade a class into DIR: results.csv/journal.jsonl as each notebook finishes "
        "(re-running skips what is done), results.json, gradescope/, summary.txt, "
        "histogram.png",
    )
    classroom.add_argument(
        "--roster",
        action=_Once,
        metavar="CSV",
        help="the class roster (column id, optional email): per-student variants are graded "
        "with the seed issued to each student, any other seed is refused",
    )
    classroom.add_argument(
        "--secret-file",
        action=_Once,
        metavar="FILE",
        help="the instructor secret that signs the seeds (default: $DISTLAB_VARIANT_SECRET)",
    )
    classroom.add_argument(
        "--submission-metadata",
        action=_Once,
        metavar="FILE",
        help="Gradescope's submission_metadata.json: the submitter whose variant is graded",
    )
    classroom.add_argument(
        "--export",
        action="store_true",
        help="with --out: the one folder given is a Gradescope export; its submission_metadata.yml names the "
        "submitters of each submission_N folder (no other submission_metadata.yml is read: a student can upload one)",
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
    _refuse_outputs(args)
    if args.sandbox in ("trusted", "audit"):
        from ..grading.classroom import TRUSTED_CLASS

        folders = [n for n in args.notebooks if Path(n).is_dir()]
        given = [f"--out {args.out}"] * bool(args.out) + [f"--roster {args.roster}"] * bool(args.roster)
        if folders or given:
            raise ConfigurationError(f"{TRUSTED_CLASS} (given: {', '.join([*folders[:3], *given])})")
    if args.out and args.submission_metadata:
        raise ConfigurationError(
            "--submission-metadata names the submitter of one Gradescope submission, not a class (--out): in a "
            "class each notebook's student is its folder's name, or the export's submitter with --export"
        )
    if args.export and not args.out:
        raise ConfigurationError("--export reads a Gradescope export for a class: give --out DIR too")
    options = dict(
        lesson=args.lesson,
        timeout=args.timeout,
        cell_timeout=args.cell_timeout,
        sandbox=args.sandbox,
        **_class_options(args),
    )
    _say_uncapped(args.sandbox, args.rlimits_only)
    if args.one_notebook or args.answers_out or args.answers_from:
        return _one_submission(args, options)
    if args.out:
        from ..grading import classroom

        try:
            report = classroom.grade_class(
                args.notebooks, args.out, progress=not args.no_progress, export=args.export, **options
            )
        except KeyboardInterrupt as stop:
            print(f"distlab: {stop}", file=sys.stderr)
            return 130
        if not args.quiet:  # summary.txt as written: one notebook per student and lesson counted
            print((Path(args.out) / classroom.SUMMARY_TXT).read_text(encoding="utf-8"), end="")
    else:
        from ..grading.scratch import run_folder

        # every private folder of the run (each notebook's distlab-grade-*: a copy of the submission) in one locked
        # run folder, as a class run's: removed at the end, or by the next run when this one was killed (red team
        # 13, 06-grade-folder-left: a grader libzmq aborted left its folder in the temporary folder for good)
        with run_folder():
            report = grade.grade_notebooks(args.notebooks, **options)
        if not args.quiet:
            print(report.table(), end="")
    _write(args, report)
    return 0


#: what a bubblewrap kernel has no bound on where no kernel cgroup can be made (a grader that is not root)
UNCAPPED = (
    "the memory of all of a kernel's processes together (each process's address space is limited, not their sum: "
    "256 processes of 8 GiB each), the inode count of its /tmp (kernel memory), its IPC namespace's limits, its "
    "disk bandwidth, and what Linux counts per user (epoll watches, pipe pages), which it shares with you"
)


def _say_uncapped(sandbox: str, rlimits_only: bool = False) -> None:
    """Where no kernel cgroup can be made, say what is not capped (stderr). A grader that is not root is refused
    unless --rlimits-only accepts it (red team round 18 01: graded by an ordinary user, a notebook's 3 processes
    held 2.9 GB under a 2 GiB memory limit and nothing said so); a root grader with no writable cgroup v1 memory
    hierarchy (cgroups.memory_hierarchy: a cgroup v2-only host) is told."""
    from ..errors import ConfigurationError
    from ..grading import cgroups

    if sandbox not in ("auto", "bwrap"):
        return
    if os.geteuid() != 0:
        if not rlimits_only:
            raise ConfigurationError(
                "distlab grade is not running as root, so it can make no cgroup for the kernel: bubblewrap's "
                f"boundary holds, but nothing caps {UNCAPPED} (instructor/grading-threat-model.md). Grade a class "
                "as root on a course server, or pass --rlimits-only to grade with these uncapped"
            )
        print(f"distlab grade: note: --rlimits-only: not capped: {UNCAPPED}", file=sys.stderr)
    elif cgroups.memory_hierarchy() is None:
        print(
            "distlab grade: note: no writable cgroup v1 memory hierarchy here (a cgroup v2-only host?): each kernel "
            "process is limited by its rlimits, but the memory and processes of all of a kernel's processes together "
            "are not capped (instructor/grading-threat-model.md)",
            file=sys.stderr,
        )


def _refuse_outputs(args) -> None:
    """Refused before anything is graded: an output that is one of the inputs (or a notebook), and a Gradescope
    results.json of more than one notebook (Gradescope takes its score as one submission's: 3 notebooks made 24 of
    8 points)."""
    from ..errors import ConfigurationError

    inputs = {os.path.realpath(n) for n in args.notebooks}
    for flag, value in (
        ("--json", args.json),
        ("--gradescope", args.gradescope),
        ("--out", args.out),
        ("--answers-out", args.answers_out),
    ):
        if value and value != "-" and os.path.realpath(value) in inputs:
            raise ConfigurationError(f"{flag} {value}: that is one of the notebooks to grade; write elsewhere")
    one = args.one_notebook or args.answers_out or args.answers_from
    if args.gradescope and not one and (len(args.notebooks) != 1 or Path(args.notebooks[0]).is_dir()):
        raise ConfigurationError(
            f"--gradescope writes one submission's results.json and {counted(len(args.notebooks), 'path')} were given"
            + (" (a folder)" if len(args.notebooks) == 1 else "")
            + ": give one notebook, or --one-notebook to grade the lesson's notebook of an upload (as the generated "
            "autograder does); a class: --out DIR writes one results file per notebook in DIR/gradescope/"
        )


def _write(args, report) -> None:
    for target, data in ((args.json, report.to_json), (args.gradescope, report.to_gradescope)):
        if target:
            path = Path(target)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(data(), indent=2) + "\n", encoding="utf-8")


def _one_submission(args, options: dict) -> int:
    """One submission, one notebook (Gradescope): --one-notebook, and the container's two phases."""
    from ..errors import ConfigurationError
    from ..grading import gradescope, grade
    from ..grading.report import GradeReport, excerpt, printable

    if (args.answers_out or args.answers_from) and args.sandbox != "container":
        raise ConfigurationError("--answers-out and --answers-from are the two phases of --container grading")
    if args.answers_out and args.answers_from:
        raise ConfigurationError("--answers-out (the notebook's run) and --answers-from (the check) are two runs")
    if args.out:
        raise ConfigurationError("--one-notebook, --answers-out and --answers-from grade one submission, not --out")
    if not args.lesson:
        raise ConfigurationError("one notebook per submission needs --lesson NAME: the assignment names the lesson")
    if args.one_notebook:
        chosen, ignored, complete = gradescope.pick_notebook(args.notebooks, args.lesson)
        if chosen is None:
            raise ConfigurationError("no notebook (.ipynb) was submitted")
    elif len(args.notebooks) == 1 and not Path(args.notebooks[0]).is_dir():
        chosen, ignored, complete = Path(args.notebooks[0]), [], True
    else:
        raise ConfigurationError("--answers-out and --answers-from take one notebook (or --one-notebook)")
    recorder = gradescope.AnswerRecorder() if args.answers_out else None
    if recorder is not None:
        options["run"] = recorder
    elif args.answers_from:
        options["run"] = gradescope.AnswerReader(args.answers_from)
    graded = grade.grade_notebook(chosen, **options)
    if ignored:
        names = ", ".join(printable(excerpt(p.name, 60)) for p in ignored[:10])
        more = f" and {len(ignored) - 10} more" if len(ignored) > 10 else ""
        graded.problems.append(
            f"graded {printable(excerpt(chosen.name, 60))} only (one notebook per submission, the lesson's by "
            f"name); ignored: {names}{more}"
        )
    if not complete:
        graded.problems.append(
            f"the upload was read only {gradescope.PICK_DEPTH} folders deep and {gradescope.PICK_ENTRIES:,} entries "
            "in all: put the lesson's notebook at the top of the upload"
        )
    if recorder is not None:
        recorder.write(args.answers_out)
        return 0
    report = GradeReport([graded])
    if not args.quiet:
        print(report.table(), end="")
    _write(args, report)
    return 0


def _class_options(args) -> dict:
    """variants= (the roster policy) and identity= (Gradescope's submitter) for grade_notebook.

    The instructor secret given either documented way (--secret-file, or $DISTLAB_VARIANT_SECRET) puts variants in
    use: a notebook without one is refused (signed-only without --roster). Without any secret a variant notebook is
    refused too (its seed cannot be checked), except in the container's unprivileged phase (--answers-out), which
    only records answers and whose check (--answers-from) is given the roster and the secret."""
    from ..grading import variants

    options: dict[str, object] = {}
    has_secret = bool(args.secret_file) or bool(os.environ.get(variants.SECRET_ENV))
    if args.roster:
        options["variants"] = variants.VariantPolicy(
            variants.load_roster(args.roster, variants.read_secret(args.secret_file))
        )
    elif has_secret:  # variants are in use: never ignored (a notebook without one is refused)
        options["variants"] = variants.VariantPolicy(secret=variants.read_secret(args.secret_file))
    elif not args.answers_out:
        options["variants"] = variants.VariantPolicy(unverified=False)
    if args.submission_metadata:
        # no readable submitter: refused when a roster is given, never the student the notebook claims to be
        options["identity"] = variants.submitter(args.submission_metadata) or ("(no submitter in the metadata)",)
    return options
