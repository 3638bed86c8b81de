"""Lesson 4 apps: the pipeline bubble grid and the stage-analysis panel.

Every picture is a distlab.pipeline timeline: the simulator places each op, the grid is an image of that timeline
(one pixel column per screen column) redrawn by blitting, and the numbers beside it (bubble, closed form, peak in
flight, activation memory) come from the same Timeline and from distlab.pipeline.activation_memory. Text stays in
HTML, out of the per-frame render.

The bubble grid is drawn in the browser with its legend (TimelinePicture). The grids of every state one change of
one control away are simulated in the kernel's idle turns and held by the browser (distlab.widgets.prefetch, issue
32), so such a change redraws there at once (grid, legend and text) and the kernel confirms it.
"""

from __future__ import annotations

import functools

import ipywidgets as widgets
import numpy as np

from .. import hardware, models, pipeline
from ..errors import DistlabError
from ..memory import RECOMPUTE_MODES
from ..plots.pipeline import grid_margins, legend_html, timeline_grid
from ..units import format_bytes, format_percent, format_rate, format_seconds
from .._words import counted
from .browser import TimelinePicture, timeline_buffers
from .common import (
    BlitRenderer,
    LessonApp,
    attempt,
    event_loop_running,
    figure_canvas,
    fill_order,
    fill_positions,
    remembered,
)
from .pipeline_state import (  # still importable from here
    GRID_CONTROLS,
    chunks_unused,
    grid_disabled,
    grid_neighbour,
    grid_refusal,
    used_chunks,
)
from .pipeline_text import BubbleGridResult, _compact, _published, describe  # still importable from here
from .controls import offer_what_runs, show_what_applies
from .framecache import FrameCachingApp
from .prefetch import Prefetcher, PrefetchingApp

__all__ = [
    "MAX_STAGES",
    "MAX_MICROBATCHES",
    "MAX_CHUNKS",
    "ROWS_NOTE",
    "GRID_CONTROLS",
    "BubbleGridResult",
    "simulate",
    "grid_refusal",
    "describe",
    "grid_data",
    "grid_payload_steps",
    "BubbleGridApp",
    "NO_LINK",
    "StageAnalysisApp",
    "APPS",
]

MAX_STAGES = 16
MAX_MICROBATCHES = 64
MAX_CHUNKS = 8
#: The stage-analysis panel prices the Lesson 4 schedules (those with a closed form).
STAGE_ANALYSIS_KINDS = tuple(k for k in pipeline.KINDS if k not in pipeline.NO_CLOSED_FORM)
#: What the grid says at a microbatch count whose timeline is still being simulated (for a moment after a change).
PENDING = "simulating this microbatch count ..."
ROWS_NOTE = "rows: stage 0 (top) to stage p-1 (bottom), one GPU each; time runs left to right ({unit})"
#: States whose grids the kernel remembers: a state is up to about 2 MB (ZB-V at p = 16: 200,000 ops of 10 bytes).
GRID_KERNEL_LIMIT = 32


def _draws_weight_gradients(timeline) -> bool:
    """True when the timeline has W ops (a split backward: ZB-H1, ZB-V, DualPipe): the legend lists W only then,
    so that it names no colour the grid does not draw (issue 31)."""
    return bool(np.any(np.asarray(timeline.kind).astype(str) == "W"))


#: pipeline.analyze_stages remembered per configuration (the stage-analysis panel's; its warnings simulate
#: dozens of alternatives), shared by every panel and control: a configuration seen before is not analysed again.
_analyze_stages = remembered(256)(pipeline.analyze_stages)


#: How often (s) the bubble grid re-sends the microbatch counts filled so far while it fills the rest.
PROGRESS_S = 0.15


def _physics(s: dict) -> tuple:
    """What the timeline of state `s` depends on (the model and recomputation change only its memory)."""
    return (s["kind"], s["stages"], s["chunks"] if s["kind"] == "interleaved" else 1, s["backward"], s["weight"])


#: Timelines remembered (_timeline): two states' microbatch counts (at most about 0.7 MB each: p = 16, m = 64, v = 8).
TIMELINES_REMEMBERED = 2 * MAX_MICROBATCHES


