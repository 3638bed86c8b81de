"""distlab exercises: build exercises/ from solutions/ (strip the solution blocks); with --variants, one per student."""

from __future__ import annotations

from .._words import counted

__all__ = ["NAME", "HELP", "add_arguments", "run"]

NAME = "exercises"
HELP = "build exercises/ from solutions/ (strip the solution blocks); --variants: one notebook per student"


def add_arguments(ex) -> None:
    ex.add_argument("--solutions", default="solutions")
    ex.add_argument("--exercises", default="exercises")
    ex.add_argument("--check", action="store_true", help="only report whether exercises/ is up to date (exit 1 if not)")
    ex.add_argument(
        "--variants",
        metavar="ROSTER_CSV",
        help="write one exercise notebook per student of this roster (column id, optional email), "
        "with numbers drawn from the student's seed (HMAC of the instructor secret)",
    )
    ex.add_argument(
        "--secret-file",
        metavar="FILE",
        help="the instructor secret for --variants (default: $DISTLAB_VARIANT_SECRET); keep it private",
    )
    ex.add_argument("--out", default="variants", help="folder for --variants: OUT/<student id>/<lesson>.ipynb")
    ex.add_argument("--lesson", action="append", help="only this lesson (repeatable; default: every graded lesson)")
    ex.add_argument(
        "--release",
        metavar="DATE",
        help="with --variants: solution() is withheld until this date (ISO, e.g. 2026-12-01, UTC)",
    )


def run(args) -> int:
    from ..grading import build

    if args.variants:
        from ..grading import variants

        roster = variants.load_roster(args.variants, variants.read_secret(args.secret_file))
        written = variants.build_variants(roster, args.exercises, args.out, args.lesson, args.release)
        print(
            f"wrote {counted(len(written), 'notebook')} for {counted(len(roster.students), 'student')} under {args.out}/"
        )
        return 0
    changed = build.build(args.solutions, args.exercises, check=args.check)
    if args.check:
        if changed:
            print("exercises/ is out of date with solutions/: " + ", ".join(changed))
            print("run: distlab exercises")
            return 1
        print("exercises/ matches solutions/")
        return 0
    print(
        f"built {counted(len(changed), 'changed exercise notebook')}" + (": " + ", ".join(changed) if changed else "")
    )
    return 0
