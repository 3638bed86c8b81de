"""Tiny timing helpers shared by the benchmarks: median and p95 of repeated measurements."""

from __future__ import annotations

import statistics
import time


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
    return f"{name:<48} median {stats['median_ms']:8.2f} ms   p95 {stats['p95_ms']:8.2f} ms   (n={stats['n']}){verdict}"