@functools.lru_cache(maxsize=TIMELINES_REMEMBERED)
def _timeline(kind: str, p: int, v: int, t_b: float, t_w: float, m: int):
    """pipeline.schedule of the grid's uniform stages (t_F = 1), remembered: a change of the model or the
    recomputation, which move only the memory, or a change back, simulates nothing again. Our error is not
    remembered (it is raised again). Its arrays are made read-only: every user shares them."""
    timeline = pipeline.schedule(kind, p, m, v, t_f=1.0, t_b=t_b, t_w=t_w)
    for value in vars(timeline).values():
        if isinstance(value, np.ndarray):
            value.flags.writeable = False
    return timeline


def simulate(s: dict, m: int, timeline=None) -> BubbleGridResult:
    """The bubble grid's result in state `s` (GRID_CONTROLS' values) with m microbatches: the chosen schedule
    simulated (uniform stages, t_F = 1; `timeline`: that simulation, done already) and the memory it implies (the
    model's layers split over the stages as evenly as they go; the grid assumes equal stages). Lesson 4."""
    kind, p, v, t_b, t_w = _physics(s)
    if timeline is None:
        timeline = _timeline(kind, p, v, t_b, t_w, m)
    act = pipeline.activation_memory(timeline, s["model"], recompute=s["recompute"])
    if kind not in pipeline.NO_CLOSED_FORM:
        return BubbleGridResult(timeline, pipeline.closed_form(kind, p, m, v, 1.0, t_b, t_w), act)
    return BubbleGridResult(timeline, None, act, _published(kind, p, t_b, t_w))


def grid_data(results) -> dict:
    """What the bubble grid shows for `results` (per microbatch count 1..MAX_MICROBATCHES: a BubbleGridResult, our
    error, or None while being simulated): {"summaries", "errors", "frames" (with the legend), "times", "codes"}."""
    frames, times, codes = timeline_buffers([r.timeline if isinstance(r, BubbleGridResult) else None for r in results])
    frames["legend"] = [_legend(False), _legend(True)]
    summaries = [describe(r) if isinstance(r, BubbleGridResult) else PENDING if r is None else "" for r in results]
    errors = [str(r) if isinstance(r, DistlabError) else "" for r in results]
    return {"summaries": summaries, "errors": errors, "frames": frames, "times": times, "codes": codes}


def grid_payload_steps(s: dict, timelines=None):
    """A generator simulating state `s` one microbatch count per step (distlab.widgets.prefetch runs it in the
    kernel's idle turns; one step is one simulation, at most about 35 ms at p = 16); its return value is grid_data
    with every count. `timelines[m - 1]`, where given, is the simulation of m already done (a neighbour that changes
    only the model or the recomputation)."""
    results = []
    for m in range(1, MAX_MICROBATCHES + 1):
        known = timelines[m - 1] if timelines is not None else None
        results.append(attempt(simulate, s, m, known))
        yield m
    return grid_data(results)


def _legend(split: bool) -> str:
    """The bubble grid's colour legend (with W ops when `split`)."""
    return legend_html(split=split, rows=ROWS_NOTE.format(unit="one stage's forward of one microbatch = 1"))


