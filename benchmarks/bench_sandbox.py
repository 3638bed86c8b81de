"""The grading sandbox's cost per notebook: one trivial notebook graded N times in each mode.

"bwrap" (the allow-list sandbox: student view, private /tmp, unprivileged user, every namespace) against
"trusted" (the same kernel, no bubblewrap): wall time of grade_notebook per notebook, median and p95, and
the difference, which is what the sandbox adds. Also the one-off cost of building the student view.
N: the first argument or $DISTLAB_BENCH_SANDBOX (default 15).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def main(n: int | None = None) -> None:
    import nbformat
    import nbformat.v4 as v4

    from distlab.grading import grade, student_view

    n = int(n or (sys.argv[1] if len(sys.argv) > 1 and sys.argv[1].isdigit() else 0)
            or os.environ.get("DISTLAB_BENCH_SANDBOX", 15))
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        student_view.build(Path(scratch) / "view")
    print(f"student view built in {time.perf_counter() - started:.2f} s (once per grading process)")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "01_memory_wall.ipynb"
        nb = v4.new_notebook(cells=[v4.new_code_cell("from distlab.lessons.memory_wall import q1\nanswer_q1 = 16")])
        nb.metadata["distlab"] = {"lesson": "memory_wall"}
        nbformat.write(nb, path)
        grade.grade_notebook(path, sandbox="bwrap")  # warm: the student view, imports
        times: dict[str, list[float]] = {"bwrap": [], "trusted": []}
        for _ in range(n):
            for mode in times:  # interleaved, so a change of load hits both
                t = time.perf_counter()
                result = grade.grade_notebook(path, sandbox=mode)
                times[mode].append(time.perf_counter() - t)
                assert result.questions[0].status == "correct", result.problems
    for mode, values in times.items():
        print(f"{mode:8s} per notebook: median {statistics.median(values):.2f} s, p95 {_p95(values):.2f} s (n = {n})")
    added = [b - t for b, t in zip(times["bwrap"], times["trusted"])]
    print(f"sandbox overhead per notebook: median {statistics.median(added):.2f} s, p95 {_p95(added):.2f} s")


if __name__ == "__main__":
    from _timing import no_arguments

    no_arguments(__doc__)
    main()
