"""Lesson 10 apps: the all-to-all of an MoE layer, load imbalance and capacity, and EP inside vs across nodes.

AllToAllApp:   EP size, experts per GPU, top-k, router skew, capacity, pairwise step -> distlab.moe.simulate_routing
               -> the GPU-to-GPU byte matrix (filled step by step) and each GPU's accepted and dropped tokens.
ImbalanceApp:  catalog model, EP size, router skew, capacity -> the routing simulation's imbalance and drops ->
               distlab.moe.moe_layer_cost: one MoE layer's expert time (balanced vs busiest GPU) and all-to-all.
PlacementApp:  model, EP size, expert TP, node limit, node type -> distlab.mesh.expert_layout and moe_layer_cost:
               the all-to-all's NVLink and network parts.
"""

from __future__ import annotations

import ipywidgets as widgets
import numpy as np

from .. import hardware, mesh, moe
from ..errors import ConfigurationError
from ..plots.mixture_of_experts import (
    DROP_COLOUR,
    INTER_COLOUR,
    INTRA_COLOUR,
    LOAD_COLOUR,
    byte_matrix,
    byte_matrix_scale,
    load_bars,
    load_legend_html,
    time_bars,
)
from ..units import format_bytes, format_seconds
from .._words import counted
from .common import BlitRenderer, LessonApp, OptionalDropdown, figure_canvas, replace_options
from .framecache import FrameCachingApp
from .layouts import OffersWhatRuns

__all__ = [
    "EP_SIZES",
    "EXPERTS_PER_GPU",
    "TOP_K",
    "CAPACITIES",
    "HIDDEN",
    "SAMPLE_SCORES",
    "MODELS",
    "NODES",
    "SEQ_LEN",
    "ep_choices",
    "ep_after",
    "NODE_LIMITS",
    "ep_span",
    "limit_after",
    "AllToAllApp",
    "ImbalanceApp",
    "PlacementApp",
    "APPS",
]

EP_SIZES = (2, 4, 8, 16)
EXPERTS_PER_GPU = (1, 2, 4, 8)
TOP_K = (1, 2, 4, 8)
#: Capacity factor choices: None is dropless.
CAPACITIES = (("dropless", None), ("1.0", 1.0), ("1.25", 1.25), ("1.5", 1.5), ("2.0", 2.0))
HIDDEN = 4096
#: Router scores the imbalance app simulates per update (tokens per GPU = this / (ep x experts), 16 to 1024).
SAMPLE_SCORES = 2**15
MODELS = tuple(moe.MOE_MODELS)
NODES = ("dgx-h100", "dgx-a100", "hgx-b200")
SEQ_LEN = 4096


