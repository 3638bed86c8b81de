"""Tiny timing helpers shared by the benchmarks: median and p95 of repeated measurements, each figure compared with
the one last recorded in RESULTS.md (its "Recorded figures" table, which `run.py --record` rewrites).

The machine's speed is measured with each figure: a fixed reference workload (REFERENCE_WORK: Python dict and integer
work, then numpy element-wise passes, the two kinds of work the benchmarks time) is timed when a figure is recorded and
again when it is compared. This 2-core machine's speed varied by about half from one day to another at the same load
(the planner's recorded commit ran 27.7 ms, then 36.5 ms, then about 52 ms: benchmarks/RESULTS.md, sessions 24 and
25), so a figure is judged on its time scaled by the reference's, and the raw change is printed beside it."""

from __future__ import annotations

import os
import re
import statistics
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
BEGIN, END = "<!-- recorded figures: begin -->", "<!-- recorded figures: end -->"

#: a figure this much above its record is reported as a regression (repeated runs here vary by about 10%)
SLOWER_BY = 0.15

#: every figure printed in this process: name -> (value, unit), for `run.py --record`
MEASURED: dict[str, tuple[float, str]] = {}


#: What machine_reference_ms times: about 30-60 ms of CPU on this machine (a dict of 1,024 keys updated 200,000 times,
#: then 20 square-root passes over 200,000 floats).
REFERENCE_WORK = "200,000 dict updates + 20 numpy passes over 200,000 floats"

_REFERENCE: list[float] = []


def _reference_work(_index: int = 0) -> None:
    import numpy as np

    counts: dict[int, int] = {}
    for i in range(200_000):
        counts[i & 1023] = counts.get(i & 1023, 0) + i
    values = np.arange(200_000, dtype=float)
    for _ in range(20):
        values = np.sqrt(values * 1.0001 + 1.0)


def machine_reference_ms() -> float:
    """The median of 9 timings (after one warm-up) of REFERENCE_WORK, in ms of wall time: this machine's speed now,
    measured once per process."""
    if not _REFERENCE:
        _reference_work()
        _REFERENCE.append(statistics.median(repeat(_reference_work, 9)) * 1e3)
    return _REFERENCE[0]


def load() -> float:
    """The machine's load average over the last minute (what `uptime` shows first)."""
    return os.getloadavg()[0]


def recorded(results: Path = RESULTS) -> dict[str, dict]:
    """The figures in RESULTS.md's recorded table: name -> {value, unit, date, commit, load, reference} (reference:
    machine_reference_ms when the figure was recorded, None for a row recorded before the reference existed)."""
    text = results.read_text(encoding="utf-8") if results.exists() else ""
    if BEGIN not in text:
        return {}
    table = text.split(BEGIN, 1)[1].split(END, 1)[0]
    figures = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) not in (6, 7) or not re.fullmatch(r"[0-9.]+", cells[1]):
            continue  # the header, its rule, or prose
        name = cells[0].strip("`")
        reference = float(cells[6]) if len(cells) == 7 and re.fullmatch(r"[0-9.]+", cells[6]) else None
        figures[name] = {"value": float(cells[1]), "unit": cells[2], "date": cells[3], "commit": cells[4],
                         "load": cells[5], "reference": reference}
    return figures


def against_record(name: str, value: float, unit: str, figures: dict[str, dict] | None = None) -> str:
    """`value` (lower is better) beside the figure recorded for `name`, with the load then and now. Where the record
    has the machine's reference time, `value` is first scaled by reference then / reference now (the same code on a
    machine running the reference 40% slower takes 40% longer), and the raw change is named too. A figure more than
    SLOWER_BY above its record, after that scaling, says REGRESSION. Empty when nothing is recorded for `name`."""
    MEASURED[name] = (value, unit)
    rec = (recorded() if figures is None else figures).get(name)
    if rec is None or rec["unit"] != unit or rec["value"] <= 0:
        return ""
    raw = value / rec["value"] - 1
    where = (f"recorded {rec['value']:g} {unit} on {rec['date']} at {rec['commit']}, load {rec['load']}; "
             f"load now {load():.2f}")
    if rec.get("reference"):
        now = machine_reference_ms()
        speed = now / rec["reference"] - 1
        change = value * rec["reference"] / now / rec["value"] - 1
        where += (f"; the machine runs the reference work {_signed(speed)} "
                  f"than then ({now:.1f} ms against {rec['reference']:g} ms), {_signed(raw)} before that is allowed for")
        what = "than recorded, for this machine's speed"
    else:
        change = raw
        where += "; no reference time recorded: the machine's speed then is unknown"
        what = "than recorded"
    if change > SLOWER_BY:
        return f"  REGRESSION: {change:.0%} slower {what} ({where})"
    if change > 0:
        return f"  {change:.0%} slower {what}, within {SLOWER_BY:.0%} ({where})"
    return f"  {-change:.0%} faster {what} ({where})"


