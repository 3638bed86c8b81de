"""Run every benchmark (each benchmarks/bench_*.py with a main()): python benchmarks/run.py [NAME ...].

Record the printed figures in benchmarks/RESULTS.md with the machine and the date.
"""

from __future__ import annotations

import datetime
import importlib
import os
import platform
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

if __name__ == "__main__":
    wanted = set(sys.argv[1:])
    print(f"{datetime.date.today()}  Python {platform.python_version()}  {platform.machine()}  "
          f"{os.cpu_count()} CPUs  {platform.platform()}")
    for path in sorted(HERE.glob("bench_*.py")):
        if wanted and path.stem not in wanted and path.stem.removeprefix("bench_") not in wanted:
            continue
        importlib.import_module(path.stem).main()