class AllToAllApp(OffersWhatRuns, FrameCachingApp, LessonApp):
    """One MoE layer's dispatch all-to-all in an EP group, simulated: who sends how much to whom, step by step.

    `result` is the RoutingTrace (None on invalid input), `error` our message instead. The EP size, experts per GPU
    and top-k offer only what routes (top-k at most the ep x experts/GPU experts: OffersWhatRuns), saying why not
    the rest; none moves.
    """

    layout_controls = ("ep", "experts_per_gpu", "top_k")

    def __init__(self, ep=8, experts_per_gpu=2, top_k=2, skew=0.0, capacity=None, step=7, tokens_per_gpu=256):
        self.tokens_per_gpu = tokens_per_gpu
        self.ep = widgets.SelectionSlider(options=EP_SIZES, value=ep, description="EP size")
        self.experts_per_gpu = widgets.SelectionSlider(
            options=EXPERTS_PER_GPU, value=experts_per_gpu, description="experts/GPU"
        )
        self.top_k = widgets.SelectionSlider(options=TOP_K, value=top_k, description="top-k")
        self.skew = widgets.FloatSlider(value=skew, min=0.0, max=3.0, step=0.25, description="router skew")
        self.capacity = OptionalDropdown(options=CAPACITIES, value=capacity, description="capacity")
        self.step = widgets.IntSlider(value=step, min=0, max=15, description="pairwise step")
        self.status = widgets.HTML()
        self.fig, self.canvas = figure_canvas(
            (6.2, 2.5), dict(left=0.08, right=0.98, bottom=0.18, top=0.95, wspace=0.3)
        )
        self.matrix = byte_matrix(self.fig.add_subplot(1, 2, 1), fixed=True)
        self.loads = load_bars(self.fig.add_subplot(1, 2, 2), max(EP_SIZES))
        self.loads.ticks.remember(range(max(EP_SIZES)))  # every GPU number, once (the matrix's ticks share them)
        self.renderer = BlitRenderer(self.canvas, self.matrix.animated_artists + self.loads.animated_artists)
        for control in (self.ep, self.experts_per_gpu, self.top_k, self.skew, self.capacity, self.step):
            control.observe(self._on_layout_change, names="value")
        legend = widgets.HTML(load_legend_html())
        super().__init__(
            [
                widgets.VBox(
                    [
                        widgets.HBox([self.ep, self.experts_per_gpu]),
                        widgets.HBox([self.top_k, self.skew]),
                        widgets.HBox([self.capacity, self.step]),
                    ]
                ),
                legend,
                self.canvas,
                self.status,
            ]
        )
        self.offer_what_runs()
        self.update()

    def refusal(self, values: dict) -> str | None:
        """Why top-k cannot route among the ep x experts/GPU experts (moe.simulate_routing refuses it), or None."""
        ep, per_gpu, k = values["ep"], values["experts_per_gpu"], values["top_k"]
        return f"{ep} x {per_gpu} = {ep * per_gpu} experts, fewer than top-k {k}" if k > ep * per_gpu else None

    # no EP size changes the axes (the matrix fills a fixed square, the bars a fixed range, the GPU numbers are
    # drawn ticks): only the neighbours' routing results are prepared
    #: the step only changes what is drawn: its neighbours need no preparing, and moving it prepares nothing new
    prepared_controls = ("ep", "experts_per_gpu", "top_k", "skew", "capacity")
    drawing_controls = ("step",)

    def compute(self) -> moe.RoutingTrace:
        """distlab.moe.simulate_routing for the controls (the step only changes what is drawn)."""
        return self.compute_for(self.values())

    def compute_for(self, values: dict) -> moe.RoutingTrace:
        """distlab.moe.simulate_routing for these control values."""
        return moe.simulate_routing(
            self.tokens_per_gpu,
            values["ep"] * values["experts_per_gpu"],
            values["top_k"],
            values["ep"],
            hidden=HIDDEN,
            skew=values["skew"],
            capacity_factor=values["capacity"],
        )

    def _delivered(self, ep: int) -> np.ndarray:
        i = np.arange(ep)
        return ((i[None, :] - i[:, None]) % ep) <= min(self.value_of("step"), ep - 1)

    def render(self, tr: moe.RoutingTrace) -> bool:
        full = self.matrix.update(tr.bytes_matrix, self._delivered(tr.ep))
        per_gpu_demand = tr.demand.reshape(tr.ep, -1).sum(axis=1)
        capacity = None if tr.capacity is None else tr.capacity * tr.ep * (tr.experts // tr.ep)
        full = self.loads.update(tr.gpu_load, per_gpu_demand - tr.gpu_load, capacity, tr.copies / tr.ep) or full
        return full

    def fade(self) -> bool:
        if self.result is None and self.matrix.size == 0:
            return False
        self.matrix.image.set_alpha(0.25)
        return False

    def describe(self, tr: moe.RoutingTrace) -> str:
        closed = moe.all_to_all_bytes(
            tr.tokens_per_gpu,
            tr.hidden,
            tr.top_k,
            tr.ep,
            experts=tr.experts,
            capacity_factor=None if tr.capacity is None else self.value_of("capacity"),
        )
        sent = tr.bytes_sent()
        step = min(self.value_of("step"), tr.ep - 1)
        lines = [
            f"{tr.tokens_per_gpu} tokens per GPU x top-{tr.top_k}, h = {HIDDEN}, bf16: each GPU's send buffer "
            f"{format_bytes(closed['send_buffer'])}; to other GPUs (closed form, uniform routing) "
            f"{format_bytes(closed['intra'])} [moe.all_to_all_bytes]; simulated {format_bytes(sent.mean())} on "
            f"average, busiest {format_bytes(sent.max())} [moe.simulate_routing]",
            f"pairwise exchange: step s sends GPU i's block for GPU (i + s) mod {tr.ep}; shown after step {step} of "
            f"{tr.ep - 1} (step 0 is the GPU's own block, which never leaves it)",
            f"left, colour: white 0 MB to the darkest blue {byte_matrix_scale(tr.bytes_matrix):g} MB; the largest "
            f"block {float(np.max(tr.bytes_matrix)) / 1e6:.3g} MB",
            f"busiest GPU processes x{tr.imbalance:.2f} the mean [moe.imbalance_factor]"
            + (
                ""
                if tr.capacity is None
                else f"; capacity {tr.capacity} per expert per source GPU [moe.expert_capacity]: "
                f"{100 * tr.drop_fraction:.1f}% of copies dropped"
            ),
        ]
        return "\n".join(lines)


def ep_choices(model) -> tuple:
    """The EP sizes lesson 10's Imbalance and Placement apps offer for `model`: the powers of two up to 256 that divide
    its experts."""
    m = moe.model(model)
    return tuple(d for d in (1, 2, 4, 8, 16, 32, 64, 128, 256) if m.experts % d == 0)


def ep_after(ep: int, model) -> int:
    """The EP size those apps move to when the model becomes `model`: `ep` when it still divides the experts, else 8
    (or the largest offered, below 8). One home for the apps' observer and their frame cache's neighbours."""
    options = ep_choices(model)
    return ep if ep in options else min(8, options[-1])


class _ExpertModelBase(FrameCachingApp, LessonApp):
    """A lesson-10 app with a model dropdown whose change re-offers the EP sizes that divide its experts (ep_choices,
    ep_after); the browser caches the picture of every state one control change away (distlab.widgets.framecache)."""

    _syncing = False

    def _on_change(self, change=None):
        if self._syncing:
            return
        if change is not None and change.get("owner") is self.model:
            options = ep_choices(self.model.value)
            if tuple(self.ep.options) != options or self.ep.value not in options:
                replace_options(self, self.ep, options, ep_after(self.ep.value, self.model.value))
        self._follow(change)
        self.update(change)

    def _follow(self, change=None) -> None:
        """Controls that follow the others, after the EP size (none here)."""

    def frame_neighbour(self, state: dict, name: str, value) -> dict:
        """The state after the student sets `name` to `value`: a new model moves the EP size as the observer does."""
        after = {**state, name: value}
        if name == "model":
            after["ep"] = ep_after(state["ep"], value)
        return after


class ImbalanceApp(_ExpertModelBase):
    """Router skew and capacity -> drops and the time of one MoE layer (expert GEMMs of the busiest GPU vs the
    balanced share, and the all-to-alls), for a catalog model on DGX H100 nodes, one 4,096-token microbatch.

    The imbalance comes from the routing simulation (a sample of tokens, seeded); the times from
    moe.moe_layer_cost at the GPU's bf16 peak.

    The result is a pure function of the control values (compute_for), and carries the capacity factor its text
    names. Dependent control: the EP sizes offered follow the model (those dividing its experts; _on_change, ep_after).
    """

    prepared_controls = ("model", "ep", "skew", "capacity")

    def __init__(self, model="mixtral-8x7b", ep=8, skew=0.5, capacity=None):
        self.model = widgets.Dropdown(options=MODELS, value=model, description="model")
        self.ep = widgets.SelectionSlider(options=ep_choices(model), value=ep, description="EP size")
        self.skew = widgets.FloatSlider(value=skew, min=0.0, max=3.0, step=0.25, description="router skew")
        self.capacity = OptionalDropdown(options=CAPACITIES, value=capacity, description="capacity")
        self.status = widgets.HTML()
        self.fig, self.canvas = figure_canvas((6.4, 2.0), dict(left=0.27, right=0.9, bottom=0.2, top=0.95))
        self.bars = time_bars(
            self.fig.add_subplot(),
            ["experts, balanced", "experts, busiest GPU", "all-to-alls (4)"],
            [LOAD_COLOUR, DROP_COLOUR, INTRA_COLOUR],
        )
        self.renderer = BlitRenderer(self.canvas, self.bars.animated_artists)
        for control in (self.model, self.ep, self.skew, self.capacity):
            control.observe(self._on_change, names="value")
        legend = widgets.HTML(
            '<div style="font-size:12px"><b>one MoE layer, one microbatch of 4,096 tokens per '
            "GPU, forward + backward</b>, log time axis, at the H100 bf16 peak</div>"
        )
        super().__init__(
            [
                widgets.VBox([widgets.HBox([self.model, self.ep]), widgets.HBox([self.skew, self.capacity])]),
                legend,
                self.canvas,
                self.status,
            ]
        )
        self.update()

    def compute(self) -> dict:
        """The simulated imbalance and drops (moe.simulate_routing), then moe.moe_layer_cost with them."""
        return self.compute_for(self.values())

    def compute_for(self, values: dict) -> dict:
        """moe.simulate_routing, then moe.moe_layer_cost, for these control values (under a millisecond: the
        routing's seeded scores are cached by distlab.moe, the rest is not remembered)."""
        m = moe.model(values["model"])
        ep, capacity = values["ep"], values["capacity"]
        if ep not in ep_choices(m):
            raise ConfigurationError(f"ep={ep} does not divide the {m.experts} experts of {m.name}")
        tokens = int(min(1024, max(16, SAMPLE_SCORES // (ep * m.experts))))
        trace = moe.simulate_routing(
            tokens, m.experts, m.top_k, ep, hidden=m.hidden, skew=values["skew"], capacity_factor=capacity
        )
        layer = moe.moe_layer_cost(
            m,
            "dgx-h100",
            seq_len=SEQ_LEN,
            ep=ep,
            etp=1,
            capacity_factor=capacity,
            imbalance=min(trace.imbalance, ep),
        )
        peak = hardware.accelerator("h100-sxm").peak("bf16")
        return dict(model=m, trace=trace, layer=layer, peak=peak, capacity=capacity, noise=_noise_floor(trace, m))

    def render(self, r: dict) -> bool:
        layer = r["layer"]
        return self.bars.update(
            [layer.balanced_expert_flops / r["peak"], layer.expert_flops / r["peak"], layer.all_to_all_time_s]
        )

    def fade(self) -> bool:
        self.bars.update([None, None, None], faded=True)
        return False

    def status_kind(self, r: dict) -> str:
        return "bad" if r["trace"].imbalance > 1.5 or r["trace"].drop_fraction > 0.05 else "ok"

    def describe(self, r: dict) -> str:
        tr, layer, m = r["trace"], r["layer"], r["model"]
        lines = [
            f"{m.name}: {m.experts} experts, top-{m.top_k}, on {tr.ep} GPUs ({m.experts // tr.ep} per GPU); "
            f"simulated {tr.tokens_per_gpu} tokens per GPU [moe.simulate_routing, seed {tr.seed}]",
            f"busiest expert x{tr.expert_imbalance:.2f}{r['noise']}, busiest GPU x{tr.imbalance:.2f} the "
            f"mean [moe.imbalance_factor]"
            + (
                ""
                if tr.capacity is None
                else f" of the copies kept; padded to capacity every GPU computes x{layer.imbalance:g} the balanced "
                "work [moe.busiest_expert_load]"
            )
            + _expert_time(layer, r["peak"]),
        ]
        if tr.capacity is None:
            lines.append("dropless: no token is dropped, so the busiest GPU's load is unbounded (and so is its memory)")
        else:
            lines.append(
                f"capacity factor {r['capacity']:g}: {100 * tr.drop_fraction:.1f}% of the token "
                f"copies dropped (they skip the expert) [moe.expert_capacity]; the dispatch is padded to "
                f"capacity, so the all-to-all carries the padding too"
            )
        lines.append(
            f"all-to-alls: {format_bytes(layer.all_to_all_intra_bytes)} over NVLink + "
            f"{format_bytes(layer.all_to_all_inter_bytes)} across nodes per GPU, "
            f"{format_seconds(layer.all_to_all_time_s)} ({layer.link})"
        )
        return "\n".join(lines)


#: Fewer expected copies per expert than this in the routing sample: its busiest expert's factor carries sampling noise.
NOISY_COPIES = 30


def _noise_floor(trace, m) -> str:
    """Where the simulated sample gives each expert few copies (tokens x ep x top_k / experts < NOISY_COPIES), the
    busiest expert's factor of the same sample without skew: the noise floor of the sample alone (a Poisson count of
    mean c varies by sqrt(c); deepseek-v3 on 8 GPUs, 16 tokens each: 4 copies an expert, x2.5 at skew 0, against x1.16
    with 1,024 tokens each). The skew's own factor is not noise (x8.0 at skew 0.5 with 16 tokens, x7.8 with 1,024)."""
    copies = trace.tokens_per_gpu * trace.ep * m.top_k / m.experts
    if copies >= NOISY_COPIES:
        return ""
    floor = moe.simulate_routing(trace.tokens_per_gpu, m.experts, m.top_k, trace.ep, hidden=m.hidden, skew=0.0)
    return f" (x{floor.expert_imbalance:.2f} at skew 0: {copies:.0f} copies an expert in the sample, its own noise)"


#: The node limits the placement app offers (DeepSeek-V3's node-limited routing: M = 4); None is no limit.
NODE_LIMITS = (("no limit", None), ("1", 1), ("2", 2), ("4", 4), ("8", 8))


def ep_span(ep: int, etp: int, node: str) -> int:
    """The nodes an EP group of `ep` members, `etp` ranks apart, spans on `node` (Megatron's expert layout:
    moe.ep_members_per_node): a node limit above it limits nothing, and compute_for refuses it."""
    return ep // moe.ep_members_per_node(etp=etp, ep=ep, gpus_per_node=hardware.node(node).gpus_per_node)


def limit_after(chosen, span: int):
    """The node limit shown for the student's `chosen` one where the EP group spans `span` nodes: `chosen` up to the
    span, else the span (no limit stays no limit). One home for the app's observer and its frame cache's neighbours."""
    return None if chosen is None else min(chosen, span)


class PlacementApp(_ExpertModelBase):
    """Where the EP group sits: EP size and expert TP on a node type -> members per node (Megatron's expert
    layout) and the all-to-all's NVLink and network times for one MoE layer, one 4,096-token microbatch.

    The result is a pure function of the control values (compute_for). Dependent control: the EP sizes offered
    follow the model (those dividing its experts; _on_change, ep_after)."""

    prepared_controls = ("model", "ep", "etp", "max_nodes", "node")

    def __init__(self, model="deepseek-v3", ep=8, etp=1, max_nodes=None, node="dgx-h100"):
        self.model = widgets.Dropdown(options=MODELS, value=model, description="model")
        self.ep = widgets.SelectionSlider(options=ep_choices(model), value=ep, description="EP size")
        self.etp = widgets.SelectionSlider(options=(1, 2, 4, 8), value=etp, description="expert TP")
        self.max_nodes = OptionalDropdown(
            options=(("no limit", None), ("1", 1), ("2", 2), ("4", 4), ("8", 8)),
            value=max_nodes,
            description="node limit",
        )
        self.node = widgets.Dropdown(options=NODES, value=node, description="node")
        self.max_nodes._distlab_chosen = max_nodes  # the student's limit, shown while the EP group spans it
        self.status = widgets.HTML()
        self.fig, self.canvas = figure_canvas((6.4, 1.8), dict(left=0.22, right=0.9, bottom=0.22, top=0.95))
        self.bars = time_bars(self.fig.add_subplot(), ["NVLink part", "network part"], [INTRA_COLOUR, INTER_COLOUR])
        self.renderer = BlitRenderer(self.canvas, self.bars.animated_artists)
        for control in (self.model, self.ep, self.etp, self.max_nodes, self.node):
            control.observe(self._on_change, names="value")
        legend = widgets.HTML(
            '<div style="font-size:12px"><b>the 4 all-to-alls of one MoE layer</b> (one '
            "microbatch of 4,096 tokens per GPU, bf16), per GPU, log time axis; the two parts run "
            "at once, the longer one sets the time</div>"
        )
        super().__init__(
            [
                widgets.VBox(
                    [widgets.HBox([self.model, self.ep]), widgets.HBox([self.etp, self.node]), self.max_nodes]
                ),
                legend,
                self.canvas,
                self.status,
            ]
        )
        self._follow()
        self.update()

    def _follow(self, change=None) -> None:
        """The node limit offers only limits up to the nodes the EP group spans (one above it would only be refused),
        saying why; the student's limit comes back once the group spans it (limit_after)."""
        if change is not None and change.get("owner") is self.max_nodes:
            self.max_nodes._distlab_chosen = self.max_nodes.value
        span = ep_span(self.ep.value, self.etp.value, self.node.value)
        options = tuple(o for o in NODE_LIMITS if o[1] is None or o[1] <= span)
        value = limit_after(self.max_nodes._distlab_chosen, span)
        if tuple(self.max_nodes.options) != options or self.max_nodes.value != value:
            replace_options(self, self.max_nodes, options, value)
        above = ", ".join(label for label, limit in NODE_LIMITS if limit is not None and limit > span)
        self.max_nodes.tooltip = (
            f"not offered here: {above} (the EP group spans {span} node{'s' * (span > 1)})" if above else None
        )

    def frame_neighbour(self, state: dict, name: str, value) -> dict:
        """The state after the student sets `name` to `value`: a new model moves the EP size, and the node limit
        follows the nodes the group spans, as the observer does (ep_after, limit_after)."""
        after = super().frame_neighbour(state, name, value)
        chosen = value if name == "max_nodes" else getattr(self.max_nodes, "_distlab_chosen", state["max_nodes"])
        after["max_nodes"] = limit_after(chosen, ep_span(after["ep"], after["etp"], after["node"]))
        return after

    def compute(self) -> dict:
        """mesh.expert_layout for one EP group x etp, then moe.all_to_all_bytes / all_to_all_time."""
        return self.compute_for(self.values())

    def compute_for(self, values: dict) -> dict:
        """mesh.expert_layout, moe.all_to_all_bytes and all_to_all_time for these control values (a fraction of a
        millisecond: not remembered)."""
        m = moe.model(values["model"])
        ep, etp = values["ep"], values["etp"]
        node = hardware.node(values["node"])
        g = node.gpus_per_node
        gpus = ep * etp
        nodes = max(1, -(-gpus // g))
        if gpus > g and gpus % g:
            raise ConfigurationError(f"ep x etp = {gpus} GPUs do not fill whole nodes of {g}")
        cluster = hardware.cluster(node, nodes)
        grid = mesh.expert_layout(gpus, tp=etp, ep=ep, etp=etp, gpus_per_node=g)
        p = moe.ep_members_per_node(etp=etp, ep=ep, gpus_per_node=g)
        limit = values["max_nodes"]
        if limit is not None and limit > ep // p:
            raise ConfigurationError(
                f"node limit {limit} is more than the {counted(ep // p, 'node')} the EP group spans"
            )
        one = moe.all_to_all_bytes(
            SEQ_LEN // etp, m.hidden, m.top_k, ep, ep_per_node=p, experts=m.experts, max_nodes=limit
        )
        count = moe.ALL_TO_ALLS_PER_LAYER["none"]
        intra = count * moe.all_to_all_time(one["intra"], 0.0, ep, cluster, ep_per_node=p)
        inter = count * moe.all_to_all_time(0.0, one["inter"], ep, cluster, ep_per_node=p)
        return dict(
            model=m, grid=grid, p=p, one=one, intra=intra, inter=inter, cluster=cluster, count=count, limit=limit
        )

    def render(self, r: dict) -> bool:
        return self.bars.update([r["intra"], r["inter"]])

    def fade(self) -> bool:
        self.bars.update([None, None], faded=True)
        return False

    def status_kind(self, r: dict) -> str:
        return "ok" if r["inter"] <= r["intra"] else "bad"

    def describe(self, r: dict) -> str:
        grid, p, one, c = r["grid"], r["p"], r["one"], r["cluster"]
        group = grid.group_of(0, "ep")
        shown = ", ".join(map(str, group[:8])) + (", ..." if len(group) > 8 else "")
        lines = [
            f"EP group of rank 0: [{shown}] (neighbours {grid.strides['ep']} rank{'' if grid.strides['ep'] == 1 else 's'} apart: expert TP {grid.tp} "
            f"comes first) [mesh.expert_layout]; {p} member{'' if p == 1 else 's'} per node of {c.gpus_per_node}, "
            f"{counted(grid.ep // p, 'node')}",
            f"per all-to-all and GPU: {format_bytes(one['intra'])} over {c.intra_link.name}, "
            f"{format_bytes(one['inter'])} over {c.fabric.name} [moe.all_to_all_bytes]",
            f"x {r['count']} per layer: NVLink part {format_seconds(r['intra'])}, network part "
            f"{format_seconds(r['inter']) if r['inter'] > 0 else 'none (the group is inside one node)'} "
            "[moe.all_to_all_time]",
        ]
        if r["inter"] > r["intra"]:
            lines.append("the network sets the time: keep EP inside a node, or limit the nodes per token")
        if r["limit"] is not None and r["limit"] >= grid.ep // p:  # the limit binds below the nodes the group spans
            lines.append(
                f"node limit {r['limit']}: the EP group spans {counted(grid.ep // p, 'node')}, so no token reaches more; "
                "the limit changes nothing here (raise EP size to spread the group over more nodes)"
            )
        return "\n".join(lines)


#: The lesson apps of this module (constructible without arguments); the widget fuzz tests use it.
APPS = [AllToAllApp, ImbalanceApp, PlacementApp]


def _expert_time(layer, peak: float) -> str:
    """The status's words for the layer's expert GEMM time against a balanced layer's ('as balanced' where the two
    print alike: not 'take 8.75 ms instead of 8.75 ms')."""
    took, balanced = format_seconds(layer.expert_flops / peak), format_seconds(layer.balanced_expert_flops / peak)
    if took == balanced:
        return f": the layer's expert GEMMs take {took}, the same as with balanced routing [moe.moe_layer_cost]"
    return f": the layer's expert GEMMs take {took} instead of {balanced} [moe.moe_layer_cost]"
