"""`import distlab` time in a fresh interpreter (median of 15 runs), minus the bare interpreter start.

Also times importing distlab.memory (which loads pint) and the lesson-1 widget module
(which loads matplotlib, ipywidgets and ipympl), for context.
"""

from __future__ import annotations

import subprocess
import sys

from _timing import report, summarize


def time_subprocess(code: str, runs: int = 15) -> list[float]:
    script = f"import time; t = time.perf_counter(); {code}; print(time.perf_counter() - t)"
    return [float(subprocess.check_output([sys.executable, "-c", script], text=True)) for _ in range(runs)]


def main() -> None:
    print(report("import distlab", summarize(time_subprocess("import distlab")), 500))
    print(report("import distlab.memory (pint)", summarize(time_subprocess("import distlab.memory"))))
    print(report("import distlab.widgets.memory_wall", summarize(time_subprocess("import distlab.widgets.memory_wall", 7))))


if __name__ == "__main__":
    from _timing import no_arguments

    no_arguments(__doc__)
    main()
