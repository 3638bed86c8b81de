"""Training-lab calculator (lesson 7): time from a control change to the redrawn figure, median and p95.

Each sample sets one control (the EP size and expert TP on an MoE model too): the matmul-efficiency slider (continuous: a blit of the bars when the
axes stay), the fabric dropdown, or the ZeRO stage (which crosses the fit line: an infeasible
configuration also prices the single-change fixes of training.explain_infeasible). That runs the
observer -> distlab.training.estimate -> in-place artist update -> render + ipympl's PNG diff, all
inside the timed span, after replaying the front end's "initialized" message (bench_memory_widget.py).
"""

from __future__ import annotations

from _timing import repeat, report, summarize


def main(n: int = 200) -> None:
    from distlab.widgets.training_lab import TrainingLabApp

    app = TrainingLabApp()
    app.canvas._handle_message(app.canvas, {"type": "initialized"}, [])  # what a browser sends first
    app.fig.canvas.draw()
    effs = [0.4, 0.5, 0.6, 0.7]  # the compute dropdown's fixed shares (EFFICIENCY_OPTIONS)
    fabrics = ["ethernet-100g", "ib-hdr", "ib-ndr"]

    def slider(i):
        app.efficiency.value = effs[i % len(effs)]

    def fabric(i):
        app.fabric.value = fabrics[(i + 1) % len(fabrics)]

    def zero(i):
        app.zero.value = (i + 1) % 4  # ZeRO-0 and -1 do not fit here: the fixes are priced too

    print(report("training lab update: efficiency slider", summarize(repeat(slider, n)), 16))
    print(report("training lab update: fabric dropdown", summarize(repeat(fabric, n)), 16))
    print(report("training lab update: ZeRO stage (crosses the fit line)", summarize(repeat(zero, n)), 16))
    app.zero.value = 2
    recipes = ["deepspeed", "fsdp2", "zero-paper"]  # the engines that run ZeRO-2
    cps = [1, 2, 4]

    def recipe(i):
        app.memory_recipe.value = recipes[(i + 1) % len(recipes)]

    def cp(i):
        app.cp.value = cps[(i + 1) % len(cps)]

    print(report("training lab update: memory recipe dropdown", summarize(repeat(recipe, n)), 16))
    print(report("training lab update: CP dropdown (context parallelism)", summarize(repeat(cp, n)), 16))
    app.memory_recipe.value, app.cp.value = "deepspeed", 1
    # the MoE controls (issue 16): on Mixtral-8x7B, the EP size and expert TP (Lesson 10)
    app.zero.value = 2  # the lab's default (the ZeRO loop above ends on a stage that does not fit)
    app.model.value = "mixtral-8x7b"
    eps = [1, 2, 4, 8]

    def ep(i):
        app.ep.value = eps[(i + 1) % len(eps)]

    def etp(i):
        app.etp.value = None if i % 2 else 1

    print(report("training lab update: EP size (Mixtral-8x7B)", summarize(repeat(ep, n)), 16))
    print(report("training lab update: expert TP (Mixtral-8x7B)", summarize(repeat(etp, n)), 16))
    app.model.value, app.ep.value, app.etp.value = "llama3.1-70b", 1, None
    from distlab import hardware, training

    cluster = hardware.cluster("dgx-h100", 32, "ib-ndr")
    config = app.config()
    print(report("(reference) one training.estimate (the lab's default)",
                 summarize(repeat(lambda i: training.estimate("llama3.1-70b", cluster, **config), n))))
    calls = []
    original = app.renderer.refresh
    app.renderer.refresh = lambda full=False: calls.append(full)
    no_render = summarize(repeat(slider, n))
    app.renderer.refresh = original
    print(report("(reference) slider, model and artists, no render", no_render)
          + f"; full redraws the slider needed: {sum(calls)} of {len(calls)}")


if __name__ == "__main__":
    main()
