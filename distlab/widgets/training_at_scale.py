"""Lesson 11 apps: the schedules after 1F1B, FSDP vs HSDP layer by layer, context parallelism (ring vs Ulysses),
and checkpointing against failures. Every number from distlab.pipeline, distlab.fsdp, distlab.production and
distlab.failures; the pictures are those results drawn. The browser caches each app's pictures one control change
away (distlab.widgets.framecache).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import ipywidgets as widgets

from .. import failures, fsdp, hardware, models, pipeline, production
from ..plots.pipeline import grid_margins, legend_html, timeline_grid
from ..plots.training_at_scale import (
    GOODPUT_X_RANGE,
    context_bars,
    context_legend_html,
    goodput_curve,
    goodput_legend_html,
    stream_legend_html,
    stream_plot,
)
from ..units import format_bytes, format_percent, format_seconds
from .common import BlitRenderer, LessonApp, figure_canvas, remembered, show_what_applies
from .framecache import FrameCachingApp

__all__ = [
    "SCHEDULES",
    "FSDP_MODELS",
    "FABRICS",
    "NODES",
    "CP_MODELS",
    "SEQ_LENS",
    "CP_DEGREES",
    "CP_LINKS",
    "CP_ROWS",
    "CP_X_MAX",
    "GPU_COUNTS",
    "CKPT_MODELS",
    "ScheduleApp",
    "pipeline_errors",
    "FSDP_X_MAX",
    "FsdpApp",
    "ContextApp",
    "CheckpointCurve",
    "CheckpointApp",
    "APPS",
]

SCHEDULES = ("1f1b", "zb-h1", "zb-v", "dualpipe-v", "dualpipe")
MAX_STAGES, MAX_MICROBATCHES = 16, 64
FSDP_MODELS = ["llama2-7b", "llama3.1-8b", "llama2-13b", "llama3.1-70b"]
FABRICS = ["ib-ndr", "ib-hdr", "ethernet-100g"]
NODES = [1, 2, 4, 8, 16, 32]
CP_MODELS = ["llama3.1-8b", "llama3.1-70b", "llama3.1-405b", "llama2-7b"]
SEQ_LENS = [8192, 32768, 131072, 524288, 1048576]
CP_DEGREES = [2, 4, 8, 16, 32, 64, 128]
CP_LINKS = ["nvlink4", "ib-ndr", "ethernet-100g"]
CP_ROWS = ["ring (zig-zag)", "ring (contiguous)", "Ulysses"]
#: The context bars' fixed x range, in units of the balanced attention compute (bars beyond are clipped).
CP_X_MAX = 2.5
GPU_COUNTS = [256, 1024, 4096, 16384, 32768, 65536, 131072]
CKPT_MODELS = ["llama3.1-8b", "llama3.1-70b", "llama3.1-405b"]


# ----------------------------------------------------------------------------------------- 1. schedules


@remembered(64)
def _schedules(kind: str, p: int, m: int, b: float, w: float) -> tuple:
    # the chosen schedule and 1F1B at these settings (pipeline.schedule), remembered per configuration (a few ms at
    # p = 16, m = 64)
    chosen = pipeline.schedule(kind, p, m, t_f=1.0, t_b=b, t_w=w)
    base = chosen if kind == "1f1b" else pipeline.schedule("1f1b", p, m, t_f=1.0, t_b=b, t_w=w)
    return chosen, base


class ScheduleApp(FrameCachingApp, LessonApp):
    """Pipeline schedules after 1F1B: the chosen schedule's stages x time grid (distlab.pipeline.schedule),
    its idle inside a stage's span and peak activations next to 1F1B's at the same p, m and F:B:W.

    `result` holds (the chosen Timeline, 1F1B's); `error` the message shown instead. The result is a pure function
    of the control values (compute_for); no control's options depend on another's.
    """

    prepared_controls = ("kind", "stages", "microbatches", "backward", "weight")
    frame_texts = ("legend",)  # render says whether weight gradients are drawn apart

    def __init__(self, kind="zb-v", stages=4, microbatches=8, backward=1.0, weight=1.0):
        slider = dict(continuous_update=True, layout=widgets.Layout(width="330px"))
        self.kind = widgets.ToggleButtons(
            options=list(SCHEDULES), value=kind, description="schedule", style={"button_width": "86px"}
        )
        self.stages = widgets.IntSlider(value=stages, min=1, max=MAX_STAGES, description="stages p", **slider)
        self.microbatches = widgets.IntSlider(
            value=microbatches, min=1, max=MAX_MICROBATCHES, description="micro m", **slider
        )
        ratio = dict(
            max=4.0, step=0.25, continuous_update=True, readout_format=".2f", layout=widgets.Layout(width="330px")
        )
        self.backward = widgets.FloatSlider(value=backward, min=0.25, description="B : F", **ratio)
        self.weight = widgets.FloatSlider(value=weight, min=0.0, description="W : F", **ratio)
        self.status = widgets.HTML()
        self.fig, self.canvas = figure_canvas((7.4, 2.2), grid_margins(7.4, bottom=0.12))
        self.grid = timeline_grid(self.fig.add_subplot(), fixed=True)  # a new time range moves only the drawn ticks
        self.renderer = BlitRenderer(self.canvas, self.grid.animated_artists)
        for control in (self.kind, self.stages, self.microbatches, self.backward, self.weight):
            control.observe(self.update, names="value")
        self.legend = widgets.HTML(self._legend(True))
        legend = self.legend
        super().__init__(
            [
                self.kind,
                widgets.HBox([self.stages, self.backward]),
                widgets.HBox([self.microbatches, self.weight]),
                legend,
                self.canvas,
                self.status,
            ]
        )
        self.update()

    def compute(self) -> tuple:
        """The chosen schedule and 1F1B at these settings (pipeline.schedule); the chosen one must be valid."""
        return self.compute_for(self.values())

    def compute_for(self, values: dict) -> tuple:
        """(the chosen Timeline, 1F1B's) for these control values (remembered per configuration)."""
        v = values
        return _schedules(v["kind"], v["stages"], v["microbatches"], v["backward"], v["weight"])

    @staticmethod
    def _legend(split: bool) -> str:
        return legend_html(split=split, rows="rows: stage 0 (top) to p-1; time in t_F, one stage's forward")

    def render(self, result) -> bool:
        # W is listed only when the schedule splits the backward (1F1B draws none: issue 31), as lesson 4's grid does
        from .pipeline import _draws_weight_gradients

        self.show_text("legend", self._legend(_draws_weight_gradients(result[0])))
        # the x range: the step rounded up to a power of two (drawn ticks over fixed axes: never a full redraw)
        return self.grid.update(result[0], x_max=2.0 ** np.ceil(np.log2(result[0].step_time * 1.02)))

    def fade(self) -> bool:
        self.grid.update(None)
        return False

    def describe(self, result) -> str:
        tl, base = result
        # not Timeline.summary(): its "bubble" is the idle share of p x step with the warm-up and drain, which the
        # lesson's bubble (the papers': idle inside a stage's span, the table's) leaves out; ZB-V showed "bubble
        # 5.88%" over a table of 0 (review v19). Op times in t_F (t_f = 1), not seconds.
        chunks = f", v = {tl.chunks}" if tl.chunks > 1 else ""
        lines = [
            f"{tl.schedule}, p = {tl.stages}, m = {tl.microbatches}{chunks}: step {tl.step_time:.4g} t_F, "
            f"{100.0 * tl.overhead:.2f}% over the busiest stage's compute [pipeline.schedule]",
            f"idle with the warm-up and drain: {100.0 * tl.bubble_fraction:.2f}% of p x step (the bubble is the idle "
            "inside a span, below)",
            "                 idle inside a stage's span (t_F)   step (t_F)   peak in flight (until W)",
        ]
        for name, t in ((tl.schedule, tl), ("1f1b", base)):
            lines.append(
                f"  {name:<12}   {float(t.span_idle.max()):>12.4g}   {t.step_time:>18.4g}   "
                f"{float(t.peak_in_flight_w.max()):>10g}" + ("   (2 model copies)" if name == "dualpipe" else "")
            )
        lines.append("[Timeline.span_idle, step_time, peak_in_flight_w]")
        return "\n".join(lines)


def pipeline_errors():
    from ..errors import DistlabError

    return DistlabError


# ----------------------------------------------------------------------------------------- 2. FSDP / HSDP


#: The stream plot's fixed x range, in units of the microbatch's compute alone (boxes beyond are clipped).
FSDP_X_MAX = 3.0


def _events(tl: fsdp.FsdpTimeline, scale: float = 1e3) -> dict:
    """The timeline's event arrays for plots.training_at_scale.StreamPlot, times multiplied by `scale`."""
    keys = ("f_start", "f_end", "b_start", "b_end", "ag_start", "ag_end", "bg_start", "bg_end", "rs_start", "rs_end")
    out: dict = {k: np.asarray(getattr(tl, k)) * scale for k in keys}
    out["step_s"] = tl.step_s * scale
    out["compute_s"] = tl.compute_s * scale
    return out


@remembered(64)
def _sharding_plans(model: str, nodes: int, fabric: str, sharding: str, micro: int, prefetch: int, reshard: bool):
    # (plan, the other sharding's plan or None when it cannot run) from production.sharding_plan, remembered per
    # configuration (a few ms for the two)
    def plan(how):
        return production.sharding_plan(
            model,
            "dgx-h100",
            nodes=nodes,
            fabric=fabric,
            sharding=how,
            micro_batch_size=micro,
            prefetch=prefetch,
            reshard_after_forward=reshard,
        )

    chosen = plan(sharding)
    try:
        alternative = plan("hybrid" if sharding == "full" else "full")
    except pipeline_errors():
        alternative = None
    return chosen, alternative


#: why HSDP is greyed out at one node (production.sharding_plan refuses it there)
HSDP_AT_ONE_NODE = (
    "HSDP shards within a node and replicates across nodes: with 1 node it has nothing to replicate across"
)


class FsdpApp(FrameCachingApp, LessonApp):
    """FSDP (shard over every GPU) or HSDP (shard within a node, replicate across) of a model on DGX H100 nodes:
    one microbatch's compute and communication streams, layer by layer (distlab.production.sharding_plan).

    `result` holds (plan, the other sharding's plan); `error` the message shown instead. The result is a pure
    function of the control values (compute_for). At 1 node the sharding shows FSDP, disabled, saying why (HSDP
    would only be refused there); the student's choice comes back at 2 nodes or more.
    """

    prepared_controls = ("model", "fabric", "nodes", "sharding", "prefetch", "reshard", "micro")

    def __init__(
        self, model="llama2-7b", nodes=4, fabric="ib-ndr", sharding="full", prefetch=1, reshard=True, micro_batch_size=1
    ):
        narrow = widgets.Layout(width="230px")
        self.model = widgets.Dropdown(options=FSDP_MODELS, value=model, description="model", layout=narrow)
        self.fabric = widgets.Dropdown(options=FABRICS, value=fabric, description="fabric", layout=narrow)
        self.nodes = widgets.ToggleButtons(
            options=NODES, value=nodes, description="nodes", style={"button_width": "40px"}
        )
        self.sharding = widgets.ToggleButtons(
            options=[("FSDP (all GPUs)", "full"), ("HSDP (node)", "hybrid")],
            value=sharding,
            description="sharding",
            style={"button_width": "110px", "description_width": "initial"},  # room for "(HSDP needs 2+ nodes)"
        )
        self.prefetch = widgets.IntSlider(value=prefetch, min=0, max=4, description="prefetch", layout=narrow)
        self.reshard = widgets.Checkbox(value=reshard, description="reshard after forward")
        self.micro = widgets.Dropdown(
            options=[1, 2, 4, 8], value=micro_batch_size, description="sequences", layout=narrow
        )
        self.status = widgets.HTML()
        self.fig, self.canvas = figure_canvas((7.6, 1.9), dict(left=0.09, right=0.98, bottom=0.16, top=0.96))
        self.plot = stream_plot(self.fig.add_subplot())
        self.renderer = BlitRenderer(self.canvas, self.plot.animated_artists)
        for control in (self.model, self.fabric, self.nodes, self.sharding, self.prefetch, self.reshard, self.micro):
            control.observe(self._on_change, names="value")
        super().__init__(
            [
                widgets.HBox([self.model, self.fabric, self.micro]),
                self.nodes,
                self.sharding,
                widgets.HBox([self.prefetch, self.reshard]),
                widgets.HTML(
                    stream_legend_html() + "<br><span style='color:#57606a'>x axis: time in units of the microbatch's "
                    "compute (clipped at 3)</span>"
                ),
                self.canvas,
                self.status,
            ]
        )
        self._syncing = False
        self._sync_sharding()
        self.update()

    def _sync_sharding(self) -> None:
        applies = self.nodes.value > 1
        show_what_applies(self, self.sharding, applies, "full", HSDP_AT_ONE_NODE, "HSDP needs 2+ nodes")
        self.sharding.tooltips = [] if applies else [HSDP_AT_ONE_NODE] * len(self.sharding.options)  # on each button

    def _on_change(self, change=None) -> None:
        if self._syncing:
            return
        self._sync_sharding()
        self.update(change)

    def frame_neighbour(self, state: dict, name: str, value) -> dict:
        """The state after the student sets `name` to `value`: at 1 node the sharding is FSDP; the student's choice
        comes back above it."""
        after = {**state, name: value}
        chosen = getattr(self.sharding, "_distlab_chosen", state["sharding"])
        after["sharding"] = (chosen if name != "sharding" else value) if after["nodes"] > 1 else "full"
        return after

    def compute(self) -> tuple:
        return self.compute_for(self.values())

    def compute_for(self, values: dict) -> tuple:
        """(plan, the other sharding's plan or None) for these control values (remembered per configuration)."""
        v = values
        return _sharding_plans(
            v["model"], v["nodes"], v["fabric"], v["sharding"], v["micro"], v["prefetch"], v["reshard"]
        )

    def render(self, result) -> bool:
        tl = result[0].timeline
        return self.plot.update(_events(tl, 1.0 / tl.compute_s), x_max=FSDP_X_MAX)

    def fade(self) -> bool:
        self.plot.update(None, faded=True)
        return False

    def describe(self, result) -> str:
        plan, other = result
        lines = [plan.summary() + " [production.sharding_plan]"]
        if other is not None:
            name = "HSDP" if other.sharding == "hybrid" else "FSDP"
            lines.append(
                f"{name} on the same cluster: {format_bytes(other.memory_bytes)} per GPU, "
                f"{format_bytes(other.network_sent_bytes)} over the network, "
                f"{format_seconds(other.exposed_s)} exposed per microbatch"
            )
        return "\n".join(lines)


# ----------------------------------------------------------------------------------------- 3. long context


class ContextApp(FrameCachingApp, LessonApp):
    """Context parallelism for one layer's attention: ring (load-balanced and contiguous) against Ulysses,
    compute against exposed communication (production.compare_context_parallel).

    The link defaults to the lesson's DGX H100 cluster's fabric, InfiniBand NDR: cp = 8 x tp = 8 is 64 GPUs, eight
    nodes of 8, so the ring's neighbours sit on different nodes (NVLink between all 64 needs an NVL72-class rack).

    `result` holds {method: ContextParallelLayer or the reason it cannot run}; `error` the message shown instead.
    The result is a pure function of the control values (compute_for); no control's options depend on another's.
    """

    prepared_controls = ("model", "seq_len", "link", "cp", "tp")

    def __init__(self, model="llama3.1-70b", seq_len=131072, cp=8, tp=8, link="ib-ndr"):
        narrow = widgets.Layout(width="230px")
        self.model = widgets.Dropdown(options=CP_MODELS, value=model, description="model", layout=narrow)
        self.seq_len = widgets.Dropdown(options=SEQ_LENS, value=seq_len, description="tokens", layout=narrow)
        self.link = widgets.Dropdown(options=CP_LINKS, value=link, description="link", layout=narrow)
        self.cp = widgets.ToggleButtons(options=CP_DEGREES, value=cp, description="cp", style={"button_width": "44px"})
        self.tp = widgets.ToggleButtons(
            options=[1, 2, 4, 8], value=tp, description="tp", style={"button_width": "44px"}
        )
        self.status = widgets.HTML()
        self.fig, self.canvas = figure_canvas((7.0, 1.8), dict(left=0.2, right=0.98, bottom=0.18, top=0.96))
        self.bars = context_bars(self.fig.add_subplot(), CP_ROWS)
        self.renderer = BlitRenderer(self.canvas, self.bars.animated_artists)
        for control in (self.model, self.seq_len, self.link, self.cp, self.tp):
            control.observe(self.update, names="value")
        super().__init__(
            [
                widgets.HBox([self.model, self.seq_len, self.link]),
                self.cp,
                self.tp,
                widgets.HTML(
                    context_legend_html() + "<br><span style='color:#57606a'>x axis: per layer, in units of the "
                    "balanced attention compute (clipped at 2.5)</span>"
                ),
                self.canvas,
                self.status,
            ]
        )
        self.update()

    def compute(self) -> dict:
        return self.compute_for(self.values())

    def compute_for(self, values: dict) -> dict:
        """production.compare_context_parallel for these control values (a fraction of a millisecond: not
        remembered)."""
        v = values
        return production.compare_context_parallel(v["model"], v["seq_len"], v["cp"], tp=v["tp"], link=v["link"])

    def render(self, result) -> bool:
        valid = [r for r in result.values() if not isinstance(r, str)]
        if not valid:
            return self.bars.update(None)
        unit = min(r.compute_s for r in valid)  # the balanced attention compute: 1 on the x axis
        rows = [
            None if isinstance(r, str) else (r.compute_s / unit, r.comm_s / unit, r.exposed_s / unit)
            for r in result.values()
        ]
        return self.bars.update(rows, x_max=CP_X_MAX)

    def fade(self) -> bool:
        return self.bars.update(None)

    def describe(self, result) -> str:
        lines = []
        for label, r in zip(CP_ROWS, result.values()):
            if isinstance(r, str):
                lines.append(f"{label}: cannot run: {r}")
                continue
            lines.append(
                f"{label}: {format_bytes(r.sent_bytes)} sent per layer, {format_seconds(r.comm_s)} of it "
                f"against {format_seconds(r.compute_s)} of attention ({format_seconds(r.exposed_s)} exposed"
                + (f"; busiest rank {r.imbalance:.3g}x its share" if r.imbalance > 1 + 1e-9 else "")
                + f"); buffers {format_bytes(r.buffer_bytes)}"
            )
        first = next((r for r in result.values() if not isinstance(r, str)), None)
        if first is not None:
            lines.append(
                f"activations per GPU, all {models.model(first.model).layers} layers at "
                f"{first.seq_len // first.cp:,} tokens (selective recomputation): "
                f"{format_bytes(first.activation_bytes)} [production.context_parallel_layer]"
            )
        return "\n".join(lines)


# ----------------------------------------------------------------------------------------- 4. checkpoints


class CheckpointCurve(NamedTuple):
    """CheckpointApp's result: the plan, the goodput curve over checkpoint intervals, and the storage bandwidth
    (TB/s) its text names."""

    plan: failures.CheckpointPlan
    intervals_s: np.ndarray
    goodput: np.ndarray
    storage_tbps: float


class CheckpointApp(FrameCachingApp, LessonApp):
    """Failures and checkpoints: GPUs, failure rate, storage bandwidth, mode and restart -> goodput against the
    checkpoint interval, Daly's optimum marked (distlab.failures.checkpoint_plan and goodput).

    `result` holds a CheckpointCurve (plan, intervals_s, goodput, storage_tbps); `error` the message shown instead.
    The result is a pure function of the control values (compute_for); no control's options depend on another's.
    """

    prepared_controls = ("model", "gpus", "rate", "storage", "mode", "restart")

    def __init__(self, model="llama3.1-405b", gpus=16384, rate=None, storage_tbps=2.0, mode="sync", restart_min=10.0):
        rate = failures.failure_rate_per_gpu_hour() if rate is None else rate
        wide = widgets.Layout(width="360px")
        self.model = widgets.Dropdown(options=CKPT_MODELS, value=model, description="model")
        self.gpus = widgets.SelectionSlider(options=GPU_COUNTS, value=gpus, description="GPUs", layout=wide)
        self.rate = widgets.FloatLogSlider(
            value=rate, base=10, min=-7, max=-3, step=0.1, description="fail/GPU-h", readout_format=".2e", layout=wide
        )
        self.storage = widgets.FloatLogSlider(
            value=storage_tbps,
            base=10,
            min=-2,
            max=1,
            step=0.1,
            description="storage TB/s",
            readout_format=".3g",
            layout=wide,
        )
        self.mode = widgets.ToggleButtons(
            options=list(failures.CHECKPOINT_MODES),
            value=mode,
            description="checkpoint",
            style={"button_width": "80px"},
        )
        self.restart = widgets.FloatSlider(
            value=restart_min, min=0.0, max=60.0, step=1.0, readout_format=".0f", description="restart min", layout=wide
        )
        self.status = widgets.HTML()
        self.fig, self.canvas = figure_canvas((6.4, 2.3), dict(left=0.1, right=0.98, bottom=0.18, top=0.96))
        self.curve = goodput_curve(self.fig.add_subplot())
        self.renderer = BlitRenderer(self.canvas, self.curve.animated_artists)
        for control in (self.model, self.gpus, self.rate, self.storage, self.mode, self.restart):
            control.observe(self.update, names="value")
        super().__init__(
            [
                widgets.HBox([self.model, self.mode]),
                widgets.HBox([self.gpus, self.rate]),
                widgets.HBox([self.storage, self.restart]),
                widgets.HTML(
                    goodput_legend_html() + " <span style='color:#57606a'>x: interval (min, log); y: goodput %</span>"
                ),
                self.canvas,
                self.status,
            ]
        )
        self.update()

    def compute(self) -> CheckpointCurve:
        return self.compute_for(self.values())

    def compute_for(self, values: dict) -> CheckpointCurve:
        """failures.checkpoint_plan and goodput_array for these control values (a fraction of a millisecond: not
        remembered)."""
        plan = failures.checkpoint_plan(
            values["model"],
            values["gpus"],
            rate_per_gpu_hour=values["rate"],
            storage_bandwidth=values["storage"] * 1e12,
            mode=values["mode"],
            restart_s=60.0 * values["restart"],
        )
        low, high = 60.0 * GOODPUT_X_RANGE[0], 60.0 * GOODPUT_X_RANGE[1]
        start = max(plan.checkpoint_s, plan.write_s if values["mode"] != "sync" else 0.0, low)
        intervals = np.geomspace(min(start, high), high, 120)
        good = failures.goodput_array(intervals, plan.checkpoint_s, plan.mtbf_s, plan.restart_s)
        return CheckpointCurve(plan, intervals, good, values["storage"])

    def render(self, result) -> bool:
        plan, intervals, good, _ = result
        young = failures.young_interval(plan.checkpoint_s, plan.mtbf_s) if plan.checkpoint_s > 0 else plan.interval_s
        return self.curve.update(
            intervals / 60.0, 100 * good, (plan.interval_s / 60.0, 100 * plan.goodput), young / 60.0
        )

    def fade(self) -> bool:
        return self.curve.update(None)

    def describe(self, result) -> str:
        plan = result[0]
        run_days = failures.LLAMA3["days"]
        lines = [
            plan.summary() + " [failures.checkpoint_plan]",
            f"a {run_days}-day run: {failures.expected_interruptions(plan.gpus, run_days, plan.rate_per_gpu_hour):,.0f} "
            f"expected interruptions (Llama 3 saw {failures.LLAMA3['unexpected']} unexpected on 16,384 GPUs); "
            f"lost to failures and checkpoints: {format_percent(1 - plan.goodput)} "
            f"[failures.expected_interruptions]",
            f"checkpoint to the storage at {result.storage_tbps:.3g} TB/s: write {format_seconds(plan.write_s)}; "
            f"a host copy over {hardware.link('pcie5').name}: "
            f"{format_seconds(plan.checkpoint_bytes / plan.gpus / hardware.link('pcie5').bandwidth)} per GPU",
        ]
        return "\n".join(lines)


APPS = [ScheduleApp, FsdpApp, ContextApp, CheckpointApp]