class BubbleGridApp(PrefetchingApp, LessonApp):
    """Schedule, p, m, v and the F:B:W cost ratio -> the stages x time grid, the bubble and the
    peak activation memory (one microbatch = one sequence of the chosen model).

    The grid is drawn in the browser (distlab.widgets.browser.TimelinePicture), sent the timeline of every
    microbatch count 1..MAX_MICROBATCHES at once: its microbatch slider (`microbatches`) needs no kernel. The
    grids of every state one change of another control away are prefetched into the browser (distlab.widgets.
    prefetch). `result` holds a BubbleGridResult (None on invalid input); `error` the message shown instead.
    """

    PREFETCH_CONTROLS = GRID_CONTROLS

    summary_in_picture = True

    def __init__(
        self,
        kind="1f1b",
        stages=4,
        microbatches=8,
        chunks=2,
        backward=1.0,
        weight=1.0,
        model="llama2-7b",
        recompute="selective",
    ):
        # new physics (all 64 microbatch counts simulated again) on release, not at every pixel of a drag
        slider = dict(continuous_update=False, layout=widgets.Layout(width="330px"))
        self.kind = widgets.ToggleButtons(
            options=list(pipeline.KINDS), value=kind, description="schedule", style={"button_width": "92px"}
        )  # "interleaved", "dualpipe-v" whole (rows may wrap)
        self.stages = widgets.IntSlider(value=stages, min=1, max=MAX_STAGES, description="stages p", **slider)
        self.chunks = widgets.IntSlider(value=chunks, min=1, max=MAX_CHUNKS, description="chunks v", **slider)
        ratio = dict(
            min=0.0,
            max=4.0,
            step=0.25,
            continuous_update=False,
            readout_format=".2f",
            layout=widgets.Layout(width="330px"),
        )
        self.backward = widgets.FloatSlider(value=backward, description="B : F", **{**ratio, "min": 0.25})
        self.weight = widgets.FloatSlider(value=weight, description="W : F", **ratio)
        self.model = widgets.Dropdown(
            options=list(models.MODELS), value=model, description="model", layout=widgets.Layout(width="330px")
        )
        self.recompute = widgets.Dropdown(
            options=list(RECOMPUTE_MODES),
            value=recompute,
            description="recompute",
            layout=widgets.Layout(width="330px"),
        )
        self.status = widgets.HTML()
        self.picture = TimelinePicture(
            description="micro m", min=1, max=MAX_MICROBATCHES, value=microbatches, width=720, height=240
        )
        self.microbatches = self.picture  # the microbatch slider lives in the picture (in the browser)
        self.result: BubbleGridResult | None = None
        self.error: str | None = None
        self._results: list = []  # per microbatch count 1..MAX_MICROBATCHES: a BubbleGridResult or a DistlabError
        for name in GRID_CONTROLS:
            getattr(self, name).observe(self._on_change, names="value")
        # the browser's cache of the states one change away (issue 32): timeline.js watches these controls
        self.picture.controls = [getattr(self, name) for name in GRID_CONTROLS]
        self.prefetcher = Prefetcher(self.picture, self._payload_steps, GRID_KERNEL_LIMIT, disabled=grid_disabled)
        self._sync_chunks()
        self._offer_what_runs()
        controls = widgets.VBox(
            [
                self.kind,
                widgets.HBox([self.stages, self.backward]),
                widgets.HBox([self.chunks, self.weight]),
                widgets.HBox([self.model, self.recompute]),
                widgets.HTML(
                    '<span style="font-size:12px;color:#57606a">F = 1: one stage\'s forward '
                    "of one microbatch. 1F1B and before run B + W as one "
                    "backward op. The microbatch slider m is under the grid.</span>"
                ),
            ]
        )
        super().__init__([controls, self.picture, self.status])  # the legend is drawn in the picture
        self._refresh()
        self.picture.observe(self._on_microbatches, names="value")

    prefetch_neighbour = staticmethod(grid_neighbour)

    def state(self) -> dict:
        """The controls' values (GRID_CONTROLS): every timeline and text the picture holds depends on these; and
        "chosen_chunks", the student's chunks v (grid_neighbour)."""
        chunks = self.chunks
        chosen = getattr(chunks, "_distlab_chosen", chunks.value) if chunks.disabled else chunks.value
        return {**{name: getattr(self, name).value for name in GRID_CONTROLS}, "chosen_chunks": chosen}

    def _sync_chunks(self) -> None:
        """chunks v applies to the interleaved schedule only: elsewhere disabled, showing the chunks the schedule runs
        (used_chunks) and saying why; the student's v comes back at interleaved (controls.show_what_applies)."""
        kind = self.kind.value
        show_what_applies(self, self.chunks, kind == "interleaved", used_chunks(kind, 1), chunks_unused(kind))

    def _offer_what_runs(self) -> None:
        """The schedule and model buttons offer only what splits the stages' layers (grid_refusal), each with the
        chunks it would show (grid_neighbour)."""

        def refusal(values: dict):
            after = self.state()
            for name, value in values.items():
                after = grid_neighbour(after, name, value)
            return grid_refusal(after)

        offer_what_runs(self, ("kind", "model"), refusal)

    def _on_change(self, change=None):
        if self._syncing:  # an option list being replaced (offer_what_runs)
            return
        self.prefetcher.forget(change)
        self._moved = change.get("owner") if change is not None else None
        self._sync_chunks()
        self._offer_what_runs()
        self._refresh()

    def _on_microbatches(self, change=None):
        if not self._syncing:
            self.update()

    _syncing = False

    def _refresh(self) -> None:
        """Simulate every microbatch count of the slider for the other controls (new physics: one kernel call)
        and send the picture every timeline and the text of each; then update the app's own result.

        A state the kernel has simulated already (prefetched, or shown before) is sent complete at once. Otherwise
        the current count is simulated and sent first (the others shown as pending, so the browser never draws
        a count from the old settings); the others follow in turns of the kernel's event loop
        (common.fill_in_turns: about 0.1-0.7 s of simulation at p = 16, nearest counts first, the picture re-sent
        after each PROGRESS_S), so the control answers after one simulation and the kernel stays responsive. Then,
        in a kernel, the states one control change away are prefetched into the browser (_prefetch)."""
        s = self.state()
        self._generation += 1
        generation = self._generation
        self.prefetcher.stop()
        known = self.prefetcher.lookup(s)
        if known is not None:  # every count at once; the app's own result is simulated on demand (compute)
            self._results = [None] * MAX_MICROBATCHES
            self.filling = None
            self._show(known)
            self.update()
            self._prefetch(generation)
            return
        results: list = [None] * MAX_MICROBATCHES
        current = self.microbatches.value
        results[current - 1] = attempt(simulate, s, current)
        self._results = results
        if event_loop_running():  # in a kernel: the current count now, the others after (without one: once, below)
            self._send()
        self.update()
        pending = fill_order([m for m in range(1, MAX_MICROBATCHES + 1) if results[m - 1] is None], current)

        def compute(m: int) -> None:
            if results[m - 1] is None:  # compute() may have simulated it already, on demand
                results[m - 1] = attempt(simulate, s, m)

        # the counts done so far reach the browser every PROGRESS_S, and all of them at the end
        self.filling = fill_positions(pending, compute, lambda: generation == self._generation, self._send, PROGRESS_S)
        if self.filling is not None:
            self.filling.add_done_callback(lambda _: self._prefetch(generation))
        else:
            self._prefetch(generation)

    #: The background filling of the other counts in a kernel (an asyncio.Future; None when done at once).
    filling = None

    def _payload_steps(self, s: dict):
        """grid_payload_steps of state `s`, reusing the current state's simulations where `s` has the same timelines
        (a neighbour that changes only the model or the recomputation)."""
        results = self._results
        same = _physics(s) == _physics(self.state()) and all(r is not None for r in results)
        timelines = [r.timeline if isinstance(r, BubbleGridResult) else None for r in results] if same else None
        return grid_payload_steps(s, timelines)

    def _send(self) -> None:
        """Every position's timeline and text to the picture (PENDING where still being simulated); once every count
        is simulated, the kernel remembers them (a change back here is shown complete at once)."""
        shown = grid_data(self._results)
        if all(r is not None for r in self._results):
            self.prefetcher.remember(self.state(), shown)
        self._show(shown)

    def _show(self, shown: dict) -> None:
        self._syncing = True
        try:
            self.picture.show(
                1,
                MAX_MICROBATCHES,
                shown["summaries"],
                shown["errors"],
                frames=shown["frames"],
                times=shown["times"],
                codes=shown["codes"],
            )
        finally:
            self._syncing = False

    @property
    def legend(self) -> str:
        """The colour legend the browser draws above the grid now (timeline.js reads the same data): the one naming
        W where the current count's ops include a W op; "" before any op is there."""
        frames = self.picture.frames
        first, count = frames["positions"][self.picture.value - self.picture.min][:2]
        codes = np.frombuffer(self.picture.codes, dtype=np.uint8)[2 * first + 1 : 2 * (first + count) : 2]
        return frames["legend"][int(bool(np.any(codes // 2 == 2)))] if count else ""

    def compute(self) -> BubbleGridResult:
        """The result for the current microbatch count (simulated by _refresh); raises our error on invalid input."""
        m = self.microbatches.value
        if self._results[m - 1] is None:
            self._results[m - 1] = attempt(simulate, self.state(), m)
        result = self._results[m - 1]
        if isinstance(result, DistlabError):
            raise result
        return result

    def simulate(self, m: int) -> BubbleGridResult:
        """simulate() in the controls' state with m microbatches."""
        return simulate(self.state(), m)

    def describe(self, r: BubbleGridResult) -> str:
        """describe(r): the numbers under the grid."""
        return describe(r)


# --------------------------------------------------------------------------- stage analysis

NO_LINK = "no link (compute only)"


class StageAnalysisApp(FrameCachingApp, LessonApp):
    """Model, p, m, micro-batch size, schedule, layer time and link -> distlab.pipeline.analyze_stages:
    the traffic between stages, the bandwidth that hides it, the simulated step (with each
    activation send as a p2p delay) and warnings with computed alternatives.

    `result` holds the StageAnalysis (None on invalid input); `error` the message shown instead.
    """

    def __init__(
        self,
        model="llama2-70b",
        stages=4,
        microbatches=8,
        micro_batch_size=1,
        kind="1f1b",
        chunks=1,
        layer_time_ms=2.0,
        link="ib-ndr",
        max_bubble_pct=20.0,
    ):
        wide = widgets.Layout(width="330px")
        self.model = widgets.Dropdown(options=list(models.MODELS), value=model, description="model", layout=wide)
        self.kind = widgets.Dropdown(
            options=list(STAGE_ANALYSIS_KINDS), value=kind, description="schedule", layout=wide
        )
        self.stages = widgets.IntSlider(value=stages, min=1, max=MAX_STAGES, description="stages p", layout=wide)
        self.microbatches = widgets.IntSlider(
            value=microbatches, min=1, max=MAX_MICROBATCHES, description="micro m", layout=wide
        )
        self.micro_batch_size = widgets.IntSlider(
            value=micro_batch_size, min=1, max=16, description="seqs / micro", layout=wide
        )
        self.chunks = widgets.IntSlider(
            value=chunks, min=1, max=MAX_CHUNKS, description="chunks v", layout=wide
        )  # disabled, showing 1, except at interleaved (_sync_chunks)
        self.layer_time = widgets.BoundedFloatText(
            value=layer_time_ms, min=0.0, max=1e4, step=0.1, description="layer F (ms)", layout=wide
        )
        self.link = widgets.Dropdown(options=[NO_LINK, *hardware.LINKS], value=link, description="link", layout=wide)
        self.max_bubble = widgets.FloatSlider(
            value=max_bubble_pct,
            min=1.0,
            max=90.0,
            step=1.0,
            readout_format=".0f",
            description="max bubble %",
            layout=wide,
        )
        self.status = widgets.HTML()
        self.fig, self.canvas = figure_canvas((7.4, 2.0), grid_margins(7.4, bottom=0.13))
        self.ax = self.fig.add_subplot()
        self.grid = timeline_grid(self.ax, fixed=True)  # a new time range moves only the drawn ticks
        self.renderer = BlitRenderer(self.canvas, self.grid.animated_artists)
        self.result: pipeline.StageAnalysis | None = None
        self.error: str | None = None
        for control in (
            self.model,
            self.kind,
            self.stages,
            self.microbatches,
            self.micro_batch_size,
            self.chunks,
            self.layer_time,
            self.link,
            self.max_bubble,
        ):
            control.observe(self._on_change, names="value")
        controls = widgets.VBox(
            [
                widgets.HBox([self.model, self.kind]),
                widgets.HBox([self.stages, self.chunks]),
                widgets.HBox([self.microbatches, self.micro_batch_size]),
                widgets.HBox([self.layer_time, self.link]),
                self.max_bubble,
            ]
        )
        self.legend = widgets.HTML(self._legend(split=True))
        super().__init__([controls, self.legend, self.canvas, self.status])
        self._sync_chunks()
        self.update()

    _syncing = False

    def _sync_chunks(self) -> None:
        """chunks v applies to the interleaved schedule only: elsewhere disabled, showing the 1 chunk the schedule
        runs and saying why; the student's v comes back at interleaved (controls.show_what_applies)."""
        kind = self.kind.value
        show_what_applies(self, self.chunks, kind == "interleaved", 1, chunks_unused(kind))

    def frame_neighbour(self, state: dict, name: str, value) -> dict:
        """The state after the student sets `name` to `value`: chunks v shows 1 except at interleaved, where the
        student's v comes back (_sync_chunks)."""
        chosen = value if name == "chunks" else getattr(self.chunks, "_distlab_chosen", state["chunks"])
        after = {**state, name: value}
        after["chunks"] = used_chunks(after["kind"], chosen)
        return after

    def _on_change(self, change=None):
        if self._syncing:
            return
        self._sync_chunks()
        self.update(change)

    # no control changes the axes (the time ticks are drawn ticks over fixed limits): only results are prepared
    prepared_controls = (
        "model",
        "kind",
        "stages",
        "microbatches",
        "micro_batch_size",
        "chunks",
        "layer_time",
        "link",
        "max_bubble",
    )

    frame_texts = ("legend",)  # render says whether weight gradients are drawn apart

    def compute(self) -> pipeline.StageAnalysis:
        return self.compute_for(self.values())

    def compute_for(self, values: dict) -> pipeline.StageAnalysis:
        """pipeline.analyze_stages of these control values (remembered per configuration)."""
        m = models.model(values["model"])
        kind = values["kind"]
        link = None if values["link"] == NO_LINK else hardware.link(values["link"])
        return _analyze_stages(
            m.layers,
            values["stages"],
            values["microbatches"],
            seq_len=m.seq_len,
            hidden=m.hidden,
            micro_batch_size=values["micro_batch_size"],
            layer_time=f"{values['layer_time']!r} ms",
            schedule=kind,
            chunks=values["chunks"] if kind == "interleaved" else 1,
            link=link,
            max_bubble=values["max_bubble"] / 100.0,
        )

    @staticmethod
    def _legend(split: bool) -> str:
        return legend_html(split=split, rows=ROWS_NOTE.format(unit="ms; gaps between ops are activation sends"))

    def render(self, result: pipeline.StageAnalysis) -> bool:
        self.show_text("legend", self._legend(_draws_weight_gradients(result.timeline)))
        return self.grid.update(_in_ms(result.timeline))

    def fade(self) -> bool:
        self.grid.update(None)
        return False

    def status_kind(self, result: pipeline.StageAnalysis) -> str:
        return "warn" if result.warnings else "ok"

    def describe(self, a: pipeline.StageAnalysis) -> str:
        """The analysis in plain text."""
        act = a.activation_bytes
        step, op, rate, transfer = (
            a.step_time_s,
            a.forward_op_time_s,
            a.required_bandwidth_bytes_per_s,
            a.transfer_time_s,
        )
        if step is None or op is None:  # the app always passes layer_time=, which sets both
            raise DistlabError("the stage analysis has no times: layer_time= was not given")
        lines = [
            f"{counted(a.stages, 'stage')} x {counted(a.microbatches, 'microbatch')} ({a.schedule}"
            + (f", v={a.chunks}" if a.chunks > 1 else "")
            + f"), {counted(a.micro_batch_size, 'sequence')} per microbatch [pipeline.analyze_stages]",
            "layers per stage: " + _compact(a.layers_per_stage),
            f"activation per microbatch at each boundary: {format_bytes(act)} (b s h x 2 bytes), each way",
            f"one link per step: {format_bytes(a.link_step_bytes)} each way; all boundaries, "
            f"both ways: {format_bytes(a.step_bytes)}",
            f"bubble: {format_percent(a.bubble_fraction)} of the step idle; step {format_seconds(step)}",
        ]
        if rate is not None:
            lines.append(
                f"bandwidth that hides one send under a forward op of {format_seconds(op)}: "
                f"{format_rate(rate)} per direction"
                + (f"; the link takes {format_seconds(transfer)} per send" if transfer is not None else "")
            )
        if a.warnings:
            lines += [f"warning ({w.code}): {w.message}" for w in a.warnings]
        else:
            lines.append("no warnings: the bubble is under the limit, the stages are even, the link keeps up")
        return "\n".join(lines)


def _in_ms(timeline: pipeline.Timeline) -> pipeline.Timeline:
    """The same timeline with times in milliseconds, for the axis (a shallow, read-only copy)."""
    import dataclasses

    def ms(a):
        out = a * 1e3
        out.flags.writeable = False
        return out

    return dataclasses.replace(
        timeline,
        start=ms(timeline.start),
        end=ms(timeline.end),
        step_time=timeline.step_time * 1e3,
        busy=ms(timeline.busy),
        p2p=timeline.p2p * 1e3,
    )


#: The lesson apps of this module (constructible without arguments); the widget fuzz tests use it.
APPS = [BubbleGridApp, StageAnalysisApp]
