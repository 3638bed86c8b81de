"""Lesson 3 apps: ZeRO memory per GPU against the GPU count, and the gradient all-reduce hidden under backward.

ZeroMemoryApp: model, GPU type and count, fabric -> memory per GPU for plain DP and ZeRO-1/2/3
(lines against N, with the GPU's capacity), and per stage the bytes each GPU sends per step and
their time on the fabric. OverlapApp: model, GPUs, fabric, backward time and bucket count -> the
per-bucket timeline of DDP-style overlap and the exposed communication.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import ipywidgets as widgets
import numpy as np

from .. import dataparallel, hardware, memory, models
from ..plots.data_parallel_zero import STAGE_LABELS, STAGES, legend_html, overlap_axes, zero_memory_axes
from ..units import format_bytes, format_seconds
from .common import BlitRenderer, LessonApp, axes_state, figure_canvas, gpu_slider

__all__ = ["CUSTOM", "CURVE_GPUS", "ZeroComparison", "catalog_span", "ZeroMemoryApp", "OverlapApp", "APPS"]

CUSTOM = "custom size"
#: The GPU counts the curves are drawn at, 1 to 1024: 16 per doubling on the log axis (every whole number up to
#: 22), where every curve a/N + b is smooth; fewer points than 1 to 1024 draw faster and look the same.
CURVE_GPUS = np.unique(np.round(2.0 ** np.linspace(0, 10, 161)).astype(int))


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
        """Fixed-width text: one row per stage."""
        rows = [f"{'':<10}{'memory/GPU':>11}{'fits':>6}{'sent/GPU/step':>15}{'time on ' + self.fabric:>18}"]
        for s in STAGES:
            bd, comm = self.memory[s], self.communication[s]
            rows.append(
                f"{STAGE_LABELS[s]:<10}{format_bytes(bd.total_bytes):>11}{'yes' if bd.fits else 'no':>6}"
                f"{format_bytes(comm.bytes_sent_per_gpu):>15}{format_seconds(comm.time_s):>18}"
            )
        return "\n".join(rows)


@functools.lru_cache(maxsize=1)
def catalog_span() -> tuple[float, float]:
    """(low, high) GB of model states per GPU over every catalog model at 1 to 1,024 GPUs, and every GPU's memory:
    the y range ZeroMemoryApp keeps, so that picking another model or GPU never rescales the axis."""
    ends = [dataparallel.memory_per_gpu_curves(name, CURVE_GPUS[[0, -1]]) for name in models.MODELS]
    low = min(float(curves[3][-1]) for curves in ends)
    high = max(float(curves[0][0]) for curves in ends)
    capacities = [hardware.accelerator(name).memory_bytes for name in hardware.ACCELERATORS]
    return min(low, *capacities) / 1e9, max(high, *capacities) / 1e9


class ZeroMemoryApp(LessonApp):
    """Model, GPU type, GPU count and fabric -> memory per GPU for every ZeRO stage, and its communication.

    `result` is a ZeroComparison (None on invalid input), `error` our message instead.
    """

    def __init__(self, model="llama2-7b", gpu="h100-sxm", gpus=8, fabric="ib-ndr", custom_params_b=7.5):
        self.model = widgets.Dropdown(options=[*models.MODELS, CUSTOM], value=model, description="model")
        # shown only for the custom model: a greyed "size (B) 7.5" beside llama2-70b read as that model's size
        self.custom_params = widgets.FloatText(
            value=custom_params_b,
            description="size (B)",
            disabled=model != CUSTOM,
            layout=widgets.Layout(width="180px", display=None if model == CUSTOM else "none"),
        )
        self.gpu = widgets.Dropdown(options=list(hardware.ACCELERATORS), value=gpu, description="GPU")
        self.gpus = gpu_slider(gpus, "GPUs (N)")
        self.fabric = widgets.Dropdown(options=list(hardware.LINKS), value=fabric, description="fabric")
        self.status = widgets.HTML()
        self.fig, self.canvas = figure_canvas((6.4, 3.4), dict(left=0.1, right=0.97, bottom=0.1, top=0.96))
        self.ax = self.fig.add_subplot()
        self.chart = zero_memory_axes(self.ax, legend=False)
        self.chart.y_span = catalog_span()
        self.chart.label_capacity = False  # named in the legend above the canvas: text is slow to render
        self.legend = widgets.HTML(legend_html())
        self.renderer = BlitRenderer(self.canvas, self.chart.animated_artists, self.chart.data_artists)
        self.result: ZeroComparison | None = None
        self.error: str | None = None
        self._curve_key = None
        for control in (self.model, self.custom_params, self.gpu, self.fabric):
            control.observe(self._on_change, names="value")
        self.gpus.observe(self._on_slider, names="value")
        controls = widgets.VBox(
            [
                widgets.HBox([self.model, self.custom_params]),
                widgets.HBox([self.gpu, self.fabric]),
                self.gpus,
            ]
        )
        super().__init__([controls, self.legend, self.canvas, self.status])
        self.update()

    def _on_change(self, change=None):
        self.custom_params.disabled = self.model.value != CUSTOM
        self.custom_params.layout.display = None if self.model.value == CUSTOM else "none"
        self.update()

    def _on_slider(self, change=None):
        self.update()

    def _model(self):
        if self.model.value == CUSTOM:
            value = self.custom_params.value
            return value * 1e9, f"custom {value:g}B"
        m = models.model(self.model.value)
        return m, m.name

    def compute(self) -> ZeroComparison:
        """Every stage at the chosen GPU count, from distlab.memory and distlab.dataparallel."""
        model, name = self._model()
        n, gpu, fabric = self.gpus.value, self.gpu.value, self.fabric.value
        mem = {s: memory.training_memory(model, zero=s, dp=n, gpu=gpu, count_activations=False) for s in STAGES}
        comm = {s: dataparallel.step_communication(model, zero=s, dp=n, link=fabric) for s in STAGES}
        params = mem[0].config["params"]
        return ZeroComparison(name, params, n, hardware.accelerator(gpu).name, hardware.link(fabric).name, mem, comm)

    def render(self, result: ZeroComparison):
        """Move the marker (blit); when the model or GPU changed, replace the curves too (the data layer: the
        axis spans every catalog model and GPU, so it stays; a custom size beyond them rescales it)."""
        full = False
        key = (result.params, self.gpu.value)
        if key != self._curve_key:
            model, _ = self._model()
            curves = dataparallel.memory_per_gpu_curves(model, CURVE_GPUS)
            gpu = hardware.accelerator(self.gpu.value)
            label = f"{gpu.name}: {format_bytes(gpu.memory_bytes)}"
            full = self.chart.set_curves(CURVE_GPUS, curves, gpu.memory_bytes, label)
            self.legend.value = legend_html(label)
            self._curve_key = key
        self.chart.set_marker(result.gpus, {s: bd.total_bytes for s, bd in result.memory.items()})
        return full

    def fade(self) -> bool:
        self.chart.set_marker(self.gpus.value, None)
        return False

    def status_kind(self, result: ZeroComparison) -> str:
        return "ok" if result.smallest_fitting_stage is not None else "bad"

    def describe(self, r: ZeroComparison) -> str:
        """The text under the chart: per stage memory, fit, bytes sent per step and time; the smallest stage that fits."""
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
        return f"{head}\n{r.table()}\n{verdict}"


#: The words under the timeline for each OverlapTimeline.exposure.
_EXPOSURE = {
    "one bucket": "one bucket: it is ready only when backward ends, so nothing overlaps",
    "last bucket": "only the last bucket shows: every other one finished under backward",
    "communication-bound": "communication-bound: the buckets queue up behind each other",
}


class OverlapApp(LessonApp):
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
            description="backward (ms)",
            continuous_update=True,
            style={"description_width": "initial"},
        )
        self.buckets = widgets.IntSlider(value=buckets, min=1, max=64, description="buckets", continuous_update=True)
        self.status = widgets.HTML()
        self.fig, self.canvas = figure_canvas((6.4, 2.4), dict(left=0.17, right=0.97, bottom=0.2, top=0.95))
        self.ax = self.fig.add_subplot()
        self.chart = overlap_axes(self.ax)
        self.renderer = BlitRenderer(self.canvas, self.chart.animated_artists, static_key=lambda: axes_state(self.fig))
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
        self.update()

    def compute(self) -> dataparallel.OverlapTimeline:
        """The per-bucket timeline from distlab.dataparallel.bucketed_overlap."""
        m = dataparallel.gradient_bytes(self.model.value)
        return dataparallel.bucketed_overlap(
            m, self.backward_ms.value / 1e3, self.gpus.value, buckets=self.buckets.value, link=self.fabric.value
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
            f"{format_seconds(last)} over {t.dp} GPUs on {hardware.link(self.fabric.value).name}; "
            f"{format_seconds(t.comm_total_s)} of communication in all [dataparallel.bucketed_overlap]\n"
            f"{format_seconds(t.hidden_s)} hidden under {format_seconds(t.backward_s)} of backward, "
            f"{format_seconds(t.exposed_s)} exposed ({why})\n"
            f"backward + exposed = {format_seconds(t.step_s)}; without overlap "
            f"{format_seconds(no_overlap)}"
        )


#: The lesson apps of this module (constructible without arguments); the widget fuzz tests use it.
APPS = [ZeroMemoryApp, OverlapApp]
