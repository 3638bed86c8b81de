"""Lessons 5 and 6: rank layouts at scale, the TP cost model, and the two apps' update latency.

1. distlab.mesh at 16,384 GPUs (tp=8, cp=2, pp=16, dp=64): build the layout, list the groups of
   every dimension and say which cross nodes (what the training lab asks of it).
2. distlab.tensor: one validated tp_layer_cost, and the plain-float fast path (tp_comm_time,
   layer_flops_array) over 10,000 configurations at once.
3. The apps: a control change -> observer -> distlab -> artists updated in place -> the render and
   the PNG diff ipympl sends, all synchronous, all inside the timed span. As in
   bench_memory_widget.py, the front end's "initialized" message is replayed first.
   Tensor-parallel app: TP degree, sequence length, link (the axes never change: always a blit).
   Grid app: drawn in the browser since issue 20: the kernel side only (pick a GPU: its echo; colour-by: the
   fills resent; D, T, P, node size, order: a new layout, timed inside an event loop until answered and filled).
   Lines marked (CPU time) repeat some of these in CPU time of this process, which other jobs on a
   shared machine do not inflate.
"""

from __future__ import annotations

from _timing import repeat, repeat_cpu, repeat_in_event_loop, report, summarize


def _mesh_at_scale(i):
    from distlab import mesh

    lay = mesh.layout(16384, tp=8, cp=2, pp=16, gpus_per_node=8)
    for d in ("tp", "cp", "dp", "pp"):
        lay.groups(d)
        lay.crosses_nodes(d)
    return lay


def main(n: int = 200) -> None:
    import numpy as np

    from distlab import models, tensor

    _mesh_at_scale(0)  # warm up imports
    print(report("mesh: layout + groups + node crossing, 16,384 GPUs", summarize(repeat(_mesh_at_scale, 30)), 100))

    tensor.tp_layer_cost("llama2-7b", 8, seq_len=4096, link="nvlink4")
    print(report("tensor: tp_layer_cost (validated, 4 collectives)",
                 summarize(repeat(lambda i: tensor.tp_layer_cost("llama2-7b", 8, seq_len=4096, link="ib-ndr"), n))))
    m = models.model("llama2-7b")
    rng = np.random.default_rng(0)
    tp = 2 ** rng.integers(0, 4, 10_000)
    seq = 2 ** rng.integers(9, 16, 10_000)

    def sweep(i):
        size = tensor.tp_message_bytes(1, seq, m.hidden, 2.0)
        comm = tensor.tp_comm_time(size, tp, 450e9, 3.4e-6)
        flops = tensor.layer_flops_array(m.params_per_layer(), m.hidden, 1, seq, tp)
        return comm / (flops / 989.4e12)

    print(report("tensor: fast path, 10,000 configurations", summarize(repeat(sweep, 50))))

    from distlab.widgets.parallelism_3d import MeshApp
    from distlab.widgets.tensor_parallel import TensorParallelApp

    app = TensorParallelApp()
    app.canvas._handle_message(app.canvas, {"type": "initialized"}, [])  # what a browser sends first
    app.fig.canvas.draw()
    degrees, seqs, links = [1, 2, 4, 8], [1024, 2048, 4096, 8192, 16384], ["nvlink4", "ib-ndr", "pcie5"]

    def tp_slider(i):
        app.tp.value = degrees[(degrees.index(app.tp.value) + 1) % len(degrees)]

    def seq_slider(i):
        app.seq_len.value = seqs[(seqs.index(app.seq_len.value) + 1) % len(seqs)]

    def link(i):
        app.link.value = links[(links.index(app.link.value) + 1) % len(links)]

    print(report("TP app: TP degree slider -> redrawn figure", summarize(repeat(tp_slider, n)), 16))
    print(report("TP app: sequence slider -> redrawn figure", summarize(repeat(seq_slider, n)), 16))
    print(report("TP app: link dropdown -> redrawn figure", summarize(repeat(link, n)), 16))
    print(report("(CPU time) TP app: TP degree slider", summarize(repeat_cpu(tp_slider, n)), 16))

    # the grid is drawn in the browser (issue 20; key press to pixels: bench_browser_pictures.py): picking a GPU
    # costs the kernel only its echo; the colour choice resends the fills; D, T, P, node size and order build a new
    # layout: the picked GPU's text answers (the target), the other GPUs' texts fill in the loop's later turns
    grid = MeshApp(dp=4, tp=4, pp=4)
    colours = ["tp", "dp", "pp", "stage", "node"]
    orders = ["tp-dp-pp", "tp-pp-dp", "pp-dp-tp"]

    def pick(i):
        grid.pick.value = (grid.pick.value + 7) % grid.result.world_size

    def colour(i):
        grid.colour_by.value = colours[(colours.index(grid.colour_by.value) + 1) % len(colours)]

    def d_slider(i):
        grid.dp.value = 5 if grid.dp.value == 4 else 4

    def t_slider(i):
        grid.tp.value = 2 if grid.tp.value == 4 else 4

    def p_slider(i):
        grid.pp.value = 2 if grid.pp.value == 4 else 4

    def node(i):
        grid.gpus_per_node.value = 4 if grid.gpus_per_node.value == 8 else 8

    def order(i):
        grid.order.value = orders[(orders.index(grid.order.value) + 1) % len(orders)]

    print(report("grid picture (64 GPUs): pick a GPU, kernel echo", summarize(repeat(pick, n)), 16))
    print(report("grid picture (64 GPUs): colour by (fills resent)", summarize(repeat(colour, n)), 16))
    for name, change in (
        ("D slider 64 <-> 80 GPUs", d_slider),
        ("T slider", t_slider),
        ("P slider", p_slider),
        ("GPUs/node", node),
        ("order", order),
    ):
        answered, filled = repeat_in_event_loop(change, n // 5, lambda: grid.filling)
        print(report(f"grid picture: {name}: answered", summarize(answered), 16))
        print(report(f"grid picture: {name}: other GPUs' texts filled after", summarize(filled)))
    grid.dp.value, grid.tp.value, grid.pp.value = 16, 8, 4
    print(report("grid picture (512 GPUs): pick a GPU, kernel echo", summarize(repeat(pick, n)), 16))
    print(report("grid picture (512 GPUs): colour by (fills resent)", summarize(repeat(colour, n)), 16))
    answered, filled = repeat_in_event_loop(d_slider, n // 5, lambda: grid.filling)
    print(report("grid picture: D slider 512 <-> 640 GPUs: answered", summarize(answered), 16))

if __name__ == "__main__":
    from _timing import no_arguments

    no_arguments(__doc__)
    main()