def _signed(change: float) -> str:
    """'20% slower' or '5% faster' (no change: '0% faster')."""
    return f"{abs(change):.0%} {'slower' if change > 0 else 'faster'}"


def summarize(samples_s: list[float]) -> dict:
    ordered = sorted(samples_s)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    return {
        "n": len(ordered),
        "median_ms": statistics.median(ordered) * 1e3,
        "p95_ms": p95 * 1e3,
        "min_ms": ordered[0] * 1e3,
    }


def repeat(fn, n: int) -> list[float]:
    samples = []
    for i in range(n):
        start = time.perf_counter()
        fn(i)
        samples.append(time.perf_counter() - start)
    return samples


def repeat_cpu(fn, n: int) -> list[float]:
    """Like repeat but in CPU time of this process: what an update costs when the machine is shared (the
    updates are synchronous and do no I/O, so on an idle machine wall time ~ CPU time)."""
    samples = []
    for i in range(n):
        start = time.process_time()
        fn(i)
        samples.append(time.process_time() - start)
    return samples


def repeat_in_event_loop(fn, n: int, pending, clock=time.perf_counter) -> tuple[list[float], list[float]]:
    """fn(i) run n times inside a running asyncio event loop, as a kernel runs a widget's callback: the time until
    fn returns (the control has answered: the current position is drawn), and then the time until the work it left
    for the loop's later turns is done (`pending()`: the awaitable it left, or None). `clock`: time.process_time
    counts this process's CPU only."""
    import asyncio

    async def run():
        answered, filled = [], []
        for i in range(n):
            start = clock()
            fn(i)
            answered.append(clock() - start)
            start = clock()
            work = pending()
            if work is not None:
                await work
            filled.append(clock() - start)
        return answered, filled

    return asyncio.run(run())


def report(name: str, stats: dict, target_ms: float | None = None) -> str:
    verdict = ""
    if target_ms is not None:
        verdict = f"  target <= {target_ms:g} ms: {'met' if stats['median_ms'] <= target_ms else 'MISSED'}"
    return (f"{name:<48} median {stats['median_ms']:8.2f} ms   p95 {stats['p95_ms']:8.2f} ms   (n={stats['n']}){verdict}"
            + against_record(name, round(stats["median_ms"], 3), "ms median"))


def record(measured: dict[str, tuple[float, str]], date: str, commit: str, load_then: float,
           results: Path = RESULTS, reference_ms: float | None = None) -> None:
    """Write `measured` into RESULTS.md's recorded table (a new row per name, or the row of that name replaced), with
    the machine's reference time (machine_reference_ms, measured now unless given)."""
    reference_ms = machine_reference_ms() if reference_ms is None else reference_ms
    text = results.read_text(encoding="utf-8")
    if BEGIN not in text:
        text = text.rstrip("\n") + (
            "\n\n## Recorded figures (what each benchmark compares itself with)\n\n"
            "The last figure `benchmarks/run.py --record` wrote for each benchmark, with the date, the commit and the\n"
            "load average when it was measured, and the machine's reference time then (REFERENCE_WORK in\n"
            "benchmarks/_timing.py). A benchmark prints its figure beside the recorded one, scaled by the reference\n"
            f"time now over then, and says REGRESSION when that is more than {SLOWER_BY:.0%} slower. Reproduce one at its commit: "
            "`git checkout COMMIT && .venv/bin/python benchmarks/run.py NAME` on a machine whose load is as low.\n\n"
            f"{BEGIN}\n{END}\n")
    head, rest = text.split(BEGIN, 1)
    table, tail = rest.split(END, 1)
    rows = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) in (6, 7) and re.fullmatch(r"[0-9.]+", cells[1]):
            rows[cells[0].strip("`")] = "| " + " | ".join(cells + [""] * (7 - len(cells))) + " |"
    for name, (value, unit) in measured.items():
        rows[name] = f"| `{name}` | {value:g} | {unit} | {date} | {commit} | {load_then:.2f} | {reference_ms:.2f} |"
    lines = ["| benchmark | figure | unit | date | commit | load | reference ms |", "|---|---|---|---|---|---|---|",
             *rows.values()]
    results.write_text(head + BEGIN + "\n" + "\n".join(lines) + "\n" + END + tail, encoding="utf-8")


def no_arguments(doc: str | None) -> None:
    """A benchmark run as a script with no options of its own: `--help` prints its docstring (how to reproduce it)
    and runs nothing; any other argument is refused with argparse's message."""
    import argparse

    parser = argparse.ArgumentParser(description=(doc or "").strip(), formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.parse_args()
