"""Lesson 1 app: per-GPU training memory as a stacked bar against the GPU's capacity.

The bars are drawn in the browser (distlab.widgets.browser.BarsPicture): the app sends them for every GPU count
of the slider at once, with the text of each, so dragging the GPU slider needs no kernel round trip; the other
controls change the physics and send every count again (46 calls of distlab.memory.training_memory: the current
count first, the others in the kernel's later turns). The pictures of every state one dropdown, toggle or checkbox
change away are computed in the kernel's idle turns and held by the browser (distlab.widgets.prefetch, issue 32),
so such a change redraws there at once and the kernel confirms it.
"""

from __future__ import annotations


import ipywidgets as widgets

from .. import hardware, memory, models
from ..errors import DistlabError
from ..plots.memory_wall import LABELS
from ..units import format_bytes
from .browser import BarsPicture
from .common import (
    GPU_COUNTS,
    LessonApp,
    attempt,
    event_loop_running,
    fill_order,
    fill_positions,
    nearest_gpu_count,
)
from .controls import CUSTOM_SIZE, custom_size_params
from .prefetch import Prefetcher, PrefetchingApp

__all__ = [
    "CUSTOM",
    "PENDING",
    "ZERO_LABELS",
    "PRECISION_OPTIONS",
    "CONTROLS",
    "model_of",
    "breakdown",
    "picture_data",
    "payload_steps",
    "MemoryWallApp",
    "APPS",
]

CUSTOM = "custom size"
#: The text under the picture at a GPU count still being priced (in a kernel, for a moment after a change).
PENDING = "pricing this GPU count ..."
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


#: The app's controls whose labels key the browser's cache (distlab.widgets.prefetch), in the picture's order. A
#: state is these values and the custom size ("custom_params", a text box: not a key; the cache is refilled after it
#: changes).
CONTROLS = ("model", "precision", "gpu", "zero", "activations", "recompute")


def model_of(s: dict):
    """The model state `s` names (a parameter count for the custom size)."""
    return custom_size_params(s["custom_params"]) if s["model"] == CUSTOM else models.model(s["model"])


def breakdown(s: dict, gpus: int | None) -> memory.MemoryBreakdown:
    """Per GPU with `gpus` GPUs in state `s` (distlab.memory.training_memory); None: the same model on one GPU
    without sharding (drawn beside it).

    With activations counted, each GPU holds one sequence of the model's context length; 'selective' recomputation
    keeps no attention scores, as FlashAttention.
    """
    kwargs = dict(
        precision=s["precision"],
        gpu=s["gpu"],
        recompute=s["recompute"],
        count_activations=s["activations"],
        in_flight_microbatches=1,
    )
    model = model_of(s)
    if gpus is None:
        return memory.training_memory(model, **kwargs)
    return memory.training_memory(model, zero=s["zero"], dp=gpus, **kwargs)


def picture_data(s: dict, single, results: dict) -> dict:
    """What the picture shows in state `s`: {"summaries", "errors", "frames"} for every GPU count, from `single` (the
    one-GPU breakdown, or None when it is our error) and `results` {count: breakdown or our error; PENDING where
    absent}."""
    ordered = [results.get(n) for n in GPU_COUNTS]
    valid = [r for r in ordered if r is not None and not isinstance(r, DistlabError)]
    frames: dict = {}
    if valid and single is not None:
        gpu = hardware.accelerator(s["gpu"])
        # only the parts the setup counts: activations left out are 0 B, and a legend entry for them named a
        # colour the picture does not draw (issue 31); the last part is the one left out, so colours stay put
        counted = [k for k, v in single.parts().items() if v > 0]

        def kept(parts: dict) -> dict:
            return {k: parts[k] for k in counted}

        frames = {
            "parts": [LABELS.get(k, k) for k in counted],
            "bars": [
                [_gb(kept(single.parts())), _gb(kept(r.parts()))]
                if r is not None and not isinstance(r, DistlabError)
                else []
                for r in ordered
            ],
            "labels": ["one GPU, no sharding", "each GPU in your setup"],
            # each bar's total as the text writes it (1.19 TB, not 1190 GB: issue 31)
            "totals": [
                [format_bytes(sum(kept(single.parts()).values())), format_bytes(sum(kept(r.parts()).values()))]
                if r is not None and not isinstance(r, DistlabError)
                else []
                for r in ordered
            ],
            "unit": "GB",
            "capacity": valid[0].capacity_bytes / 1e9,
            "capacity_label": f"{gpu.name}: {format_bytes(gpu.memory_bytes)} ({gpu.memory_text()})",
        }
    summaries = [
        PENDING if r is None else "" if isinstance(r, DistlabError) else _describe(r, n, s["zero"])
        for n, r in zip(GPU_COUNTS, ordered)
    ]
    errors = [str(r) if isinstance(r, DistlabError) else "" for r in ordered]
    return {"summaries": summaries, "errors": errors, "frames": frames}


