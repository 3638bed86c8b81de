"""Lesson 8 apps: gradient buckets (the best count), the production step (taper, rails, FP8, stragglers),
and the OOM triage ladder. Every number from distlab.production / distlab.training."""

from __future__ import annotations

import ipywidgets as widgets

from .. import dataparallel, hardware, memory, production, training, triage
from ..errors import DistlabError
from ..plots.memory_wall import legend_html as memory_legend_html
from ..plots.production import (
    bucket_legend_html,
    bucket_plot,
    ladder_frames,
    production_bars,
    production_legend_html,
)
from ..units import format_bytes, format_seconds
from .browser import LadderPicture
from .common import (
    DATA,
    BlitRenderer,
    LessonApp,
    attempt,
    dropdown_width_px,
    event_loop_running,
    figure_canvas,
    remembered,
    remembered_estimate,
)
from .controls import log_count_slider
from .framecache import FrameCachingApp
from .layouts import OffersWhatRuns
from .prefetch import BASE_AFTER, BROWSER_LIMIT, browser_count, home_keys, neighbour_jobs, state_id, values_key

__all__ = [
    "BUCKET_COUNTS",
    "BUCKET_MODELS",
    "BUCKET_FABRICS",
    "DPS",
    "TOKENS",
    "MAX_BUCKETS",
    "EXPOSED_RANGE_S",
    "bucket_cost_kwargs",
    "BucketApp",
    "NODE_COUNTS",
    "PRODUCTION_FABRICS",
    "REMEMBERED",
    "ProductionStepApp",
    "TRIAGE_MODELS",
    "TriageApp",
    "APPS",
]

BUCKET_MODELS = ["llama2-7b", "llama3.1-8b", "llama2-13b", "megatron-gpt-7.5b"]
BUCKET_FABRICS = ["ib-ndr", "ib-hdr", "ethernet-100g"]
DPS = [8, 16, 64, 256]
TOKENS = [2048, 4096, 8192, 16384, 32768, 65536]
MAX_BUCKETS = 2000
#: The counts the bucket slider offers, about ten per decade (1-10, then 12, 15, 20, 25, 30, 40, 50, 60, 80 times
#: each power of ten) to MAX_BUCKETS: the sweep's axis is logarithmic, so each step moves the marker about as far.
_DECADE = (10, 12, 15, 20, 25, 30, 40, 50, 60, 80)
BUCKET_COUNTS = tuple(c for c in (*range(1, 10), *(m * 10**e for e in range(3) for m in _DECADE)) if c <= MAX_BUCKETS)
#: The bucket app's label width (px), one for all its controls: "tokens/GPU", the longest, whole with a margin.
BUCKET_LABEL_PX = 90
#: The exposed-communication axis (s): the whole decades that hold every offered configuration's curve, from 74 us
#: (Llama-2-7B, 4,096 tokens, on one node's NVLink at 2,000 buckets) to 13.7 s (Llama-2-13B, 2,048 tokens, one flat
#: ring of 256 GPUs over 100G Ethernet at 2,000 buckets); tests/widgets/test_widgets_production.py computes them all.
EXPOSED_RANGE_S = (1e-5, 1e2)


def bucket_cost_kwargs(dp: int, fabric: str, algorithm: str) -> dict:
    """collective_cost's link arguments for a DP group of dp GPUs on DGX H100 nodes: a ring on NVLink inside
    one node; across nodes a hierarchical all-reduce (NVLink + fabric) or one flat ring on the fabric."""
    if dp <= 8:
        return dict(link="nvlink4")
    if algorithm == "hierarchical":
        return dict(link="nvlink4", algorithm="hierarchical", gpus_per_node=8, inter_link=fabric)
    return dict(link=fabric)


@remembered(64)
def _bucket_sweep(model, fabric, algorithm, dp, tokens) -> production.BucketSweep:
    # production.bucket_sweep of the bucket app's controls, remembered per configuration (2,000 counts each)
    return production.bucket_sweep(
        dataparallel.gradient_bytes(model),
        production.backward_time(model, tokens),
        dp,
        max_buckets=MAX_BUCKETS,
        **bucket_cost_kwargs(dp, fabric, algorithm),
    )


