"""Lesson 10: the MoE formulas, the routing simulation, and every control of the three apps.

1. distlab.moe: moe_layer_cost and moe_step_cost (validated), expert_parallel_memory, and the routing
   simulation at the apps' sizes and at DeepSeek-V3's (64 GPUs x 64 tokens x 256 experts).
2. The apps: a control change -> observer -> distlab.moe -> artists updated in place -> the render and the
   PNG diff ipympl sends, all synchronous, inside the timed span (the front end's "initialized" message is
   replayed first, as in bench_tensor_mesh.py). Lines marked (CPU time) repeat some in CPU time of this
   process, which other jobs on a shared machine do not inflate.
"""

from __future__ import annotations

from _timing import repeat, repeat_cpu, report, summarize


def _cycle(widget, values):
    def change(i):
        now = values.index(widget.value) if widget.value in values else -1
        widget.value = values[(now + 1) % len(values)]
    return change


def main(n: int = 100) -> None:
    from distlab import moe

    moe.moe_layer_cost("deepseek-v3", "dgx-h100", seq_len=4096, ep=64, max_nodes=4)
    print(report("moe: moe_layer_cost (validated, EP 64 over 8 nodes)",
                 summarize(repeat(lambda i: moe.moe_layer_cost("deepseek-v3", "dgx-h100", seq_len=4096, ep=64,
                                                               max_nodes=4), n))))
    print(report("moe: moe_step_cost DeepSeek-V3, 2048 GPUs",
                 summarize(repeat(lambda i: moe.moe_step_cost("deepseek-v3", "dgx-h100", 2048, microbatches=120,
                                                              pp=16, ep=64, max_nodes=4), n))))
    print(report("moe: expert_parallel_memory",
                 summarize(repeat(lambda i: moe.expert_parallel_memory("deepseek-v3", 2048, pp=16, ep=64), n))))
    print(report("moe: simulate_routing 8 GPUs x 256 tokens x 16 experts",
                 summarize(repeat(lambda i: moe.simulate_routing(256, 16, 2, 8, skew=i % 4 / 2), n))))
    print(report("moe: simulate_routing 64 GPUs x 64 tokens x 256 experts",
                 summarize(repeat(lambda i: moe.simulate_routing(64, 256, 8, 64, skew=i % 4 / 2, ep_per_node=8,
                                                                 max_nodes=4), 30))))

    from distlab.widgets.mixture_of_experts import AllToAllApp, ImbalanceApp, PlacementApp

    def ready(app):
        app.canvas._handle_message(app.canvas, {"type": "initialized"}, [])  # what a browser sends first
        app.fig.canvas.draw()
        return app

    a = ready(AllToAllApp())
    controls = {
        "EP size": (a.ep, [4, 8, 16, 8]),
        "experts per GPU": (a.experts_per_gpu, [1, 2, 4, 2]),
        "top-k": (a.top_k, [1, 2]),
        "router skew": (a.skew, [0.0, 0.5, 1.0, 1.5]),
        "capacity": (a.capacity, [None, 1.0, 1.25]),
        "pairwise step": (a.step, [1, 3, 5, 7]),
    }
    for name, (widget, values) in controls.items():
        widget.value = values[0]
        print(report(f"all-to-all app: {name}", summarize(repeat(_cycle(widget, values), n)), 16))
    print(report("(CPU time) all-to-all app: router skew", summarize(repeat_cpu(_cycle(a.skew, [0.0, 0.5, 1.0]), n)),
                 16))

    b = ready(ImbalanceApp())
    controls = {
        "model": (b.model, ["mixtral-8x7b", "qwen3-235b-a22b", "gpt-oss-120b", "deepseek-v3"]),
        "EP size": (b.ep, [4, 8]),
        "router skew": (b.skew, [0.0, 0.5, 1.0, 1.5]),
        "capacity": (b.capacity, [None, 1.0, 1.25]),
    }
    for name, (widget, values) in controls.items():
        widget.value = values[0]
        print(report(f"imbalance app: {name}", summarize(repeat(_cycle(widget, values), n)), 16))
        if name == "model":
            b.model.value = "mixtral-8x7b"
    print(report("(CPU time) imbalance app: router skew",
                 summarize(repeat_cpu(_cycle(b.skew, [0.0, 0.5, 1.0]), n)), 16))

    c = ready(PlacementApp())
    controls = {
        "model": (c.model, ["deepseek-v3", "qwen3-235b-a22b", "mixtral-8x7b"]),
        "EP size": (c.ep, [8, 16, 32, 64]),
        "expert TP": (c.etp, [1, 2, 4]),
        "node limit": (c.max_nodes, [None, 1, 4]),
        "node": (c.node, ["dgx-h100", "dgx-a100", "hgx-b200"]),
    }
    c.ep.value = 64
    for name, (widget, values) in controls.items():
        if name == "EP size":
            c.model.value = "deepseek-v3"
        widget.value = values[0]
        print(report(f"placement app: {name}", summarize(repeat(_cycle(widget, values), n)), 16))
    print(report("(CPU time) placement app: EP size", summarize(repeat_cpu(_cycle(c.ep, [8, 16, 32, 64]), n)), 16))


if __name__ == "__main__":
    from _timing import no_arguments

    no_arguments(__doc__)
    main()
