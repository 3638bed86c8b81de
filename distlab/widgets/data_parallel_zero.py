"""Lesson 3 apps: ZeRO memory per GPU against the GPU count, and the gradient all-reduce hidden under backward.

ZeroMemoryApp: model, GPU type and count, fabric -> memory per GPU for plain DP and ZeRO-1/2/3
(stacked bars against the GPU's capacity, drawn in the browser for every GPU count of the slider), and per stage the bytes each GPU sends per step and
their time on the fabric. OverlapApp: model, GPUs, fabric, backward time and bucket count -> the
per-bucket timeline of DDP-style overlap and the exposed communication.
"""

from __future__ import annotations

from dataclasses import dataclass

import ipywidgets as widgets

from .. import dataparallel, hardware, memory, models
from ..errors import DistlabError
from ..plots.data_parallel_zero import STAGE_LABELS, STAGES, overlap_axes
from ..plots.memory_wall import LABELS
from ..units import format_bytes, format_seconds
from .browser import BarsPicture
from .common import (
    GPU_COUNTS,
    BlitRenderer,
    LessonApp,
    attempt,
    event_loop_running,
    figure_canvas,
    fill_order,
    fill_positions,
    gpu_slider,
    nearest_gpu_count,
)
from .controls import CUSTOM_SIZE, custom_size_params
from .framecache import FrameCachingApp
from .prefetch import Prefetcher, PrefetchingApp

__all__ = [
    "CUSTOM",
    "PENDING",
    "ZeroComparison",
    "ZERO_CONTROLS",
    "zero_comparison",
    "describe_comparison",
    "zero_picture_data",
    "zero_payload_steps",
    "ZeroMemoryApp",
    "OverlapApp",
    "APPS",
]

CUSTOM = "custom size"
#: The text under the bars at a GPU count still being priced (in a kernel, for a moment after a change).
PENDING = "pricing this GPU count ..."


@dataclass(frozen=True)
class ZeroComparison:
    """Per stage (0-3): the per-GPU memory (MemoryBreakdown) and the step's communication (StepCommunication)."""

    model: str
    params: float
    gpus: int
    gpu: str
    fabric: str
    memory: dict
    communication: dict

    @property
    def smallest_fitting_stage(self):
        """The lowest stage whose model states fit the GPU, or None."""
        return next((s for s in STAGES if self.memory[s].fits), None)

    def table(self) -> str:
        """Fixed-width text: one row per stage. The last column is as wide as its heading needs: 'time on
        ethernet-400g' ran into 'sent/GPU/step' in a column of 18 (a student's review)."""
        time_heading = "time on " + self.fabric
        wide = max(18, len(time_heading) + 3)
        rows = [f"{'':<10}{'memory/GPU':>11}{'fits':>6}{'sent/GPU/step':>15}{time_heading:>{wide}}"]
        for s in STAGES:
            bd, comm = self.memory[s], self.communication[s]
            rows.append(
                f"{STAGE_LABELS[s]:<10}{format_bytes(bd.total_bytes):>11}{'yes' if bd.fits else 'no':>6}"
                f"{format_bytes(comm.bytes_sent_per_gpu):>15}{format_seconds(comm.time_s):>{wide}}"
            )
        return "\n".join(rows)


#: ZeroMemoryApp's controls whose labels key the browser's cache (distlab.widgets.prefetch, issue 32), in the
#: picture's order; a state is these values and the custom size ("custom_params", a text box: not a key).
ZERO_CONTROLS = ("model", "gpu", "fabric")
#: The parts of distlab.memory.MemoryBreakdown stacked in each bar (model states only: no activations).
ZERO_PARTS = ("weights", "gradients", "optimizer")


def zero_comparison(s: dict, n: int) -> ZeroComparison:
    """Every stage at `n` GPUs in state `s`, from distlab.memory and distlab.dataparallel; raises our error on
    invalid input."""
    model: float | models.TransformerModel
    if s["model"] == CUSTOM:
        model, name = custom_size_params(s["custom_params"]), f"custom {s['custom_params']:g}B"
    else:
        model = models.model(s["model"])
        name = model.name
    gpu, fabric = s["gpu"], s["fabric"]
    mem = {z: memory.training_memory(model, zero=z, dp=n, gpu=gpu, count_activations=False) for z in STAGES}
    layers = getattr(model, "layers", None)  # ZeRO-3 layer by layer, as the step model runs it (custom: 3 x M)
    comm = {z: dataparallel.step_communication(model, zero=z, dp=n, link=fabric, layers=layers) for z in STAGES}
    params = mem[0].config["params"]
    return ZeroComparison(name, params, n, hardware.accelerator(gpu).name, hardware.link(fabric).name, mem, comm)


