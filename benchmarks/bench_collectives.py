"""Ring all-reduce: the simulation at N = 1024, and one frame of the lesson-2 animation.

1. simulate_ring_all_reduce on 1024 simulated GPUs, each holding 1024 int64 (one element per
   chunk): 2046 steps, every send recorded. The input arrays are built once, outside the timing.
2. The animation is drawn in the browser (issue 20; key press to pixels: bench_browser_pictures.py).
   Here the kernel side: a step's echo (the result looked up for the app) and an N change (a new
   simulation, every state and the text of every step packed for the browser).
"""

from __future__ import annotations

from _timing import repeat, report, summarize


def main(n: int = 300, sim_repeats: int = 7) -> None:
    import numpy as np

    from distlab import collectives
    from distlab.widgets.collectives import RingAllReduceApp

    gpus = 1024
    arrays = [np.full(gpus, g, dtype=np.int64) for g in range(gpus)]
    collectives.simulate_ring_all_reduce(arrays[:8])  # warm up imports and caches
    stats = summarize(repeat(lambda i: collectives.simulate_ring_all_reduce(arrays), sim_repeats))
    print(report("ring all-reduce simulation, N = 1024", stats, 1000))

    app = RingAllReduceApp(gpus=4)
    for size in (4, 8, 16):
        app.gpus.value = size
        states = app.trace.steps + 1

        def step(i):
            app.step.value = (app.step.value + 1) % states  # the browser drew it: the kernel's echo only

        print(report(f"ring step: kernel echo, N = {size}", summarize(repeat(step, n)), 16))

    sizes = [4, 8, 16, 12]

    def rebuild(i):
        app.gpus.value = sizes[i % len(sizes)]

    print(report("ring N change: simulate, every state and text packed", summarize(repeat(rebuild, 24))))


if __name__ == "__main__":
    from _timing import no_arguments

    no_arguments(__doc__)
    main()
