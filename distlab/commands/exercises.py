"""distlab exercises: build exercises/ from solutions/ (strip the solution blocks)."""

from __future__ import annotations

NAME = "exercises"
HELP = "build exercises/ from solutions/ (strip the solution blocks)"


def add_arguments(ex) -> None:
    ex.add_argument("--solutions", default="solutions")
    ex.add_argument("--exercises", default="exercises")
    ex.add_argument("--check", action="store_true", help="only report whether exercises/ is up to date (exit 1 if not)")


def run(args) -> int:
    from ..grading import build

    changed = build.build(args.solutions, args.exercises, check=args.check)
    if args.check:
        if changed:
            print("exercises/ is out of date with solutions/: " + ", ".join(changed))
            print("run: distlab exercises")
            return 1
        print("exercises/ matches solutions/")
        return 0
    print(f"built {len(changed)} changed exercise notebook(s)" + (": " + ", ".join(changed) if changed else ""))
    return 0