def describe_comparison(r: ZeroComparison) -> str:
    """The text under the bars: per stage memory, fit, bytes sent per step and time; the smallest stage that fits."""
    m = r.communication[0].gradient_bytes
    head = (
        f"{r.model} ({r.params / 1e9:.2f} B parameters) on {r.gpus} x {r.gpu}, model states only; "
        f"gradients M = {format_bytes(m)}\n"
        "[memory/GPU: memory.training_memory; sent and time: dataparallel.step_communication]"
    )
    fits = r.smallest_fitting_stage
    verdict = (
        "no stage fits: add GPUs, or shard further with tensor and pipeline parallelism"
        if fits is None
        else f"smallest stage that fits: {STAGE_LABELS[fits]}"
    )
    z3 = r.communication[3]
    if z3.layers is not None:
        verdict += (
            f"\nZeRO-3 runs layer by layer, as the step model does: {3 * z3.layers - 1} collectives of M / "
            f"{z3.layers} (no backward gather of the last layer), each paying the ring's latency"
        )
    return f"{head}\n{r.table()}\n{verdict}"


def zero_picture_data(s: dict, results: dict) -> dict:
    """What ZeroMemoryApp's picture shows in state `s`: {"summaries", "errors", "frames"} for every GPU count, from
    `results` {count: ZeroComparison or our error; PENDING where absent}."""
    ordered = [results.get(n) for n in GPU_COUNTS]
    frames: dict = {}
    if any(isinstance(r, ZeroComparison) for r in ordered):
        gpu = hardware.accelerator(s["gpu"])
        frames = {
            "parts": [LABELS.get(k, k) for k in ZERO_PARTS],
            "bars": [
                [[r.memory[z].parts()[k] / 1e9 for k in ZERO_PARTS] for z in STAGES]
                if isinstance(r, ZeroComparison)
                else []
                for r in ordered
            ],
            "labels": [STAGE_LABELS[z] for z in STAGES],
            # each bar's total as the text writes it (1.19 TB, not 1190 GB: issue 31)
            "totals": [
                [format_bytes(sum(r.memory[z].parts()[k] for k in ZERO_PARTS)) for z in STAGES]
                if isinstance(r, ZeroComparison)
                else []
                for r in ordered
            ],
            "unit": "GB",
            "capacity": gpu.memory_bytes / 1e9,
            "capacity_label": f"{gpu.name}: {format_bytes(gpu.memory_bytes)} ({gpu.memory_text()})",
        }
    summaries = [
        PENDING if r is None else describe_comparison(r) if isinstance(r, ZeroComparison) else "" for r in ordered
    ]
    errors = [str(r) if isinstance(r, DistlabError) else "" for r in ordered]
    return {"summaries": summaries, "errors": errors, "frames": frames}


def zero_payload_steps(s: dict):
    """A generator computing state `s` one GPU count per step (distlab.widgets.prefetch runs it in the kernel's idle
    turns); its return value is zero_picture_data with every count."""
    results = {}
    for n in GPU_COUNTS:
        results[n] = attempt(zero_comparison, s, n)
        yield n
    return zero_picture_data(s, results)


