"""Lesson 3 apps (ZeroMemoryApp, OverlapApp): time from a control change to the redrawn figure, median and p95.

Every control of both apps. ZeroMemoryApp's bars are drawn in the browser (issue 20; key press to pixels:
bench_browser_pictures.py): its GPU-count slider costs the kernel only its echo; the model, GPU type, fabric and
custom size price every GPU count of the slider, timed inside an event loop as a kernel runs them (the current
count answered, then the other 45 filled in later turns: widgets.common.fill_in_turns). OverlapApp's
model, GPU count, fabric, backward time and bucket count. Each sample sets one control; the observer ->
distlab.memory / distlab.dataparallel -> in-place artist update -> render + ipympl's PNG diff all run inside the
timed span, after replaying the front end's "initialized" message (bench_memory_widget.py says why).
"""

from __future__ import annotations

from _timing import repeat, repeat_in_event_loop, report, summarize


def main(n: int = 200) -> None:
    from distlab.widgets.common import GPU_COUNTS
    from distlab.widgets.data_parallel_zero import CUSTOM, OverlapApp, ZeroMemoryApp

    app = ZeroMemoryApp()
    models = ["llama2-7b", "llama2-70b", "llama3.1-8b", "gpt3-175b"]
    gpus = ["h100-sxm", "a100-80gb", "a100-40gb"]
    fabrics = ["ib-ndr", "ib-hdr", "ethernet-100g"]

    def model(i):
        app.model.value = models[(i + 1) % len(models)]

    def gpu(i):
        app.gpu.value = gpus[(i + 1) % len(gpus)]

    def slider(i):
        app.gpus.value = GPU_COUNTS[(i + 1) % len(GPU_COUNTS)]  # always a change, over every stop

    def fabric(i):
        app.fabric.value = fabrics[(i + 1) % len(fabrics)]

    def size(i):
        app.model.value = CUSTOM
        app.custom_params.value = 5.0 + (i % 20)

    # the bars are drawn in the browser (issue 20): the slider costs the kernel only its echo; the other controls
    # price the current count (answered, the target), then the other 45 in the event loop's later turns
    print(report("ZeRO bars: GPU-count slider, kernel echo", summarize(repeat(slider, n)), 16))
    for name, change in (
        ("model dropdown", model),
        ("GPU type dropdown", gpu),
        ("fabric dropdown", fabric),
        ("custom size (B)", size),
    ):
        answered, filled = repeat_in_event_loop(change, n // 5, lambda: app.filling)
        print(report(f"ZeRO bars: {name}: answered", summarize(answered), 16))
        print(report(f"ZeRO bars: {name}: other 45 counts filled after", summarize(filled)))

    overlap = OverlapApp()
    overlap.canvas._handle_message(overlap.canvas, {"type": "initialized"}, [])
    overlap.fig.canvas.draw()

    def o_model(i):
        overlap.model.value = models[(i + 1) % len(models)]

    def o_gpus(i):
        overlap.gpus.value = GPU_COUNTS[(i + 1) % len(GPU_COUNTS)]

    def o_fabric(i):
        overlap.fabric.value = fabrics[(i + 1) % len(fabrics)]

    def o_backward(i):
        overlap.backward_ms.value = 200.0 + 10.0 * (i % 100)

    def o_buckets(i):
        overlap.buckets.value = 1 + (i % 64)

    print(report("overlap update: model dropdown", summarize(repeat(o_model, n)), 16))
    print(report("overlap update: GPU-count slider", summarize(repeat(o_gpus, n)), 16))
    print(report("overlap update: fabric dropdown", summarize(repeat(o_fabric, n)), 16))
    print(report("overlap update: backward-time slider", summarize(repeat(o_backward, n)), 16))
    print(report("overlap update: bucket slider", summarize(repeat(o_buckets, n)), 16))


if __name__ == "__main__":
    from _timing import no_arguments

    no_arguments(__doc__)
    main()
