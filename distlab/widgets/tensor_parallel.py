"""Lesson 5 app: one transformer layer under tensor parallelism, compute against communication.

Controls -> distlab.tensor.tp_layer_cost -> two bars (compute per GPU, TP communication) on a
fixed log time axis, redrawn by blitting; the numbers and the verdict are in the HTML panel.
"""

from __future__ import annotations

import ipywidgets as widgets

from .. import hardware, models, tensor
from ..errors import ConfigurationError
from ..plots._style import glyph_key
from ..plots.tensor_parallel import COMM_COLOUR, COMPUTE_COLOUR, comm_compute_bars
from ..units import format_bytes, format_rate, format_seconds
from .common import BlitRenderer, LessonApp, figure_canvas, replace_options, show_what_applies
from .framecache import FrameCachingApp

__all__ = [
    "HIDDEN_SIZES",
    "SEQ_LENS",
    "TP_DEGREES",
    "LINKS",
    "HEAD_DIM",
    "gpt_layer",
    "offered_tp_degrees",
    "tp_after",
    "has_fp8",
    "FP8_WITHOUT_PEAK",
    "TensorParallelApp",
    "APPS",
]

#: The hidden sizes offered (GPT-style layers: 128 channels per head, MLP 4h).
HIDDEN_SIZES = (1024, 2048, 4096, 5120, 8192, 12288, 16384, 20480, 25600)
SEQ_LENS = (512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)
TP_DEGREES = (1, 2, 4, 8, 16, 32, 64)

#: The sequence-parallelism checkbox's tooltip at tp = 1, where it is unticked and disabled.
SP_AT_TP1 = "sequence parallelism splits the TP group's LayerNorm and dropout work: off at tp = 1"
#: The precision's tooltip on a GPU without FP8 tensor cores (no fp8 peak: hardware.Accelerator.precisions), where it
#: shows bf16, disabled.
FP8_WITHOUT_PEAK = "this GPU has no FP8 tensor cores (no fp8 peak): its layers run in bf16; FP8 needs an H100 or later"
LINKS = ("nvlink3", "nvlink4", "nvlink5", "pcie5", "ib-ndr", "ib-xdr", "ethernet-100g")
HEAD_DIM = 128


def gpt_layer(hidden: int, seq_len: int = 2048) -> models.TransformerModel:
    """A GPT-shaped layer of width `hidden`: hidden/128 heads, MLP 4h, biases, LayerNorm (as GPT-3)."""
    h = int(hidden)
    if h % HEAD_DIM:
        raise ConfigurationError(f"hidden={h} must be a multiple of {HEAD_DIM} (channels per head)")
    return models.TransformerModel(
        name=f"gpt-h{h}",
        layers=1,
        hidden=h,
        heads=h // HEAD_DIM,
        ffn=4 * h,
        vocab=1,
        biases=True,
        norm="layernorm",
        seq_len=seq_len,
        dropout=True,
    )


def offered_tp_degrees(hidden: int, link: str, gpus_per_node: int) -> tuple:
    """The TP degrees lesson 5's slider offers for a layer of width `hidden` on `link`: those dividing the heads
    (hidden / 128) and, on a link inside a node, the node's `gpus_per_node` (a degree that can only fail is not
    offered)."""
    heads = hidden // HEAD_DIM
    in_node = hardware.link(link).kind == "intra-node"
    return tuple(d for d in TP_DEGREES if heads % d == 0 and (not in_node or gpus_per_node % d == 0))


def has_fp8(gpu: str) -> bool:
    """Whether `gpu` has an fp8 peak (an A100 has none: lesson 5's app shows its precision bf16, disabled)."""
    return "fp8" in hardware.accelerator(gpu).precisions


def tp_after(tp: int, hidden: int, link: str, gpus_per_node: int) -> int:
    """The TP degree lesson 5's app moves to when the hidden size or link becomes `hidden`, `link`: `tp` when still
    offered, else the largest offered degree below it (the smallest offered when none is). One home for the app's
    observer and its frame cache's neighbours (TensorParallelApp.frame_neighbour)."""
    valid = offered_tp_degrees(hidden, link, gpus_per_node)
    return max((d for d in valid if d <= tp), default=valid[0])