class BucketApp(FrameCachingApp, LessonApp):
    """Gradient bucketing: every bucket count's exposed communication (production.bucket_sweep) and one
    count's timeline. Plain data parallelism on DGX H100 nodes: each GPU all-reduces the whole model's
    bf16 gradients over `dp` GPUs (NVLink inside a node; across nodes hierarchical or one flat ring on the
    fabric), while backward (production.backward_time: 2/3 of the step model's calibrated compute, distlab.efficiency)
    produces them.

    `result` holds (sweep, timeline); `error` the message shown instead.
    """

    def __init__(self, model="llama2-7b", fabric="ib-ndr", dp=64, tokens=4096, buckets=20, algorithm="hierarchical"):
        # one label width for every control, so the labels stand in one column and the values start in another
        # ("tokens/GPU" took a label of its own width and sat out of line with the 80 px labels around it)
        label = {"description_width": f"{BUCKET_LABEL_PX}px"}
        self.model = widgets.Dropdown(options=BUCKET_MODELS, value=model, description="model", style=label)
        self.link = widgets.Dropdown(options=BUCKET_FABRICS, value=fabric, description="fabric", style=label)
        self.algorithm = widgets.ToggleButtons(
            options=["hierarchical", "ring"],
            value=algorithm,
            description="all-reduce",
            style={**label, "button_width": "90px"},
        )
        self.dp = widgets.ToggleButtons(
            options=DPS, value=dp, description="DP GPUs", style={**label, "button_width": "44px"}
        )
        self.tokens = widgets.Dropdown(options=TOKENS, value=tokens, description="tokens/GPU", style=label)
        for dropdown in (self.model, self.link, self.tokens):
            dropdown.layout = widgets.Layout(width=f"{dropdown_width_px(dropdown)}px")
        self.buckets = log_count_slider(
            BUCKET_COUNTS, buckets, "buckets", style=label, layout=widgets.Layout(width="460px")
        )
        self.status = widgets.HTML()
        self.fig, self.canvas = figure_canvas(
            (7.6, 2.7), dict(left=0.115, right=0.98, bottom=0.17, top=0.95, wspace=0.33)
        )
        ax1, ax2 = self.fig.subplots(1, 2)
        self.plot = bucket_plot(ax1, ax2, EXPOSED_RANGE_S, MAX_BUCKETS)
        # fixed axes: no control redraws them; a new sweep repaints its curve over them, a count its timeline
        self.renderer = BlitRenderer(self.canvas, self.plot.animated_artists, data_artists=self.plot.sweep_artists)
        self.result = None
        self.error: str | None = None
        self._drawn_sweep = None
        for control in (self.model, self.link, self.algorithm, self.dp, self.tokens, self.buckets):
            control.observe(self.update, names="value")
        super().__init__(
            [
                widgets.HBox([self.model, self.link, self.tokens], layout=widgets.Layout(grid_gap="0 12px")),
                self.dp,
                self.algorithm,
                self.buckets,
                widgets.HTML(bucket_legend_html()),
                self.canvas,
                self.status,
            ]
        )
        self.update()

    prepared_controls = ("model", "link", "algorithm", "dp", "tokens", "buckets")

    def sweep(self, values: dict | None = None) -> production.BucketSweep:
        """The BucketSweep of the model, fabric and DP degree (remembered: the bucket slider only picks a count)."""
        v = self.values() if values is None else values
        return _bucket_sweep(v["model"], v["link"], v["algorithm"], v["dp"], v["tokens"])

    def compute(self) -> tuple:
        """(sweep, timeline of the chosen bucket count), from production.bucket_sweep."""
        return self.compute_for(self.values())

    def compute_for(self, values: dict) -> tuple:
        """(sweep, timeline) for these control values."""
        sweep = self.sweep(values)
        return sweep, sweep.timeline(values["buckets"])

    def render(self, result):
        sweep, timeline = result
        self.plot.set_buckets(sweep, timeline)
        if sweep is self._drawn_sweep:
            return False
        self.plot.set_sweep(sweep)
        self._drawn_sweep = sweep
        return DATA

    def describe(self, result) -> str:
        """The text under the plots (every number from production.bucket_sweep)."""
        sweep, timeline = result
        here = sweep.at(timeline.buckets)
        end = float(timeline.end_s[-1])
        ddp = min(sweep.ddp_default_buckets(), MAX_BUCKETS)
        algorithm = self.value_of("algorithm")
        where = (
            "NVLink, one node"
            if sweep.dp <= 8
            else f"{algorithm}, {'NVLink + ' if algorithm == 'hierarchical' else ''}{self.value_of('link')}"
        )
        lines = [
            f"{self.value_of('model')}: {format_bytes(sweep.grad_bytes)} of bf16 gradients, {format_seconds(sweep.backward_s)} "
            f"of backward; all-reduce over {sweep.dp} GPUs ({where}): {format_seconds(sweep.comm_total_s[0])} "
            f"in one piece [production.bucket_sweep]",
            f"{timeline.buckets} buckets of {format_bytes(here['bucket_bytes'])}: each pays "
            f"{format_seconds(sweep.latency_s)} of latency and moves bytes at {100 * here['bandwidth_share']:.0f}% of the "
            f"link's rate; {format_seconds(here['comm_total_s'])} of communication, {format_seconds(here['exposed_s'])} "
            f"exposed: the all-reduce ends {format_seconds(end)} after backward starts ({end / sweep.backward_s:.2f}x "
            f"backward)",
            f"best: {sweep.best_words()}, {format_seconds(sweep.best_exposed_s)} exposed; PyTorch DDP's 25 MiB "
            f"buckets ({ddp}): "
            f"{format_seconds(sweep.at(ddp)['exposed_s'])} exposed",
        ]
        return "\n".join(lines)


