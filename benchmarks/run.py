"""Run the benchmarks (each benchmarks/bench_*.py with a main()): python benchmarks/run.py [NAME ...].

Each figure is printed beside the one recorded for it in RESULTS.md (its "Recorded figures" table), with the load
then and now and the machine's reference time then and now (_timing.machine_reference_ms); one more than 15% slower,
for the machine's speed, says REGRESSION. `--record` writes this run's figures into that table.
"""

from __future__ import annotations

import argparse
import ast
import datetime
import importlib
import os
import platform
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def benchmarks() -> dict[str, Path]:
    """Every benchmark by its short name (bench_planner.py -> planner)."""
    return {path.stem.removeprefix("bench_"): path for path in sorted(HERE.glob("bench_*.py"))}


def summary(path: Path) -> str:
    """The first line of a benchmark's docstring (read, not imported: listing runs nothing)."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return doc.splitlines()[0] if doc else ""


def commit() -> str:
    """The checkout's commit (short), with '+changes' when the work tree differs from it; '?' outside git."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=HERE,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"
    return head + ("+changes" if dirty else "")


def parser() -> argparse.ArgumentParser:
    listing = "\n".join(f"  {name:<22} {summary(path)}" for name, path in benchmarks().items())
    p = argparse.ArgumentParser(
        prog="benchmarks/run.py",
        description="Run distlab's speed benchmarks and compare each figure with the one recorded in "
        "benchmarks/RESULTS.md (with the machine's load average then and now). Run on a quiet machine: "
        "`uptime` shows the load; the other jobs on a shared machine slow every figure.",
        epilog=f"benchmarks:\n{listing}\n\nReproduce a recorded figure: check out the commit its row names and run "
        "`.venv/bin/python benchmarks/run.py NAME` at a load as low as the row's.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("names", nargs="*", metavar="NAME", help="benchmarks to run (default: all), e.g. planner")
    p.add_argument("--record", action="store_true",
                   help="write this run's figures into RESULTS.md's recorded table (date, commit, load)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    known = benchmarks()
    wanted = [n.removeprefix("bench_") for n in args.names] or list(known)
    unknown = [n for n in wanted if n not in known]
    if unknown:
        noun = "benchmark" if len(unknown) == 1 else "benchmarks"
        print(f"run.py: unknown {noun} {', '.join(unknown)}; known: {', '.join(known)}", file=sys.stderr)
        return 2
    import _timing

    load_before = _timing.load()
    head = commit()
    print(f"{datetime.date.today()}  commit {head}  Python {platform.python_version()}  {platform.machine()}  "
          f"{os.cpu_count()} CPUs  {platform.platform()}  load {load_before:.2f}  "
          f"reference work {_timing.machine_reference_ms():.1f} ms ({_timing.REFERENCE_WORK})")
    for name in wanted:
        print(f"== {name}: reproduce with `.venv/bin/python benchmarks/run.py {name}` at commit {head} "
              f"(load now {_timing.load():.2f})", flush=True)
        importlib.import_module(known[name].stem).main()
    load_after = _timing.load()
    print(f"load average {load_before:.2f} before, {load_after:.2f} after")
    if args.record and _timing.MEASURED:
        _timing.record(_timing.MEASURED, str(datetime.date.today()), head, max(load_before, load_after))
        print(f"recorded {len(_timing.MEASURED)} figure(s) in {_timing.RESULTS.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