class ZeroMemoryApp(PrefetchingApp, LessonApp):
    """Model, GPU type, GPU count and fabric -> memory per GPU for every ZeRO stage, and its communication.

    The bars are drawn in the browser (distlab.widgets.browser.BarsPicture): one stacked bar per stage (weights,
    gradients, optimizer states) against the GPU's capacity, sent for every GPU count of the picture's own slider
    (`gpus`) at once with the text of each, so dragging it needs no kernel round trip. The other controls change
    the physics: the current count answers first, the others are filled in the kernel's later turns
    (common.fill_in_turns); the states one dropdown change away are then prefetched into the browser
    (distlab.widgets.prefetch, issue 32). `result` is a ZeroComparison (None on invalid input), `error` our message
    instead.
    """

    PREFETCH_CONTROLS = ZERO_CONTROLS

    summary_in_picture = True
    PARTS = ZERO_PARTS

    def __init__(self, model="llama2-7b", gpu="h100-sxm", gpus=8, fabric="ib-ndr", custom_params_b=7.5):
        self.model = widgets.Dropdown(options=[*models.MODELS, CUSTOM], value=model, description="model")
        # shown only for the custom model: a greyed "size (B) 7.5" beside llama2-70b read as that model's size
        self.custom_params = widgets.FloatText(
            value=custom_params_b,
            description=CUSTOM_SIZE,
            disabled=model != CUSTOM,
            layout=widgets.Layout(width="180px", display=None if model == CUSTOM else "none"),
        )
        self.gpu = widgets.Dropdown(options=list(hardware.ACCELERATORS), value=gpu, description="GPU")
        self.picture = BarsPicture(description="GPUs (N)", width=640, height=320)
        self.picture.show_options(GPU_COUNTS, [""] * len(GPU_COUNTS), value=nearest_gpu_count(gpus))
        self.gpus = self.picture
        self.fabric = widgets.Dropdown(options=list(hardware.LINKS), value=fabric, description="fabric")
        self.status = widgets.HTML()
        self.result: ZeroComparison | None = None
        self.error: str | None = None
        self._results: dict = {}  # GPU count -> ZeroComparison or DistlabError, for the current other controls
        for control in (self.model, self.custom_params, self.gpu, self.fabric):
            control.observe(self._on_change, names="value")
        # the browser's cache of the states one change away (issue 32): bars.js watches these controls
        self.picture.controls = [getattr(self, name) for name in ZERO_CONTROLS]
        self.picture.inputs = [self.custom_params]
        self.prefetcher = Prefetcher(self.picture, zero_payload_steps)
        controls = widgets.VBox([widgets.HBox([self.model, self.custom_params]), widgets.HBox([self.gpu, self.fabric])])
        super().__init__([controls, self.picture, self.status])
        self._refresh()
        self.picture.observe(self._on_gpus, names="value")

    _syncing = False
    #: The background filling of the other GPU counts in a kernel (an asyncio.Future; None when done at once).
    filling = None

    def state(self) -> dict:
        """The controls' values and the custom size: what the picture shows depends on these (and the GPU count)."""
        return {
            **{name: getattr(self, name).value for name in ZERO_CONTROLS},
            "custom_params": self.custom_params.value,
        }

    def _on_change(self, change=None):
        self.prefetcher.forget(change)
        self._moved = change.get("owner") if change is not None else None
        self.custom_params.disabled = self.model.value != CUSTOM
        self.custom_params.layout.display = None if self.model.value == CUSTOM else "none"
        self._refresh()

    def _on_gpus(self, change=None):
        if not self._syncing:
            self.update()

    def _refresh(self) -> None:
        """Every GPU count of the slider for the other controls, sent at once: a state the kernel has computed
        already (prefetched, or shown before) complete at once; otherwise the current count first (the others shown
        as PENDING), the others in later turns of the kernel's event loop (at once outside one). Then, in a kernel,
        the states one control change away are prefetched into the browser (_prefetch)."""
        self._generation += 1
        generation = self._generation
        self.prefetcher.stop()
        s = self.state()
        known = self.prefetcher.lookup(s)
        if known is not None:
            self._results, self.filling = {}, None
            self._show(known)
            self._prefetch(generation)
            return
        current = self.gpus.value
        self._results = {current: attempt(zero_comparison, s, current)}
        if event_loop_running():
            self._send()
        pending = fill_order([n for n in GPU_COUNTS if n != current], current)

        def compute(n: int) -> None:
            self._results[n] = attempt(zero_comparison, s, n)

        self.filling = fill_positions(pending, compute, lambda: generation == self._generation, self._send)
        if self.filling is not None:
            self.filling.add_done_callback(lambda _: self._prefetch(generation))
        else:
            self._prefetch(generation)

    def _send(self) -> None:
        """The bars and text of every GPU count computed so far to the picture (PENDING where not yet); once every
        count is computed, the kernel remembers them (a change back here is shown complete at once)."""
        shown = zero_picture_data(self.state(), self._results)
        if len(self._results) == len(GPU_COUNTS):
            self.prefetcher.remember(self.state(), shown)
        self._show(shown)

    def _show(self, shown: dict) -> None:
        self._syncing = True
        try:
            self.picture.show_options(GPU_COUNTS, shown["summaries"], shown["errors"], frames=shown["frames"])
        finally:
            self._syncing = False
        self.update()

    def _comparison(self, n: int) -> ZeroComparison:
        """zero_comparison in the controls' state."""
        return zero_comparison(self.state(), n)

    def compute(self) -> ZeroComparison:
        """Every stage at the chosen GPU count (computed by _refresh); raises our error on invalid input."""
        result = self._results.get(self.gpus.value)
        if result is None:
            result = self._results[self.gpus.value] = attempt(self._comparison, self.gpus.value)
        if isinstance(result, DistlabError):
            raise result
        return result

    def status_kind(self, result: ZeroComparison) -> str:
        return "ok" if result.smallest_fitting_stage is not None else "bad"

    def describe(self, r: ZeroComparison) -> str:
        """describe_comparison: the text under the bars."""
        return describe_comparison(r)


