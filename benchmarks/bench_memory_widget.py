"""Memory-wall app, the kernel side: a control change to the data sent to the browser, median and p95.

The bars are drawn in the browser since issue 20 (key press to pixels: bench_browser_pictures.py). The GPU
slider lives in the picture: a move costs the kernel only its echo (the result computed before, looked up).
The ZeRO stage and the model change the physics: every GPU count of the slider (46) is priced by
distlab.memory.training_memory, described and sent. Timed inside an event loop as a kernel runs them: until the
control has answered (the current count priced and sent: the target), then until the other 45 counts are filled in
the loop's later turns (distlab.widgets.common.fill_in_turns; the kernel serves the browser between turns).
"""

from __future__ import annotations

from _timing import repeat, repeat_in_event_loop, report, summarize


def main(n: int = 300) -> None:
    from distlab.widgets.common import GPU_COUNTS
    from distlab.widgets.memory_wall import MemoryWallApp

    app = MemoryWallApp(model="llama2-7b", gpu="h100-sxm")
    models = ["llama2-7b", "llama2-70b", "llama3.1-8b", "gpt3-175b"]

    def slider(i):
        app.gpus.value = GPU_COUNTS[(i + 1) % len(GPU_COUNTS)]  # always a change, over every stop

    def stage(i):
        app.zero.value = (i + 1) % 4

    def model(i):
        app.model.value = models[(i + 1) % len(models)]

    print(report("memory wall: GPU slider, kernel echo", summarize(repeat(slider, n)), 16))
    for name, change in (("ZeRO stage", stage), ("model dropdown", model)):
        answered, filled = repeat_in_event_loop(change, n // 5, lambda: app.filling)
        print(report(f"memory wall: {name}: answered", summarize(answered), 16))
        print(report(f"memory wall: {name}: other 45 counts filled after", summarize(filled)))

if __name__ == "__main__":
    from _timing import no_arguments

    no_arguments(__doc__)
    main()