def payload_steps(s: dict):
    """A generator computing state `s` one GPU count per step (distlab.widgets.prefetch runs it in the kernel's idle
    turns); its return value is picture_data with every count."""
    single = attempt(breakdown, s, None)
    if isinstance(single, DistlabError):
        return picture_data(s, None, {n: single for n in GPU_COUNTS})
    results = {}
    for n in GPU_COUNTS:
        results[n] = attempt(breakdown, s, n)
        yield n
    return picture_data(s, single, results)


def _describe(bd, gpus: int, z: int) -> str:
    """The text under the chart: the per-GPU parts, the total, what the activations hold and the verdict. The
    activations name their sequence: lesson 1 asks what one 8,192-token sequence of Llama-3.1-8B adds, and the
    text said only "activations 36.5 GB"; left out, they read "not counted", not "0 B" (review v18)."""
    parts = ", ".join(
        f"{name} {format_bytes(value)}" if name != "activations" or bd.activations_counted else f"{name} not counted"
        for name, value in bd.parts().items()
    )
    setup = f"{gpus} GPU{'s' if gpus > 1 else ''}, {'plain DP' if z == 0 else f'ZeRO-{z}'}"
    held = ""
    if bd.activations_counted:
        c = bd.config
        held = f"\nactivations: one {c['seq_len']:,}-token sequence per GPU, recompute={c['recompute']}"
    return f"{setup}: {format_bytes(bd.total_bytes)} per GPU ({parts}) [memory.training_memory]{held}\n{bd.verdict()}"


