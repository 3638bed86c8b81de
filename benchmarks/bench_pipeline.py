"""Pipeline: timeline simulation at scale, and the bubble-grid app's redraw after a control change.

1. distlab.pipeline.schedule("interleaved", 64, 512, 4): 262,144 ops generated and simulated
   (target <= 1 s).
2. BubbleGridApp, the kernel side (the grid is drawn in the browser since issue 20; key press to
   pixels is measured in bench_browser_pictures.py): the m slider's echo in the kernel, and the
   controls that need new physics (all 64 microbatch counts simulated, described and packed).
"""

from __future__ import annotations

from _timing import repeat, repeat_in_event_loop, report, summarize


def bench_timeline(n: int = 7) -> dict:
    from distlab import pipeline

    stats = summarize(repeat(lambda i: pipeline.schedule("interleaved", 64, 512, 4), n))
    print(report("timeline: interleaved p=64, m=512, v=4", stats, 1000))
    return stats


def bench_widget(n: int = 200, refreshes: int = 12) -> dict:
    """The bubble grid is drawn in the browser (issue 20; the browser's own timing is bench_browser_pictures.py).
    Here the kernel side: the m slider's echo (the browser already drew it; the kernel only looks up the result
    it computed before) and a control that needs new physics (every microbatch count 1..64 simulated, described
    and packed for the browser, once per change)."""
    from distlab.widgets.pipeline import BubbleGridApp

    results = {}
    for p in (4, 8, 16):
        app = BubbleGridApp(kind="1f1b", stages=p, microbatches=48)
        values = list(range(33, 65))

        def slide(i, app=app, values=values):
            app.microbatches.value = values[(i + 1) % len(values)]

        stats = summarize(repeat(slide, n))
        results[f"m slider echo, p={p}"] = stats
        print(report(f"bubble grid: m slider kernel echo, 1f1b, p={p}", stats, 16))

    app = BubbleGridApp(kind="1f1b", stages=16, microbatches=64)
    ratios = [0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0]

    def ratio(i):
        app.backward.value = ratios[(i + 1) % len(ratios)]

    results.update(in_kernel(app, ratio, refreshes, "B:F change, p=16"))

    app = BubbleGridApp(kind="1f1b", stages=8, microbatches=64)
    stages = [2, 4, 8, 16]

    def depth(i):
        app.stages.value = stages[(i + 1) % len(stages)]

    results.update(in_kernel(app, depth, refreshes, "p change 2, 4, 8, 16"))
    return results


def in_kernel(app, change, n: int, name: str) -> dict:
    """A control that needs new physics, timed inside an event loop as the kernel runs it: until the control has
    answered (the current m simulated, the grid sent: the target), then until the other 63 counts are filled in
    the loop's later turns (widgets.common.fill_in_turns; the kernel serves the browser between turns)."""
    answered, filled = repeat_in_event_loop(change, n, lambda: app.filling)
    a, f = summarize(answered), summarize(filled)
    print(report(f"bubble grid: {name}: answered", a, 16))
    print(report(f"bubble grid: {name}: other 63 m filled after", f))
    return {f"{name}: answered": a, f"{name}: the rest filled, in turns": f}


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


def bench_after_1f1b(refreshes: int = 8) -> dict:
    """Lesson 11 §1 in the bubble grid: the schedule toggle over ZB-V, DualPipe and DualPipe-V (new physics: every
    microbatch count simulated again)."""
    from distlab.widgets.pipeline import BubbleGridApp

    app = BubbleGridApp(kind="zb-v", stages=16, microbatches=64)
    kinds = ["zb-v", "dualpipe", "dualpipe-v", "1f1b"]

    def toggle(i):
        app.kind.value = kinds[(i + 1) % len(kinds)]

    return in_kernel(app, toggle, refreshes, "schedule toggle zb-v/dualpipe/dualpipe-v/1f1b, p=16")


def main() -> None:
    bench_timeline()
    bench_widget()
    bench_panel()
    bench_after_1f1b()


if __name__ == "__main__":
    from _timing import no_arguments

    no_arguments(__doc__)
    main()