#: The words under the timeline for each OverlapTimeline.exposure.
_EXPOSURE = {
    "one bucket": "one bucket: it is ready only when backward ends, so nothing overlaps",
    "last bucket": "only the last bucket shows: every other one finished under backward",
    "communication-bound": "communication-bound: the buckets queue up behind each other",
}


class OverlapApp(FrameCachingApp, LessonApp):
    """Model, GPUs, fabric, backward time and buckets -> the bucketed all-reduce under backward.

    `result` is the OverlapTimeline (None on invalid input), `error` our message instead.
    """

    def __init__(self, model="llama2-7b", gpus=8, fabric="ib-ndr", backward_ms=800.0, buckets=4):
        self.model = widgets.Dropdown(options=list(models.MODELS), value=model, description="model")
        self.gpus = gpu_slider(gpus, "GPUs (N)")
        self.fabric = widgets.Dropdown(options=list(hardware.LINKS), value=fabric, description="fabric")
        self.backward_ms = widgets.FloatSlider(
            value=backward_ms,
            min=0.0,
            max=5000.0,
            step=10.0,
            readout_format=".0f",
            description="backward (ms)",
            continuous_update=True,
            style={"description_width": "initial"},
        )
        self.buckets = widgets.IntSlider(value=buckets, min=1, max=64, description="buckets", continuous_update=True)
        self.status = widgets.HTML()
        self.fig, self.canvas = figure_canvas((6.4, 2.4), dict(left=0.17, right=0.97, bottom=0.2, top=0.95))
        self.ax = self.fig.add_subplot()
        self.chart = overlap_axes(self.ax, fixed=True)
        self.renderer = BlitRenderer(self.canvas, self.chart.animated_artists)
        self.result: dataparallel.OverlapTimeline | None = None
        self.error: str | None = None
        for control in (self.model, self.gpus, self.fabric, self.backward_ms, self.buckets):
            control.observe(self._on_change, names="value")
        controls = widgets.VBox(
            [
                widgets.HBox([self.model, self.fabric]),
                self.gpus,
                widgets.HBox([self.backward_ms, self.buckets]),
            ]
        )
        super().__init__([controls, self.canvas, self.status])
        self.update()

    def _on_change(self, change=None):
        self.update(change)

    # no control changes the axes (the time ticks are drawn ticks over fixed limits): only results are prepared
    prepared_controls = ("model", "gpus", "fabric", "backward_ms", "buckets")

    def compute(self) -> dataparallel.OverlapTimeline:
        """The per-bucket timeline from distlab.dataparallel.bucketed_overlap."""
        return self.compute_for(self.values())

    def compute_for(self, values: dict) -> dataparallel.OverlapTimeline:
        """dataparallel.bucketed_overlap for these control values."""
        m = dataparallel.gradient_bytes(values["model"])
        return dataparallel.bucketed_overlap(
            m, values["backward_ms"] / 1e3, values["gpus"], buckets=values["buckets"], link=values["fabric"]
        )

    def render(self, timeline: dataparallel.OverlapTimeline) -> bool:
        return self.chart.update(timeline)

    def describe(self, t: dataparallel.OverlapTimeline) -> str:
        """The text under the timeline (every number from dataparallel.bucketed_overlap)."""
        if t.exposure == "nothing to send":
            return f"{t.dp} GPU: nothing to all-reduce, nothing exposed."
        each = format_bytes(float(t.bucket_bytes[0]))
        no_overlap = t.no_overlap_s
        last = float(t.comm_s[-1])
        why = _EXPOSURE[t.exposure]
        return (
            f"{t.buckets} bucket{'s' if t.buckets > 1 else ''} of {each}, each {t.op} "
            f"{format_seconds(last)} over {t.dp} GPUs on {hardware.link(self.value_of('fabric')).name}; "
            f"{format_seconds(t.comm_total_s)} of communication in all [dataparallel.bucketed_overlap]\n"
            f"{format_seconds(t.hidden_s)} hidden under {format_seconds(t.backward_s)} of backward, "
            f"{format_seconds(t.exposed_s)} exposed ({why})\n"
            f"backward + exposed = {format_seconds(t.step_s)}; without overlap "
            f"{format_seconds(no_overlap)}"
        )


#: The lesson apps of this module (constructible without arguments); the widget fuzz tests use it.
APPS = [ZeroMemoryApp, OverlapApp]
