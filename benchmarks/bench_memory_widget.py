"""Memory-wall app: time from a control change to the redrawn figure, median and p95.

Each sample sets one control (GPU count, ZeRO stage or model, cycling). That runs the
observer -> distlab.memory -> in-place artist update -> the render: a blit of the bars when
the axes stay the same, a full Agg draw when they change, each followed by the PNG diff
encode that ipympl sends to the browser (all synchronous, all inside the timed span).

The front end's "initialized" message is replayed first, as a browser sends it when the
canvas appears: from then on ipympl sends diffs only and stops re-encoding a full PNG for
the saved-notebook preview on every frame (headless, it would keep doing both).
"""

from __future__ import annotations

from _timing import repeat, report, summarize


def main(n: int = 300) -> None:
    from distlab.widgets.memory_wall import MemoryWallApp

    app = MemoryWallApp(model="llama2-7b", gpu="h100-sxm")
    app.canvas._handle_message(app.canvas, {"type": "initialized"}, [])  # what a browser sends first
    app.fig.canvas.draw()
    models = ["llama2-7b", "llama2-70b", "llama3.1-8b", "gpt3-175b"]

    from distlab.widgets.common import GPU_COUNTS

    def slider(i):
        app.gpus.value = GPU_COUNTS[(i + 1) % len(GPU_COUNTS)]  # always a change, over every stop

    def stage(i):
        app.zero.value = (i + 1) % 4

    def model(i):
        app.model.value = models[(i + 1) % len(models)]

    print(report("memory-wall update: GPU-count slider", summarize(repeat(slider, n)), 16))
    print(report("memory-wall update: ZeRO stage", summarize(repeat(stage, n)), 16))
    print(report("memory-wall update: model dropdown", summarize(repeat(model, n)), 16))

    def full_draw(i):
        app.gpus.value = GPU_COUNTS[(i + 1) % len(GPU_COUNTS)]
        app.fig.canvas.draw()

    print(report("(reference) slider + forced full redraw", summarize(repeat(full_draw, n))))
    calls = []
    original = app.renderer.refresh
    app.renderer.refresh = lambda full=False: calls.append(full)
    no_render = summarize(repeat(slider, n))
    app.renderer.refresh = original
    print(report("(reference) slider, model and artists, no render", no_render)
          + f"; full redraws the slider needed: {sum(calls)} of {len(calls)}")


if __name__ == "__main__":
    main()
