"""Ring all-reduce: the simulation at N = 1024, and one frame of the lesson-2 animation.

1. simulate_ring_all_reduce on 1024 simulated GPUs, each holding 1024 int64 (one element per
   chunk): 2046 steps, every send recorded. The input arrays are built once, outside the timing.
2. The animation frame: the step slider moves one state (as the Play button does), which runs
   the observer -> the precomputed paths of that state swapped onto the existing artists -> the
   blit -> the PNG diff ipympl sends, plus the caption in the HTML panel; all synchronous,
   all inside the timed span. As in bench_memory_widget.py, the front end's "initialized"
   message is replayed first, as a browser sends it when the canvas appears.
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
    app.canvas._handle_message(app.canvas, {"type": "initialized"}, [])  # what a browser sends first
    for size in (4, 8, 16):
        app.gpus.value = size
        app.fig.canvas.draw()
        states = app.trace.steps + 1

        def step(i):
            app.step.value = (app.step.value + 1) % states  # always a change, as Play advances

        print(report(f"ring animation frame (step change), N = {size}", summarize(repeat(step, n)), 16))

    app.gpus.value = 16

    def full_draw(i):
        app.step.value = (app.step.value + 1) % (app.trace.steps + 1)
        app.fig.canvas.draw()

    print(report("(reference) N = 16 step + forced full redraw", summarize(repeat(full_draw, n // 3))))

    sizes = [4, 8, 16, 12]

    def rebuild(i):
        app.gpus.value = sizes[i % len(sizes)]

    print(report("(reference) N change: simulate, precompute, redraw", summarize(repeat(rebuild, 24))))


if __name__ == "__main__":
    main()
