"""Training-lab calculator (lesson 7): time from a control change until the app has answered, median and p95.

The bars are drawn in the browser (distlab.widgets.browser.LabPicture, issue 20): a control that changes the
physics prices the current node count and sends it (the answer, timed here inside an asyncio event loop as a kernel
runs the callback); the other node counts are priced in the loop's later turns (reported apart). Each sample sets
one control (the EP size and expert TP on an MoE model too): the compute dropdown, the fabric dropdown, or the ZeRO
stage (which crosses the fit line: an infeasible configuration also prices the single-change fixes of
triage.explain_infeasible); the node slider is the picture's own (answered in the browser; in the kernel the batch
dropdown follows it).
"""

from __future__ import annotations

from _timing import repeat, repeat_in_event_loop, report, summarize


def main(n: int = 200) -> None:
    from distlab.widgets.training_lab import NODE_COUNTS, TrainingLabApp

    app = TrainingLabApp()
    filling = lambda: app.filling  # noqa: E731

    def timed(label: str, move) -> None:
        answered, filled = repeat_in_event_loop(move, n, filling)
        print(report(f"training lab: {label} (answered)", summarize(answered), 16))
        print(report(f"training lab: {label} (the rest filled, later turns)", summarize(filled)))

    effs = [0.4, 0.5, 0.6, 0.7]  # the compute dropdown's fixed shares (EFFICIENCY_OPTIONS)
    fabrics = ["ethernet-100g", "ib-hdr", "ib-ndr"]
    timed("compute dropdown", lambda i: setattr(app.efficiency, "value", effs[i % len(effs)]))
    timed("fabric dropdown", lambda i: setattr(app.fabric, "value", fabrics[(i + 1) % len(fabrics)]))
    # ZeRO-0 and -1 do not fit here: the fixes are priced too
    timed("ZeRO stage (crosses the fit line)", lambda i: setattr(app.zero, "value", (i + 1) % 4))
    app.zero.value = 2
    timed("node slider (kernel side)", lambda i: setattr(app.nodes, "value", NODE_COUNTS[i % len(NODE_COUNTS)]))
    app.nodes.value = 32
    recipes = ["deepspeed", "fsdp2", "zero-paper"]  # the engines that run ZeRO-2
    cps = [1, 2, 4]
    timed("memory recipe dropdown", lambda i: setattr(app.memory_recipe, "value", recipes[(i + 1) % len(recipes)]))
    timed("CP dropdown (context parallelism)", lambda i: setattr(app.cp, "value", cps[(i + 1) % len(cps)]))
    app.memory_recipe.value, app.cp.value = "deepspeed", 1
    # the MoE controls (issue 16): on Mixtral-8x7B, the EP size and expert TP (Lesson 10)
    app.model.value = "mixtral-8x7b"
    eps = [1, 2, 4, 8]
    timed("EP size (Mixtral-8x7B)", lambda i: setattr(app.ep, "value", eps[(i + 1) % len(eps)]))
    timed("expert TP (Mixtral-8x7B)", lambda i: setattr(app.etp, "value", None if i % 2 else 1))
    app.model.value, app.ep.value, app.etp.value = "llama3.1-70b", 1, None
    from distlab import hardware, training

    cluster = hardware.cluster("dgx-h100", 32, "ib-ndr")
    config = app.config()
    print(report("(reference) one training.estimate (the lab's default)",
                 summarize(repeat(lambda i: training.estimate("llama3.1-70b", cluster, **config), n))))


if __name__ == "__main__":
    from _timing import no_arguments

    no_arguments(__doc__)
    main()