NODE_COUNTS = [4, 8, 16, 32, 64, 128]
PRODUCTION_FABRICS = ["ethernet-100g", "ethernet-400g", "ib-hdr", "ib-ndr"]
#: Configurations whose results the lesson 8 apps keep (each a few kB; shared by every app and control).
REMEMBERED = 256


@remembered(REMEMBERED)
def _straggler_step(model, cluster, **config) -> production.StragglerStep:
    # production.straggler_step, remembered per configuration (the keyword arguments are the key)
    return production.straggler_step(model, cluster, **config)


@remembered(REMEMBERED)
def _oom_triage(model, cluster, **config) -> triage.OOMTriage:
    # triage.oom_triage, remembered per configuration (a ladder prices about a dozen configurations)
    return triage.oom_triage(model, cluster, **config)


#: What a row of the production-step chart says in place of the bar of a layout that cannot run, and its colour.
NO_STEP = "cannot run (see the text): no step time"
NO_STEP_COLOUR = "#b3261e"


class ProductionStepApp(OffersWhatRuns, FrameCachingApp, LessonApp):
    """Where a production step's time goes: Llama-3.1-70B, global batch 256 x 8,192 tokens on DGX H100 nodes,
    ZeRO-1, selective recomputation, sequence parallelism; fabric taper (k:1) and rails, bf16 or FP8, one
    slow GPU and per-GPU jitter. Bars: the non-blocking bf16 healthy step, this fabric and precision, and
    with stragglers (production.straggler_step). `result` is the StragglerStep."""

    MODEL = "llama3.1-70b"

    def __init__(
        self,
        nodes=32,
        fabric="ib-ndr",
        tp=8,
        pp=4,
        oversubscription=1.0,
        rail_optimized=False,
        precision="mixed",
        slow_factor=1.0,
        jitter=0.0,
    ):
        narrow = widgets.Layout(width="230px")
        self.nodes = widgets.Dropdown(options=NODE_COUNTS, value=nodes, description="nodes", layout=narrow)
        self.fabric = widgets.Dropdown(options=PRODUCTION_FABRICS, value=fabric, description="fabric", layout=narrow)
        self.tp = widgets.ToggleButtons(
            options=[1, 2, 4, 8], value=tp, description="TP", style={"button_width": "40px"}
        )
        self.pp = widgets.ToggleButtons(
            options=[1, 2, 4, 8], value=pp, description="PP", style={"button_width": "40px"}
        )
        self.oversubscription = widgets.FloatSlider(
            value=oversubscription, min=1.0, max=4.0, step=0.5, readout_format=".1f", description="taper k:1"
        )
        self.rail = widgets.Checkbox(value=rail_optimized, description="rail-optimized", layout=narrow)
        self.precision = widgets.ToggleButtons(
            options=[("bf16", "mixed"), ("FP8", "fp8")],
            value=precision,
            description="precision",
            style={"button_width": "60px"},
        )
        self.slow = widgets.FloatSlider(value=slow_factor, min=1.0, max=2.0, step=0.05, description="slow GPU x")
        self.jitter = widgets.FloatSlider(
            value=jitter, min=0.0, max=0.1, step=0.005, description="jitter σ", readout_format=".1%"
        )
        self.status = widgets.HTML()
        self.fig, self.canvas = figure_canvas((7.6, 1.9), dict(left=0.2, right=0.97, bottom=0.27, top=0.95))
        self.legend = widgets.HTML(production_legend_html())  # then only the parts drawn (render)
        ax = self.fig.add_subplot()
        # the step-time axis keeps fixed limits and draws its time ticks with the bars: no control redraws the axes
        self.bars = production_bars(ax, 3, legend=False, fixed=True)
        ax.set_yticks(range(3), ["non-blocking, bf16", "this fabric", "with stragglers"])
        # in place of the bar of a layout that cannot run (render): no step time for a step never taken
        self.notes = [
            ax.text(0.01, row, NO_STEP, va="center", fontsize=8, color=NO_STEP_COLOUR, visible=False)
            for row in range(3)
        ]
        self.renderer = BlitRenderer(self.canvas, self.bars.animated_artists + self.notes)
        self.result = None
        self.error: str | None = None
        self.reference: training.StepEstimate | None = None
        self._controls = (
            self.nodes,
            self.fabric,
            self.tp,
            self.pp,
            self.oversubscription,
            self.rail,
            self.precision,
            self.slow,
            self.jitter,
        )
        for control in self._controls:
            control.observe(self._on_layout_change, names="value")
        super().__init__(
            [
                widgets.HBox([self.nodes, self.fabric, self.rail]),
                self.tp,
                self.pp,
                widgets.HBox([self.oversubscription, self.precision]),
                widgets.HBox([self.slow, self.jitter]),
                self.legend,
                self.canvas,
                self.status,
            ]
        )
        self.offer_what_runs()
        self.update()

    prepared_controls = ("nodes", "fabric", "tp", "pp", "oversubscription", "rail", "precision", "slow", "jitter")
    frame_texts = ("legend",)  # render names the parts drawn

    def config(self, values: dict | None = None) -> dict:
        """estimate()'s keywords for the controls (default: their current values)."""
        v = self.values() if values is None else values
        return dict(
            global_batch=256,
            seq_len=8192,
            tp=v["tp"],
            pp=v["pp"],
            zero=1,
            recompute="selective",
            sequence_parallel=True,
        )

    def cluster(self, values: dict | None = None) -> hardware.Cluster:
        """The chosen fabric with its taper and rails (hardware.cluster)."""
        v = self.values() if values is None else values
        return hardware.cluster("dgx-h100", v["nodes"], v["fabric"], v["oversubscription"], v["rail"])

    def compute(self) -> production.StragglerStep:
        """The step on this fabric and precision with stragglers (production.straggler_step); `reference` holds
        the non-blocking bf16 estimate (training.estimate) drawn above it."""
        values = self.values()
        step = self.compute_for(values)
        self.reference = self.reference_for(values)
        return step

    def reference_for(self, values: dict) -> training.StepEstimate:
        """The non-blocking bf16 estimate of these control values (remembered per configuration)."""
        cluster = hardware.cluster("dgx-h100", values["nodes"], values["fabric"])
        return remembered_estimate(self.MODEL, cluster, **self.config(values))

    def compute_for(self, values: dict) -> production.StragglerStep:
        """The straggler step of these control values (remembered per configuration; its non-blocking bf16
        reference is priced and remembered with it)."""
        self.reference_for(values)
        return _straggler_step(
            self.MODEL,
            self.cluster(values),
            slow_factor=values["slow"],
            sigma=values["jitter"],
            precision=values["precision"],
            **self.config(values),
        )

    def _reference(self) -> training.StepEstimate:
        """The non-blocking bf16 estimate drawn above the step (remembered: compute() priced it with the step; a
        neighbour the frame cache paints, distlab.widgets.framecache, its own)."""
        return self.reference_for(self.values())

    def render(self, step: production.StragglerStep) -> bool:
        # a layout that cannot run (over memory, or a pipeline that never fills) draws no bar (issue 31): a note
        runs = [self._reference().feasible, step.healthy.feasible, step.healthy.feasible]
        parts = [
            bar if ok else {} for bar, ok in zip([self._reference().parts(), step.healthy.parts(), step.parts()], runs)
        ]
        for note, ok in zip(self.notes, runs):
            note.set_visible(not ok)
        # the legend names the parts some bar draws (a CP or EP part of 0 s is no colour on the chart: issue 31)
        self.show_text("legend", production_legend_html({name for bar in parts for name, v in bar.items() if v > 0}))
        return self.bars.update(parts)

    def fade(self) -> bool:
        for note in self.notes:
            note.set_visible(False)
        return self.bars.update([{}, {}, {}], faded=True)

    def status_kind(self, step: production.StragglerStep) -> str:
        return "result" if step.healthy.feasible else "bad"

    def describe(self, step: production.StragglerStep) -> str:
        """The text under the bars: configuration, DP and p2p traffic, step times, MFU, memory."""
        reference, cl = self._reference(), self.cluster()
        e = step.healthy
        c = e.config
        lines = [
            f"dp={c['dp']} x tp={c['tp']} x pp={c['pp']} on {cl.describe()} "
            "[production.straggler_step; non-blocking bf16: training.estimate]",
            f"DP traffic {format_seconds(e.dp_comm_s)} ({format_seconds(e.dp_exposed_s)} exposed; non-blocking bf16: "
            f"{format_seconds(reference.dp_comm_s)}); pipeline p2p {format_seconds(e.p2p_s)}",
            f"step {format_seconds(reference.step_time_s)} -> {format_seconds(e.step_time_s)} on this fabric/precision "
            f"-> {format_seconds(step.step_time_s)} waiting for the slowest of {step.gpus} GPUs "
            f"(E[slowest] = {step.slowest:.3f} x healthy compute); MFU {100 * step.mfu:.1f}%",
            f"memory per GPU {format_bytes(e.memory.total_bytes)}: {e.memory.verdict()}",
        ]
        if not e.feasible:
            lines.append("NOT FEASIBLE: " + e.explain())
        return "\n".join(lines)


