"""Grading a class: notebooks per second and the grader's peak resident memory for N notebooks in one call.

N copies of the solved lesson-1 exercise (distinct files, self-study) are graded by
distlab.grading.classroom.grade_class, in this process, one fresh kernel per notebook, one
per student folder. Every $DISTLAB_BENCH_LOUD-th of them (default 50; 0 for none) is a loud one:
it also prints 200 kB in each of 300 extra cells (60 MB), so the grader's memory is measured
with what a hostile notebook prints. A sampler thread reads, every 0.1 s, the resident memory of
this process (the grader) and of all its descendants (the kernels); after the run it counts the
descendants left behind. Per-notebook times are the grades' own (median and 95th percentile).
N: the first argument or $DISTLAB_BENCH_NOTEBOOKS (default 200; ~3 s a notebook on one core).
"""

from __future__ import annotations

import json
import os
import re
import statistics
import resource
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

from _timing import against_record

ROOT = Path(__file__).resolve().parents[1]


def _rss_kib(pid: int) -> int:
    try:
        match = re.search(r"VmRSS:\s+(\d+)", Path(f"/proc/{pid}/status").read_text())
        return int(match.group(1)) if match else 0
    except OSError:
        return 0


def _descendants(pid: int) -> list[int]:
    children = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int(Path(entry, "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def main(n: int | None = None) -> None:
    sys.path.insert(0, str(ROOT / "tests" / "grading"))
    from class_helpers import solve

    from distlab.grading import classroom

    n = int(n or (sys.argv[1] if len(sys.argv) > 1 and sys.argv[1].isdigit() else 0)
            or os.environ.get("DISTLAB_BENCH_NOTEBOOKS", 200))
    work = Path(tempfile.mkdtemp(prefix="distlab-bench-grading-"))
    try:
        solved = solve(Path(shutil.copy(ROOT / "exercises" / "01_memory_wall.ipynb", work / "solved.ipynb")),
                       "memory_wall", None)
        folder = work / "class"
        folder.mkdir()
        loud_every = int(os.environ.get("DISTLAB_BENCH_LOUD", 50))
        loud_cells = [
            {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
             "source": "print('x' * 200_000)"}
        ] * 300
        loud = 0
        for i in range(n):
            nb = json.loads(solved.read_text())
            nb["metadata"]["student"] = i
            if loud_every and i % loud_every == loud_every - 1:
                nb["cells"] += loud_cells
                loud += 1
            (folder / f"s{i:04d}").mkdir()
            (folder / f"s{i:04d}" / "01_memory_wall.ipynb").write_text(json.dumps(nb))
        me = os.getpid()
        before = len(_descendants(me))
        before_load = os.getloadavg()[0]
        peak = {"grader": _rss_kib(me), "kernels": 0, "processes": 0}
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                peak["grader"] = max(peak["grader"], _rss_kib(me))
                kids = _descendants(me)
                peak["kernels"] = max(peak["kernels"], sum(_rss_kib(k) for k in kids))
                peak["processes"] = max(peak["processes"], len(kids))
                stop.wait(0.1)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        started = time.perf_counter()
        report = classroom.grade_class([folder], work / "grades", progress=False)
        elapsed = time.perf_counter() - started
        stop.set()
        sampler.join()
        time.sleep(1.0)
        left = len(_descendants(me)) - before
        full = sum(g.score == g.max_score for g in report.notebooks)
        seconds = sorted(g.seconds for g in report.notebooks)
        p95 = seconds[min(len(seconds) - 1, int(0.95 * len(seconds)))]
        print(f"grading a class of {n} notebooks ({loud} loud): {n / elapsed:.2f} notebooks/s "
              f"({elapsed / n:.2f} s each, {elapsed:.1f} s in all), {full}/{n} full marks; per notebook median "
              f"{statistics.median(seconds):.2f} s, p95 {p95:.2f} s, max {seconds[-1]:.2f} s; load average "
              f"before/after {before_load:.1f}/{os.getloadavg()[0]:.1f}"
              + against_record(f"grading a class of {n}: time per notebook", round(elapsed / n, 3), "s"))
        print(f"  grader peak RSS {peak['grader'] / 1024:.0f} MiB"
              + against_record(f"grading a class of {n}: grader peak RSS", round(peak["grader"] / 1024), "MiB")
              + " (ru_maxrss "
              f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB); kernels' peak RSS together "
              f"{peak['kernels'] / 1024:.0f} MiB, at most {peak['processes']} child process(es) at once; "
              f"{left} left behind after the run")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    from _timing import no_arguments

    no_arguments(__doc__)
    main()
