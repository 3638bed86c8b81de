"""Lesson 1 app: per-GPU training memory as a stacked bar against the GPU's capacity."""

from __future__ import annotations

import ipywidgets as widgets

from .. import hardware, memory, models
from ..plots.memory_wall import legend_html, memory_bars
from ..units import format_bytes
from .common import BlitRenderer, LessonApp, axes_state, figure_canvas, gpu_slider

__all__ = ["CUSTOM", "ZERO_LABELS", "PRECISION_OPTIONS", "MemoryWallApp", "APPS"]

CUSTOM = "custom size"
ZERO_LABELS = [("plain DP", 0), ("ZeRO-1", 1), ("ZeRO-2", 2), ("ZeRO-3", 3)]


def _distinct_precisions() -> list[str]:
    """The recipes of distlab.memory.PRECISION_RECIPES that store different bytes, each under its first name:
    mixed, fp32, fp8 (bf16 and fp16 hold what mixed holds)."""
    seen, names = set(), []
    for name, r in memory.PRECISION_RECIPES.items():
        key = (r.weight_bytes, r.gradient_bytes, r.optimizer_bytes, r.activation_bytes)
        if key not in seen:
            seen.add(key)
            names.append(name)
    return names


PRECISION_OPTIONS = _distinct_precisions()


class MemoryWallApp(LessonApp):
    """Model, precision, GPU type and count, ZeRO stage -> memory bars, summary and fit verdict.

    `result` holds the current MemoryBreakdown (None on invalid input); `error` holds the
    message shown instead (None when valid).
    """

    def __init__(
        self,
        model="llama2-7b",
        precision="mixed",
        gpu="h100-sxm",
        gpus=1,
        zero=0,
        custom_params_b=7.0,
        activations=False,
        recompute="selective",
    ):
        self.model = widgets.Dropdown(options=[*models.MODELS, CUSTOM], value=model, description="model")
        # shown only for the custom model: a greyed "size (B) 7.5" beside llama2-70b read as that model's size
        self.custom_params = widgets.FloatText(
            value=custom_params_b,
            description="size (B)",
            disabled=model != CUSTOM,
            layout=widgets.Layout(width="180px", display=None if model == CUSTOM else "none"),
        )
        self.precision = widgets.Dropdown(options=PRECISION_OPTIONS, value=precision, description="precision")
        self.gpu = widgets.Dropdown(options=list(hardware.ACCELERATORS), value=gpu, description="GPU")
        self.gpus = gpu_slider(gpus, "GPUs")
        self.zero = widgets.ToggleButtons(
            options=ZERO_LABELS, value=zero, description="sharding", style={"button_width": "80px"}
        )
        self.activations = widgets.Checkbox(
            value=activations,
            description="count activations (1 sequence per GPU)",
            layout=widgets.Layout(width="330px"),
        )
        self.recompute = widgets.Dropdown(
            options=list(memory.RECOMPUTE_MODES), value=recompute, description="recompute", disabled=not activations
        )
        self.status = widgets.HTML()
        self.fig, self.canvas = figure_canvas((6.4, 3.4), dict(left=0.08, right=0.98, bottom=0.09, top=0.96))
        self.ax = self.fig.add_subplot()
        self.bars = memory_bars(self.ax, 2, legend=False)
        self.renderer = BlitRenderer(self.canvas, self.bars.animated_artists, static_key=lambda: axes_state(self.fig))
        self.result: memory.MemoryBreakdown | None = None
        self.error: str | None = None
        self.single: memory.MemoryBreakdown | None = None
        for control in (
            self.model,
            self.custom_params,
            self.precision,
            self.gpu,
            self.gpus,
            self.zero,
            self.activations,
            self.recompute,
        ):
            control.observe(self._on_change, names="value")
        controls = widgets.VBox(
            [
                widgets.HBox([self.model, self.custom_params]),
                widgets.HBox([self.precision, self.gpu]),
                self.gpus,
                self.zero,
                widgets.HBox([self.activations, self.recompute]),
            ]
        )
        super().__init__([controls, widgets.HTML(legend_html()), self.canvas, self.status])
        self.update()

    def _on_change(self, change=None):
        self.custom_params.disabled = self.model.value != CUSTOM
        self.custom_params.layout.display = None if self.model.value == CUSTOM else "none"
        self.recompute.disabled = not self.activations.value
        self.update()

    def _model(self):
        if self.model.value == CUSTOM:
            return self.custom_params.value * 1e9
        return models.model(self.model.value)

    def compute(self) -> memory.MemoryBreakdown:
        """Per GPU in the chosen setup (distlab.memory.training_memory); `single` holds the same model on
        one GPU without sharding, drawn beside it.

        With activations counted, each GPU holds one sequence of the model's context length;
        'selective' recomputation keeps no attention scores, as FlashAttention.
        """
        kwargs = dict(
            precision=self.precision.value,
            gpu=self.gpu.value,
            recompute=self.recompute.value,
            count_activations=self.activations.value,
            in_flight_microbatches=1,
        )
        model = self._model()
        self.single = memory.training_memory(model, **kwargs)
        return memory.training_memory(model, zero=self.zero.value, dp=self.gpus.value, **kwargs)

    def render(self, chosen) -> bool:
        labels = ["one GPU, no sharding", "each GPU in your setup"]
        gpu = hardware.accelerator(self.gpu.value)
        return self.bars.update(
            [self.single.parts(), chosen.parts()],
            labels,
            chosen.capacity_bytes,
            f"{gpu.name}: {format_bytes(gpu.memory_bytes)}",
        )

    def fade(self) -> bool:
        return self.bars.update([{}, {}], faded=True)

    def status_kind(self, chosen) -> str:
        return "ok" if chosen.fits else "bad"

    def describe(self, bd) -> str:
        """The text under the chart: the per-GPU parts, the total and the verdict."""
        parts = ", ".join(f"{name} {format_bytes(value)}" for name, value in bd.parts().items())
        z = self.zero.value
        setup = f"{self.gpus.value} GPU{'s' if self.gpus.value > 1 else ''}, {'plain DP' if z == 0 else f'ZeRO-{z}'}"
        return f"{setup}: {format_bytes(bd.total_bytes)} per GPU ({parts}) [memory.training_memory]\n{bd.verdict()}"


#: The lesson apps of this module (constructible without arguments); the widget fuzz tests use it.
APPS = [MemoryWallApp]
