"""Pipeline: timeline simulation at scale, and the bubble-grid app's redraw after a control change.

1. distlab.pipeline.schedule("interleaved", 64, 512, 4): 262,144 ops generated and simulated
   (target <= 1 s).
2. BubbleGridApp: time from a control change to the redrawn figure, median and p95, for a
   few settings up to p = 16, m = 64 (target <= 16 ms). Each sample sets one control, which
   runs the observer -> distlab.pipeline (schedule, closed form, activation memory) -> the
   image of the timeline -> the render: a blit of the image and the two lines when the axes
   stay the same, a full Agg draw when they change, each followed by the PNG diff ipympl
   sends to the browser (all synchronous, all inside the timed span). As in
   bench_memory_widget.py, the front end's "initialized" message is replayed first.
"""

from __future__ import annotations

from _timing import repeat, report, summarize


def bench_timeline(n: int = 7) -> dict:
    from distlab import pipeline

    stats = summarize(repeat(lambda i: pipeline.schedule("interleaved", 64, 512, 4), n))
    print(report("timeline: interleaved p=64, m=512, v=4", stats, 1000))
    return stats


def bench_widget(n: int = 200) -> dict:
    from distlab.widgets.pipeline import BubbleGridApp

    results = {}

    def app_at(kind, p, m):
        app = BubbleGridApp(kind=kind, stages=p, microbatches=m)
        app.canvas._handle_message(app.canvas, {"type": "initialized"}, [])  # what a browser sends first
        app.fig.canvas.draw()
        return app

    # m slider at p = 4, 8, 16 (1F1B): m sweeps 33..64, the ranges a student drags through
    for p in (4, 8, 16):
        app = app_at("1f1b", p, 48)
        values = list(range(33, 65))

        def slide(i, app=app, values=values):
            app.microbatches.value = values[i % len(values)] if app.microbatches.value != values[i % len(values)] \
                else values[(i + 1) % len(values)]

        stats = summarize(repeat(slide, n))
        results[f"m slider, p={p}"] = stats
        print(report(f"bubble grid: m slider 33..64, 1f1b, p={p}", stats, 16))

    app = app_at("1f1b", 16, 64)
    ratios = [0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0]

    def ratio(i):
        app.backward.value = ratios[(i + 1) % len(ratios)]

    stats = summarize(repeat(ratio, n))
    results["B:F slider, p=16, m=64"] = stats
    print(report("bubble grid: B:F slider, 1f1b, p=16, m=64", stats, 16))

    app = app_at("1f1b", 16, 64)
    kinds = ["gpipe", "1f1b", "interleaved", "zb-h1"]

    def schedule(i):
        app.kind.value = kinds[(i + 1) % len(kinds)]

    stats = summarize(repeat(schedule, n))
    results["schedule toggle, p=16, m=64, v=2"] = stats
    print(report("bubble grid: schedule toggle, p=16, m=64, v=2", stats, 16))

    app = app_at("1f1b", 8, 64)
    stages = [2, 4, 8, 16]

    def depth(i):
        app.stages.value = stages[(i + 1) % len(stages)]

    stats = summarize(repeat(depth, n))
    results["p slider 2/4/8/16, m=64"] = stats
    print(report("bubble grid: p slider 2, 4, 8, 16 (rows change), m=64", stats, 16))

    app = app_at("1f1b", 8, 48)

    def forced(i):
        app.microbatches.value = 33 + (i % 32) if app.microbatches.value != 33 + (i % 32) else 64
        app.fig.canvas.draw()

    stats = summarize(repeat(forced, n // 2))
    results["forced full redraw"] = stats
    print(report("(reference) m slider p=8 + forced full redraw", stats))

    values = list(range(33, 65))
    calls = []
    original = app.renderer.refresh
    app.renderer.refresh = lambda full=False: calls.append(full)

    def no_render(i):
        app.microbatches.value = values[i % len(values)] if app.microbatches.value != values[i % len(values)] \
            else values[(i + 1) % len(values)]

    stats = summarize(repeat(no_render, n))
    app.renderer.refresh = original
    results["no render"] = stats
    print(report("(reference) m slider p=8, model + artists, no render", stats)
          + f"; full redraws needed: {sum(calls)} of {len(calls)}")
    return results


def bench_panel(n: int = 40) -> dict:
    """The stage-analysis panel: analyze_stages (with its computed suggestions) and the redraw."""
    from distlab.widgets.pipeline import StageAnalysisApp

    app = StageAnalysisApp(model="llama2-70b", stages=8, microbatches=16, link="ib-ndr")
    app.canvas._handle_message(app.canvas, {"type": "initialized"}, [])
    app.fig.canvas.draw()
    values = [8, 16, 24, 32, 48, 64]

    def slide(i):
        app.microbatches.value = values[(i + 1) % len(values)]

    stats = summarize(repeat(slide, n))
    print(report("(reference) stage-analysis panel: m, p = 8, ib-ndr", stats))
    return stats


def bench_after_1f1b(n: int = 200) -> dict:
    """Lesson 11 §1 in the bubble grid: the schedule toggle over ZB-V, DualPipe and DualPipe-V, and the m
    slider under DualPipe-V (fused F&B pairs, two chunks per stage: twice the ops of 1F1B)."""
    from distlab.widgets.pipeline import BubbleGridApp

    results = {}
    app = BubbleGridApp(kind="zb-v", stages=16, microbatches=64)
    app.canvas._handle_message(app.canvas, {"type": "initialized"}, [])
    app.fig.canvas.draw()
    kinds = ["zb-v", "dualpipe", "dualpipe-v", "1f1b"]

    def toggle(i):
        app.kind.value = kinds[(i + 1) % len(kinds)]

    stats = summarize(repeat(toggle, n))
    results["schedule toggle zb-v/dualpipe/dualpipe-v/1f1b, p=16, m=64"] = stats
    print(report("bubble grid: toggle zb-v, dualpipe, dualpipe-v, 1f1b, p=16, m=64", stats, 16))

    app.kind.value, app.stages.value = "dualpipe-v", 8
    values = list(range(33, 65))

    def slide(i):
        app.microbatches.value = values[(i + 1) % len(values)]

    stats = summarize(repeat(slide, n))
    results["m slider 33..64, dualpipe-v, p=8"] = stats
    print(report("bubble grid: m slider 33..64, dualpipe-v, p=8", stats, 16))
    return results


def main() -> None:
    bench_timeline()
    bench_widget()
    bench_panel()
    bench_after_1f1b()


if __name__ == "__main__":
    main()