class MemoryWallApp(PrefetchingApp, LessonApp):
    """Model, precision, GPU type and count, ZeRO stage -> memory bars, summary and fit verdict.

    `gpus` is the picture's own slider (in the browser). `result` holds the current MemoryBreakdown (None on
    invalid input); `error` holds the message shown instead (None when valid).
    """

    PREFETCH_CONTROLS = CONTROLS

    summary_in_picture = True

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
            description=CUSTOM_SIZE,
            disabled=model != CUSTOM,
            layout=widgets.Layout(width="180px", display=None if model == CUSTOM else "none"),
        )
        self.precision = widgets.Dropdown(options=PRECISION_OPTIONS, value=precision, description="precision")
        self.gpu = widgets.Dropdown(options=list(hardware.ACCELERATORS), value=gpu, description="GPU")
        start = nearest_gpu_count(gpus)  # the nearest count the slider offers
        self.picture = BarsPicture(description="GPUs", width=640, height=320)
        self.picture.show_options(GPU_COUNTS, [""] * len(GPU_COUNTS), value=start)
        self.gpus = self.picture
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
        self.result: memory.MemoryBreakdown | None = None
        self.error: str | None = None
        self.single: memory.MemoryBreakdown | None = None
        self._results: dict = {}  # GPU count -> MemoryBreakdown or DistlabError, for the current other controls
        for control in (
            self.model,
            self.custom_params,
            self.precision,
            self.gpu,
            self.zero,
            self.activations,
            self.recompute,
        ):
            control.observe(self._on_change, names="value")
        # the browser's cache of the states one change away (issue 32): bars.js watches these controls
        self.picture.controls = [getattr(self, name) for name in CONTROLS]
        self.picture.inputs = [self.custom_params]
        self.prefetcher = Prefetcher(self.picture, payload_steps)
        controls = widgets.VBox(
            [
                widgets.HBox([self.model, self.custom_params]),
                widgets.HBox([self.precision, self.gpu]),
                self.zero,
                widgets.HBox([self.activations, self.recompute]),
            ]
        )
        super().__init__([controls, self.picture, self.status])
        self._refresh()
        self.picture.observe(self._on_gpus, names="value")

    _syncing = False

    def state(self) -> dict:
        """The controls' values and the custom size: what the picture shows depends on these (and the GPU count)."""
        return {**{name: getattr(self, name).value for name in CONTROLS}, "custom_params": self.custom_params.value}

    def _on_change(self, change=None):
        self.prefetcher.forget(change)
        self._moved = change.get("owner") if change is not None else None
        self.custom_params.disabled = self.model.value != CUSTOM
        self.custom_params.layout.display = None if self.model.value == CUSTOM else "none"
        self.recompute.disabled = not self.activations.value
        self._refresh()

    def _on_gpus(self, change=None):
        if not self._syncing:
            self.update()

    def _refresh(self) -> None:
        """Every GPU count of the slider for the other controls: the bars and the text of each, sent at once.

        A state the kernel has computed already (prefetched, or shown before) is sent complete at once. Otherwise
        the current count is computed and sent first (the others shown as pending); the others follow in turns of
        the kernel's event loop (common.fill_in_turns), so the control answers after one count. Then, in a kernel,
        the states one control change away are prefetched into the browser (_prefetch)."""
        s = self.state()
        single = attempt(breakdown, s, None)
        self._generation += 1
        generation = self._generation
        self.prefetcher.stop()
        known = self.prefetcher.lookup(s)
        if isinstance(single, DistlabError) or known is not None:
            self.single = None if isinstance(single, DistlabError) else single
            self._results = {n: single for n in GPU_COUNTS} if self.single is None else {}
            self.filling = None
            self._show(known if known is not None else picture_data(s, None, self._results))
            self._prefetch(generation)
            return
        current = self.gpus.value
        self.single, self._results = single, {current: attempt(breakdown, s, current)}
        if event_loop_running():  # in a kernel: the current count now, the others after (without one: once, below)
            self._send()
        pending = fill_order([n for n in GPU_COUNTS if n != current], current)

        def compute(n: int) -> None:
            self._results[n] = attempt(breakdown, s, n)

        self.filling = fill_positions(pending, compute, lambda: generation == self._generation, self._send)
        if self.filling is not None:
            self.filling.add_done_callback(lambda _: self._prefetch(generation))
        else:
            self._prefetch(generation)

    #: The background filling of the other GPU counts in a kernel (an asyncio.Future; None when done at once).
    filling = None

    def _send(self) -> None:
        """The bars and text of every GPU count computed so far to the picture (PENDING where not yet); once every
        count is computed, the kernel remembers them (a change back here is shown complete at once)."""
        shown = picture_data(self.state(), self.single, self._results)
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

    def _model(self):
        """The model the controls name (a parameter count for the custom size)."""
        return model_of(self.state())

    def _breakdown(self, gpus: int | None) -> memory.MemoryBreakdown:
        """breakdown() in the controls' state."""
        return breakdown(self.state(), gpus)

    def compute(self) -> memory.MemoryBreakdown:
        """The breakdown for the current GPU count (computed by _refresh); raises our error on invalid input."""
        result = self._results.get(self.gpus.value)
        if result is None:
            result = self._results[self.gpus.value] = self._breakdown(self.gpus.value)
        if isinstance(result, DistlabError):
            raise result
        return result

    def status_kind(self, chosen) -> str:
        return "ok" if chosen.fits else "bad"

    def describe(self, bd) -> str:
        """The text under the chart: the per-GPU parts, the total and the verdict."""
        return _describe(bd, self.gpus.value, self.zero.value)


def _gb(parts: dict) -> list[float]:
    return [value / 1e9 for value in parts.values()]


#: The lesson apps of this module (constructible without arguments); the widget fuzz tests use it.
APPS = [MemoryWallApp]