TRIAGE_MODELS = ["llama3.1-70b", "llama2-70b", "llama3.1-8b", "gpt3-175b", "llama3.1-405b"]


class TriageApp(OffersWhatRuns, LessonApp):
    """OOM triage: the given configuration and the ladder of fixes in production order
    (triage.oom_triage), each rung priced by training.estimate(). `result` is the OOMTriage.

    The bars are drawn in the browser (distlab.widgets.browser.LadderPicture): each ladder goes in one message
    (plots.production.ladder_frames) with its text, so a change costs the kernel the triage and that message, not a
    matplotlib redraw of axes that follow the ladder's length and height."""

    summary_in_picture = True

    def __init__(
        self,
        model="llama3.1-70b",
        nodes=32,
        seq_len=8192,
        tp=8,
        pp=4,
        micro_batch_size=4,
        zero=0,
        recompute="none",
        sequence_parallel=True,
    ):
        narrow = widgets.Layout(width="230px")
        self.model = widgets.Dropdown(options=TRIAGE_MODELS, value=model, description="model", layout=narrow)
        self.nodes = widgets.Dropdown(options=[4, 8, 16, 32, 64], value=nodes, description="nodes", layout=narrow)
        self.seq_len = widgets.Dropdown(
            options=[2048, 4096, 8192, 16384], value=seq_len, description="sequence", layout=narrow
        )
        self.tp = widgets.ToggleButtons(
            options=[1, 2, 4, 8], value=tp, description="TP", style={"button_width": "40px"}
        )
        self.pp = widgets.ToggleButtons(
            options=[1, 2, 4, 8], value=pp, description="PP", style={"button_width": "40px"}
        )
        self.micro_batch_size = widgets.Dropdown(
            options=[1, 2, 4, 8], value=micro_batch_size, description="micro-batch", layout=narrow
        )
        self.zero = widgets.ToggleButtons(
            options=[("plain DP", 0), ("ZeRO-1", 1), ("ZeRO-2", 2), ("ZeRO-3", 3)],
            value=zero,
            description="sharding",
            style={"button_width": "70px"},
        )
        self.recompute = widgets.Dropdown(
            options=list(memory.RECOMPUTE_MODES), value=recompute, description="recompute", layout=narrow
        )
        self.sequence_parallel = widgets.Checkbox(
            value=sequence_parallel, description="sequence parallel", layout=narrow
        )
        self.status = widgets.HTML()
        self.picture = LadderPicture(description="OOM ladder", width=720, height=330)
        self.result = None
        self.error: str | None = None
        for control in (
            self.model,
            self.nodes,
            self.seq_len,
            self.tp,
            self.pp,
            self.micro_batch_size,
            self.zero,
            self.recompute,
            self.sequence_parallel,
        ):
            control.observe(self._on_layout_change, names="value")
        super().__init__(
            [
                widgets.HBox([self.model, self.nodes, self.seq_len]),
                self.tp,
                self.pp,
                widgets.HBox([self.micro_batch_size, self.recompute, self.sequence_parallel]),
                self.zero,
                self.picture,
                self.status,
            ]
        )
        # the legend inside the picture: hidden with the bars at our message (ladder.js)
        self.picture.legend = (
            memory_legend_html() + '<div style="font-size:12px">bars: the given configuration, '
            "then each rung of the ladder, each on top of the previous (faded: skipped; &#9650;: taller than "
            "the axis, which ends near twice the GPU's memory: its total is in the text)</div>"
        )
        # the browser's cache of the ladders one change away (issue 32): ladder.js watches these controls
        self.picture.controls = [getattr(self, name) for name in self.prepared_controls]
        self.offer_what_runs()
        self.update()

    #: no slider to drag: neighbours prepared from the next turn, not after PREPARE_AFTER_S (a second change 0.1 s later
    prepare_after_s = 0.0  # found the browser's cache empty: 25 ms median, 107 ms with 50 ms round trip; issue 32)
    layout_controls = ("nodes", "tp", "pp", "micro_batch_size")  # OffersWhatRuns: each offers what runs
    layout_model_control = "model"  # OffersWhatRuns: the layouts offered are those the chosen model runs
    #: the triage of each neighbouring value is remembered in idle kernel turns, and its ladder sent to the browser's
    #: cache (distlab.widgets.prefetch): a change to a neighbouring value is drawn there with no round trip
    prepared_controls = (
        "model",
        "nodes",
        "seq_len",
        "tp",
        "pp",
        "micro_batch_size",
        "zero",
        "recompute",
        "sequence_parallel",
    )

    def config(self, values: dict | None = None) -> dict:
        """estimate()'s keywords for the controls (default: their current values)."""
        v = self.values() if values is None else values
        return dict(
            global_batch=256,
            seq_len=v["seq_len"],
            tp=v["tp"],
            pp=v["pp"],
            micro_batch_size=v["micro_batch_size"],
            zero=v["zero"],
            recompute=v["recompute"],
            sequence_parallel=v["sequence_parallel"],
        )

    def compute(self) -> triage.OOMTriage:
        return self.compute_for(self.values())

    def compute_for(self, values: dict) -> triage.OOMTriage:
        """triage.oom_triage of these control values (remembered per configuration)."""
        cl = hardware.cluster("dgx-h100", values["nodes"], "ib-ndr")
        return _oom_triage(values["model"], cl, **self.config(values))

    def render(self, result: triage.OOMTriage) -> None:
        """The ladder's bars and its text to the browser, in one message."""
        shown = self.payload(result)
        self.picture.show(0, 0, shown["summaries"], frames=shown["frames"], value=0)

    def payload(self, result) -> dict:
        """What the picture shows for `result` (an OOMTriage, or our error: the message, the last ladder kept):
        {"summaries", "errors"[, "frames"]}, as render and fade send it."""
        if isinstance(result, DistlabError):
            return {"summaries": [""], "errors": [str(result)]}
        return {"summaries": [self.describe(result)], "errors": [""], "frames": ladder_frames(result)}

    def prepare_neighbours(self, change=None) -> None:
        """LessonApp's, and first, in a kernel, the browser told the state whose neighbours follow and their keys and
        state ids (it answers only those from its cache: distlab.widgets.prefetch), the browser's count of the
        student's changes seen here and the home keys (as prefetch.Prefetcher's map)."""
        controls = self._prefetched_controls()
        self._seen = browser_count(controls.values(), self._seen)
        if event_loop_running() and self.picture.comm is not None:
            values = self.values()
            moved = change.get("owner") if isinstance(change, dict) else None
            jobs = neighbour_jobs(controls, values, moved)
            key = values_key(controls, values)
            expect = {**{k: state_id(state) for k, state in jobs}, key: state_id(values)}
            self._fills += 1
            msg = {"prefetch_base": key, "limit": BROWSER_LIMIT, "expect": expect, "fill": self._fills}
            self._home = set(home_keys(controls, values, jobs))
            self.picture.send({**msg, "seen": self._seen, "home": sorted(self._home)})
        super().prepare_neighbours(change)

    def neighbour_states(self, current: dict, moved=None) -> list:
        """The states whose ladders the browser is sent: 1 to REACH steps of one control away (prefetch.neighbour_jobs,
        the nearest first), the control `moved` first, and `current` itself after the nearest two (BASE_AFTER)."""
        states = [state for _, state in neighbour_jobs(self._prefetched_controls(), current, moved)]
        states.insert(min(BASE_AFTER, len(states)), current)
        return states

    def _prepare(self, values: dict) -> None:
        """One neighbour: its triage remembered, and its ladder sent to the browser's cache under its key."""
        shown = self.payload(attempt(self.compute_for, values))
        key = values_key(self._prefetched_controls(), values)
        msg = {"prefetch": key, "id": state_id(values), "fill": self._fills, "payload": shown}
        self.picture.send({**msg, "home": True} if key in self._home else msg)

    _fills = 0  # the neighbourhoods named to the browser (prefetch.Prefetcher's fills)
    _seen: dict = {}  # {view: the browser's count of the student's changes seen here} (prefetch.browser_count)
    _home: set = set()  # the current map's home keys (prefetch.home_keys), also named in their own messages

    def _prefetched_controls(self) -> dict:
        return {name: getattr(self, name) for name in self.prepared_controls}

    def fade(self) -> None:
        """Our message in place of the text; the last ladder stays, faded (the browser fades a position in error)."""
        self.picture.show(0, 0, [""], errors=[self.error or ""], value=0)

    def status_kind(self, result: triage.OOMTriage) -> str:
        return "ok" if result.already_fits or result.first_fit is not None else "bad"

    def describe(self, result: triage.OOMTriage) -> str:
        """OOMTriage.summary(), and the function that computed it."""
        return f"{result.summary()}\n[triage.oom_triage]"


#: The lesson apps of this module (constructible without arguments); the widget fuzz tests use it.
APPS = [BucketApp, ProductionStepApp, TriageApp]