class TensorParallelApp(FrameCachingApp, LessonApp):
    """TP degree, hidden size, sequence length, micro-batch size, link, GPU, precision and sequence
    parallelism -> per-layer compute vs TP communication, per GPU, per microbatch, in training.

    `result` holds the current TPLayerCost (None on invalid input); `error` our message instead.
    A TP group on an intra-node link must fit the GPUs of a node (gpus_per_node).

    The result is a pure function of the control values (compute_for). Dependent control: the TP degree's options
    (valid_tp_degrees) follow the hidden size and the link; the observer re-offers them (replace_options, tp_after).
    The browser caches the picture of every state one control change away (distlab.widgets.framecache).
    """

    prepared_controls = (
        "tp",
        "hidden",
        "seq_len",
        "micro_batch_size",
        "link",
        "gpu",
        "precision",
        "sequence_parallel",
    )

    def __init__(
        self,
        tp=8,
        hidden=4096,
        seq_len=4096,
        micro_batch_size=1,
        link="nvlink4",
        gpu="h100-sxm",
        precision="mixed",
        sequence_parallel=False,
        gpus_per_node=8,
    ):
        self.gpus_per_node = gpus_per_node
        self._syncing = False
        self.tp = widgets.SelectionSlider(options=TP_DEGREES, value=tp, description="TP degree", continuous_update=True)
        self.hidden = widgets.SelectionSlider(
            options=HIDDEN_SIZES, value=hidden, description="hidden h", continuous_update=True
        )
        self.seq_len = widgets.SelectionSlider(
            options=SEQ_LENS, value=seq_len, description="sequence s", continuous_update=True
        )
        self.micro_batch_size = widgets.IntSlider(value=micro_batch_size, min=1, max=16, description="microbatch b")
        self.link = widgets.Dropdown(options=list(LINKS), value=link, description="link")
        self.gpu = widgets.Dropdown(options=list(hardware.ACCELERATORS), value=gpu, description="GPU")
        self.precision = widgets.Dropdown(
            options=[("bf16", "mixed"), ("fp8", "fp8")], value=precision, description="precision"
        )
        self.sequence_parallel = widgets.Checkbox(value=sequence_parallel, description="sequence parallelism")
        self.status = widgets.HTML()
        self.fig, self.canvas = figure_canvas((6.4, 2.2), dict(left=0.2, right=0.97, bottom=0.16, top=0.95))
        self.ax = self.fig.add_subplot()
        self.bars = comm_compute_bars(self.ax, "compute\nper GPU", "TP\ncommunication")
        self.renderer = BlitRenderer(self.canvas, self.bars.animated_artists)
        self.result: tensor.TPLayerCost | None = None
        self.error: str | None = None
        for control in (
            self.tp,
            self.hidden,
            self.seq_len,
            self.micro_batch_size,
            self.link,
            self.gpu,
            self.precision,
            self.sequence_parallel,
        ):
            control.observe(self._on_change, names="value")
        controls = widgets.VBox(
            [
                widgets.HBox([self.tp, self.link]),
                widgets.HBox([self.hidden, self.gpu]),
                widgets.HBox([self.seq_len, self.precision]),
                widgets.HBox([self.micro_batch_size, self.sequence_parallel]),
            ]
        )
        legend = widgets.HTML(
            '<div style="font-size:12px"><b>one transformer layer, one microbatch, training</b> (forward + '
            "backward), per GPU, log time axis:"
            + glyph_key(COMPUTE_COLOUR, "&#9632;", "compute", 4)
            + glyph_key(COMM_COLOUR, "&#9632;", "TP all-reduces (on the critical path)", 8)
            + "</div>"
        )
        super().__init__([controls, legend, self.canvas, self.status])
        self._sync_tp_options()
        self._sync_sequence_parallel()
        self._sync_precision()
        self.update()

    def valid_tp_degrees(self) -> tuple:
        """The TP degrees this layer and link allow: dividing the heads (hidden / 128) and, on a link inside a
        node, the node's GPUs; the slider offers only these (a degree that can only fail is not offered)."""
        return offered_tp_degrees(self.hidden.value, self.link.value, self.gpus_per_node)

    def _sync_tp_options(self) -> None:
        valid = self.valid_tp_degrees()
        if tuple(self.tp.options) == valid:
            return
        replace_options(
            self, self.tp, valid, tp_after(self.tp.value, self.hidden.value, self.link.value, self.gpus_per_node)
        )

    def _sync_sequence_parallel(self) -> None:
        """At tp = 1 sequence parallelism has nothing to split: unticked and disabled, saying why (the cost ignores
        it there); the student's choice comes back at tp > 1."""
        show_what_applies(self, self.sequence_parallel, self.tp.value > 1, False, SP_AT_TP1, "off: tp = 1")

    def _sync_precision(self) -> None:
        """On a GPU without an fp8 peak (the A100s) the precision shows bf16, disabled, saying why (fp8 would only be
        refused there); the student's choice comes back on a GPU with one."""
        applies = has_fp8(self.gpu.value)
        show_what_applies(self, self.precision, applies, "mixed", FP8_WITHOUT_PEAK, f"no fp8 on {self.gpu.value}")
        self.precision.style.description_width = "" if applies else "initial"  # the note whole

    def frame_neighbour(self, state: dict, name: str, value) -> dict:
        """The state after the student sets `name` to `value`: a new hidden size or link moves the TP degree as the
        observer does (tp_after); sequence parallelism is off at tp = 1 and the precision bf16 on a GPU without
        fp8, the student's choice back elsewhere."""
        after = {**state, name: value}
        if name in ("hidden", "link"):
            after["tp"] = tp_after(state["tp"], after["hidden"], after["link"], self.gpus_per_node)
        chosen = getattr(self.sequence_parallel, "_distlab_chosen", state["sequence_parallel"])
        after["sequence_parallel"] = after["tp"] > 1 and (chosen if name != "sequence_parallel" else value)
        precision = getattr(self.precision, "_distlab_chosen", state["precision"])
        precision = value if name == "precision" else precision
        after["precision"] = precision if has_fp8(after["gpu"]) else "mixed"
        return after

    def _on_change(self, change=None):
        if self._syncing:
            return
        if change is not None and change.get("owner") in (self.hidden, self.link):
            self._sync_tp_options()
        self._sync_sequence_parallel()
        self._sync_precision()
        self.update(change)

    def compute(self) -> tensor.TPLayerCost:
        """The TPLayerCost of the chosen layer (distlab.tensor.tp_layer_cost)."""
        return self.compute_for(self.values())

    def compute_for(self, values: dict) -> tensor.TPLayerCost:
        """distlab.tensor.tp_layer_cost for these control values (a fraction of a millisecond: not remembered)."""
        link = hardware.link(values["link"])
        in_node = self.gpus_per_node if link.kind == "intra-node" else None
        return tensor.tp_layer_cost(
            gpt_layer(values["hidden"], values["seq_len"]),
            values["tp"],
            micro_batch_size=values["micro_batch_size"],
            seq_len=values["seq_len"],
            link=link,
            gpu=values["gpu"],
            precision=values["precision"],
            sequence_parallel=values["sequence_parallel"],
            gpus_per_node=in_node,
        )

    def render(self, cost: tensor.TPLayerCost) -> bool:
        return self.bars.update(cost.compute_time_s, cost.comm_time_s)

    def fade(self) -> bool:
        self.bars.update(None, None, faded=True)
        return False

    def status_kind(self, cost: tensor.TPLayerCost) -> str:
        # communication longer than compute is a result the lesson teaches (TP across nodes), not an error: plain
        # text, as every other result (issue 31: it was shown in the error's red)
        return "result"

    def describe(self, c: tensor.TPLayerCost) -> str:
        """The text under the chart (every number from tensor.tp_layer_cost)."""
        if c.tp == 1:
            comm = "tp=1: one GPU holds the whole layer, no TP communication [tensor.tp_layer_cost]"
        else:
            ops = c.collectives_text() if c.sequence_parallel else f"{c.all_reduces} ring all-reduces"
            comm = (
                f"{ops} of b x s x h = {format_bytes(c.message_bytes)} over {c.tp} GPUs on "
                f"{c.link} ({format_rate(c.bandwidth)} per direction): {format_bytes(c.comm_bytes_per_gpu)} sent, "
                f"{format_seconds(c.comm_time_s)} [tensor.tp_layer_cost]"
            )
        lines = [
            comm,
            f"compute: {c.flops_per_gpu / 1e12:.3g} TFLOP per GPU at the {c.gpu} peak "
            f"({format_rate(c.peak_flops, 'FLOP/s')}): {format_seconds(c.compute_time_s)}",
        ]
        if c.tp > 1:
            verdict = "communication exceeds compute" if c.ratio > 1 else "compute exceeds communication"
            lines.append(
                f"communication / compute = {c.ratio:.3g}: {verdict}; "
                f"{c.comm_share:.0%} of the layer's time is spent communicating"
            )
        return "\n".join(lines)


#: The lesson apps of this module (constructible without arguments); the widget fuzz tests use it.
APPS = [TensorParallelApp]
