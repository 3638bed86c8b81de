"""Tensor-parallel compute and communication of one layer and microbatch: FLOPs, the four (six with full
recomputation) all-reduces or sequence parallelism's pairs and backward re-gathers, their time. Lesson 5 §4, §6."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from .. import collectives, memory
from .._arguments import broadcasting, finite_result, link_parameters, number_array, recompute_mode, renamed_keyword
from ..errors import ConfigurationError
from ..flops import layer_forward_flops_array
from ..units import (
    BYTES,
    FLOP,
    FLOP_PER_SECOND,
    Q_,
    SECONDS,
    format_bytes,
    format_rate,
    format_seconds,
    positive,
    positive_int,
)
from .layout import _model, check_tp

__all__ = [
    "TP_COLLECTIVES",
    "SP_COLLECTIVES",
    "SP_REGATHERS",
    "element_bytes",
    "message_element_bytes",
    "forward_passes",
    "layer_flops_array",
    "layer_flops",
    "tp_message_bytes",
    "tp_all_reduce_equivalents",
    "tp_comm_time",
    "TPLayerCost",
    "tp_layer_cost",
]

#: The collectives of one layer and one microbatch in training, plain tensor parallelism:
#: (what it does, op). Each moves the layer activation b x s x h (nccl-tests size convention).
TP_COLLECTIVES = (
    ("forward: sum the attention outputs (g)", "all-reduce"),
    ("forward: sum the MLP outputs (g)", "all-reduce"),
    ("backward: sum the MLP input gradients (f)", "all-reduce"),
    ("backward: sum the attention input gradients (f)", "all-reduce"),
)

#: The same with sequence parallelism: every all-reduce becomes a reduce-scatter (leaving the
#: tensor-parallel region) and an all-gather (entering it), Korthikanti et al. 2022, Sec. 4.2.2; and the backward
#: re-gathers the input of each column-parallel linear (QKV, MLP up: SP_REGATHERS), whose forward kept only its s/t
#: share, for the weight gradient (NVIDIA/Megatron-LM@877f6a1bd5 megatron/mpu/layers.py,
#: LinearWithGradAccumulationAndAsyncCommunication: forward saves `input`, backward `_all_gather_base(...,
#: async_op=True)` beside the input-gradient GEMM): the price of Korthikanti's 34/t s b h.
SP_COLLECTIVES = (
    ("forward: gather the sequence before attention", "all-gather"),
    ("forward: reduce-scatter after attention", "reduce-scatter"),
    ("forward: gather the sequence before the MLP", "all-gather"),
    ("forward: reduce-scatter after the MLP", "reduce-scatter"),
    ("backward: all-gather (conjugate of the MLP reduce-scatter)", "all-gather"),
    ("backward: re-gather the MLP input for the up projection's weight gradient", "all-gather"),
    ("backward: reduce-scatter (conjugate of the MLP all-gather)", "reduce-scatter"),
    ("backward: all-gather (conjugate of the attention reduce-scatter)", "all-gather"),
    ("backward: re-gather the attention input for the QKV weight gradient", "all-gather"),
    ("backward: reduce-scatter (conjugate of the attention all-gather)", "reduce-scatter"),
)
#: The backward re-gathers of SP_COLLECTIVES: one per column-parallel linear input (a gated MLP's gate and up
#: projections, and grouped-query attention's Q, K and V, read one input and gather it once), each half a ring
#: all-reduce's bytes and time.
SP_REGATHERS = sum(name.startswith("backward: re-gather") for name, _ in SP_COLLECTIVES)

# ----------------------------------------------------------------------------------------
# Compute


def element_bytes(precision="mixed") -> float:
    """Bytes per stored activation element of a precision recipe (distlab.memory): 2 for mixed/bf16, 1 for fp8.
    Also the bytes per element of the K/V blocks context parallelism passes around its ring. Lesson 5 §7.

    >>> element_bytes('mixed'), element_bytes('fp8')
    (2.0, 1.0)
    """
    return float(memory.precision_recipe(precision).activation_bytes)


def message_element_bytes(precision="mixed") -> float:
    """Bytes per element of the activations and activation gradients TP collectives and pipeline sends carry
    (PrecisionRecipe.message_bytes): 2 for mixed/bf16 AND for fp8, whose GEMMs take fp8 inputs but write bf16
    outputs (Transformer Engine, Megatron-LM), 4 for fp32. Lesson 5 §4.

    >>> message_element_bytes('fp8')
    2.0
    """
    return float(memory.precision_recipe(precision).message_bytes)


def forward_passes(recompute="none") -> tuple[float, float]:
    """Forward-pass equivalents of one training step, (for the weight matmuls, for the attention scores).

    (3, 3) without recomputation (forward 1 + backward 2); (4, 4) with full recomputation (the
    forward runs again); (3, 4) with selective recomputation, which re-runs only the attention
    core, QK^T and AV (Korthikanti et al. 2022, Sec. 5). Lesson 5 §4.

    >>> forward_passes('selective')
    (3.0, 4.0)
    """
    mode = recompute_mode(recompute)
    return {"none": (3.0, 3.0), "selective": (3.0, 4.0), "full": (4.0, 4.0)}[mode]


@broadcasting
def layer_flops_array(params_per_layer, hidden, micro_batch_size, seq_len, tp=1, passes=3.0, attention_passes=None):
    """Training FLOPs of one layer, one microbatch, per GPU (NumPy broadcast, unvalidated: the fast path).

    (passes x 2 x params_per_layer x b s + attention_passes x 4 x s x h x b s) / tp;
    attention_passes defaults to passes. Both forward parts are distlab.flops.layer_forward_flops_array's: the
    weights' (attention width 0) and the attention core's (no weights); hidden is the attention width
    heads x head_dim, equal to the hidden size for every catalog model. Lesson 5 §4.

    GPT layer, h = 4096 (12 h^2 parameters), one 2,048-token sequence: 3 x 2048 x (2 x 12 x 4096^2 +
    4 x 2048 x 4096) = 3 x 893,353,197,568 FLOPs.

    >>> layer_flops_array(12 * 4096**2, 4096, 1, 2048)
    2680059592704.0
    """
    tokens = finite_result(
        "tokens", number_array(micro_batch_size, "micro_batch_size") * number_array(seq_len, "seq_len")
    )
    attention = passes if attention_passes is None else attention_passes
    weights = layer_forward_flops_array(params_per_layer, 0.0, tokens, seq_len)
    core = layer_forward_flops_array(0.0, hidden, tokens, seq_len)
    result = finite_result(
        "layer FLOPs",
        (number_array(passes, "passes") * weights + number_array(attention, "attention_passes") * core)
        / number_array(tp, "tp", low=1.0),
    )
    return float(result) if np.ndim(result) == 0 else result


def layer_flops(model, micro_batch_size=1, seq_len=None, tp=1, recompute="none") -> float:
    """Training FLOPs of one transformer layer for one microbatch, on each of the tp GPUs.

    Forward per token: 2 x params_per_layer (every weight is one multiply-add; biases and norms,
    under 0.1 %, counted as in the 6PT rule) + 4 s h (QK^T and AV, full attention). Training:
    x 3 (x 4 with full recomputation; selective recomputation repeats only the 4 s h). Divided by tp.
    Lesson 6 §3 (and Lesson 5 §4, as tp_layer_cost's compute).

    Llama 2 7B, 202,383,360 parameters per layer, s = 4096: 4096 x (2 x 202,383,360 + 4 x 4096 x 4096)
    = 1,932,802,392,064 forward FLOPs; x 3 / 8 GPUs:

    >>> layer_flops('llama2-7b', seq_len=4096, tp=8)
    724800897024.0
    """
    m = _model(model)
    b = positive_int(micro_batch_size, "micro_batch_size")
    s = positive_int(seq_len if seq_len is not None else m.seq_len, "seq_len")
    t = check_tp(m, tp)
    return layer_flops_array(m.params_per_layer(), m.hidden, b, s, t, *forward_passes(recompute))


# ----------------------------------------------------------------------------------------
# Communication


@broadcasting
def tp_message_bytes(micro_batch_size, seq_len, hidden, element_bytes=2.0):
    """Bytes of one TP all-reduce: the layer activation b x s x h x element bytes (NumPy broadcast;
    distlab.memory.message_bytes). Lesson 5 §4.

    >>> tp_message_bytes(1, 4096, 4096, 2)  # Llama 2 7B, one 4K sequence: 32 MiB
    33554432.0
    """
    return memory.message_bytes(micro_batch_size, seq_len, hidden, element_bytes)


@broadcasting
def tp_all_reduce_equivalents(sequence_parallel=False, full=False, regather=True):
    """TP collectives of one layer and microbatch in training, counted in ring all-reduces of b s h (NumPy broadcast).

    4 (2 forward, 2 backward), 6 with full recomputation (the forward's again); sequence parallelism turns each
    into a reduce-scatter + all-gather pair (same bytes and time) and, where the engine keeps only the s/t share of
    the column-parallel linears' input (regather: Megatron-LM, Megatron-Core, Transformer Engine), adds
    SP_REGATHERS = 2 backward all-gathers, half an all-reduce each: + 1. Lesson 5 §6.

    >>> [int(n) for n in tp_all_reduce_equivalents([False, True, True], [False, False, True])]
    [4, 5, 7]
    """
    sp = np.asarray(sequence_parallel, dtype=bool) & np.asarray(regather, dtype=bool)
    return np.where(np.asarray(full, dtype=bool), 6.0, 4.0) + np.where(sp, SP_REGATHERS / 2.0, 0.0)


@renamed_keyword(message_bytes="size")
@broadcasting
def tp_comm_time(size, tp, bandwidth, latency=0.0, all_reduces=4):
    """TP communication time of one layer and microbatch in s (plain floats or NumPy, unvalidated).

    all_reduces x ring all-reduce time of `size` bytes (the layer activation, tp_message_bytes) over the tp
    GPUs (distlab.collectives.ring_all_reduce_time).
    With sequence parallelism each all-reduce is a reduce-scatter + all-gather pair whose ring
    times add up to exactly the same, so the same call prices it. all_reduces: 4 in training,
    6 with full recomputation, 2 for a forward pass alone, one more with sequence parallelism's backward
    re-gathers (tp_all_reduce_equivalents). Lesson 5 §4.

    >>> round(tp_comm_time(32e6, 4, 100e9), 6)  # 4 x 2 x 3 x 32 MB / (4 x 100 GB/s)
    0.00192
    """
    result = finite_result(
        "TP communication time",
        number_array(all_reduces, "all_reduces") * collectives.ring_all_reduce_time(size, tp, bandwidth, latency),
    )
    return float(result) if np.ndim(result) == 0 else result


@dataclass(frozen=True)
class TPLayerCost:
    """Tensor-parallel communication and compute of one layer, one microbatch, per GPU (plain floats).

    collectives: (name, CollectiveCost) in execution order; comm_time_s their sum (they sit on
    the critical path: the next matmul needs their result); compute_time_s = flops_per_gpu /
    (peak x efficiency); ratio = comm_time_s / compute_time_s.
    """

    model: str
    tp: int
    micro_batch_size: int
    seq_len: int
    hidden: int
    element_bytes: float
    sequence_parallel: bool
    recompute: str
    message_bytes: float
    collectives: tuple
    link: str | None
    bandwidth: float
    latency: float
    gpu: str | None
    peak_flops: float
    efficiency: float
    flops_per_gpu: float

    @property
    def all_reduces(self) -> int:
        """All-reduce equivalents (a reduce-scatter + all-gather pair counts as one)."""
        units = sum(2 if cost.op == "all-reduce" else 1 for _, cost in self.collectives)
        return units // 2

    @property
    def comm_bytes_per_gpu(self) -> float:
        return float(sum(cost.bytes_sent_per_gpu for _, cost in self.collectives))

    @property
    def comm_time_s(self) -> float:
        return float(sum(cost.time_s for _, cost in self.collectives))

    @property
    def compute_time_s(self) -> float:
        return self.flops_per_gpu / (self.peak_flops * self.efficiency)

    @property
    def ratio(self) -> float:
        """Communication time / compute time."""
        return self.comm_time_s / self.compute_time_s

    @property
    def comm_time(self):
        return Q_(self.comm_time_s, SECONDS)

    @property
    def compute_time(self):
        return Q_(self.compute_time_s, SECONDS)

    @property
    def comm_bytes(self):
        return Q_(self.comm_bytes_per_gpu, BYTES)

    @property
    def flops(self):
        return Q_(self.flops_per_gpu, FLOP)

    @property
    def comm_share(self) -> float:
        """Share of the layer's time spent communicating, comm / (comm + compute)."""
        return self.comm_time_s / (self.comm_time_s + self.compute_time_s)

    def to_dict(self) -> dict:
        """Plain numbers and strings (JSON-ready): the fields plus the computed totals; each collective's
        dict carries its name."""
        data = dataclasses.asdict(self)
        return dict(
            data,
            all_reduces=self.all_reduces,
            comm_bytes_per_gpu=self.comm_bytes_per_gpu,
            comm_time_s=self.comm_time_s,
            compute_time_s=self.compute_time_s,
            ratio=self.ratio,
            collectives=[dict(cost.to_dict(), name=name) for name, cost in self.collectives],
        )

    @property
    def regathers(self) -> int:
        """Sequence parallelism's backward re-gathers of the column-parallel inputs (SP_COLLECTIVES)."""
        return sum("re-gather" in name for name, _ in self.collectives)

    def collectives_text(self) -> str:
        """The collectives in words: '4 all-reduces', or '4 reduce-scatter + all-gather pairs and 2 backward
        re-gathers (all-gathers): 5 all-reduce equivalents'."""
        if not self.sequence_parallel:
            return f"{self.all_reduces} all-reduces"
        pairs = sum(cost.op == "reduce-scatter" for _, cost in self.collectives)
        return (
            f"{pairs} reduce-scatter + all-gather pairs and {self.regathers} backward re-gathers (all-gathers): "
            f"{self.all_reduces} all-reduce equivalents"
        )

    def summary(self) -> str:
        ops = self.collectives_text()
        on = f" on {self.link}" if self.link else f" at {format_rate(self.bandwidth)}"
        comm = (
            f"{ops} of {format_bytes(self.message_bytes)}, {format_bytes(self.comm_bytes_per_gpu)} sent, "
            f"{format_seconds(self.comm_time_s)}{on}"
            if self.tp > 1
            else "none (tp=1: one GPU holds the whole layer)"
        )
        return (
            f"{self.model}, tp={self.tp}, b={self.micro_batch_size}, s={self.seq_len}: per layer per microbatch, "
            f"per GPU\n"
            f"  communication: {comm}\n"
            f"  compute: {self.flops_per_gpu / 1e12:.3g} TFLOP, {format_seconds(self.compute_time_s)} at "
            f"{format_rate(self.peak_flops * self.efficiency, 'FLOP/s')}"
            + (f" ({self.gpu})" if self.gpu else "")
            + "\n"
            f"  communication / compute = {self.ratio:.3g} ({self.comm_share:.0%} of the layer's time communicating)"
        )

    def __str__(self) -> str:
        return self.summary()


def _link_name(link):
    if link is None:
        return None
    if isinstance(link, str):
        from .. import hardware

        return hardware.link(link).name
    return getattr(link, "name", None)


def _peak(gpu, precision, peak_flops):
    if peak_flops is not None:
        return positive(peak_flops, FLOP_PER_SECOND, "peak_flops"), None
    from .. import hardware

    acc = hardware.accelerator(gpu)
    return acc.peak(memory.precision_recipe(precision).compute_precision), acc.name


def tp_layer_cost(
    model,
    tp,
    *,
    micro_batch_size=1,
    seq_len=None,
    link="nvlink4",
    bandwidth=None,
    latency=None,
    gpu="h100-sxm",
    peak_flops=None,
    efficiency=1.0,
    precision="mixed",
    sequence_parallel=False,
    recompute="none",
    gpus_per_node=None,
) -> TPLayerCost:
    """Communication and compute of one transformer layer, one microbatch, on each of tp GPUs, in training.

    Communication: 4 all-reduces of b x s x h x element bytes (2 forward, 2 backward; 6 with
    full recomputation), each priced by distlab.collectives.collective_cost as a ring over the
    tp GPUs on `link` (a name such as 'nvlink4' or 'ib-ndr', or bandwidth= / latency=). With
    sequence_parallel each becomes a reduce-scatter + all-gather (same bytes, same time) and the backward
    re-gathers the two column-parallel inputs (SP_COLLECTIVES, Megatron-LM's SP): 5 all-reduce equivalents, 7 with
    full recomputation.
    precision: a distlab.memory recipe; it sets the bytes per message element (PrecisionRecipe.message_bytes:
    2 for bf16 and for fp8, whose GEMM outputs and gradients are bf16) and the GPU's peak
    (PrecisionRecipe.compute_precision: mixed -> bf16 peak, fp8 -> fp8 peak). Compute: layer_flops / (peak x
    efficiency); `peak_flops` overrides the GPU's peak. gpus_per_node: when given, tp must divide
    it (the TP group stays inside a node). Lesson 5 §4 (§6 sequence parallelism; Lesson 6 §3).

    >>> c = tp_layer_cost('llama2-7b', 8, seq_len=4096)
    >>> c.all_reduces, c.message_bytes, c.flops_per_gpu  # 4 of 4096 x 4096 x 2 B; layer_flops' example
    (4, 33554432.0, 724800897024.0)
    """
    m = _model(model)
    t = check_tp(m, tp, gpus_per_node)
    b = positive_int(micro_batch_size, "micro_batch_size")
    s = positive_int(seq_len if seq_len is not None else m.seq_len, "seq_len")
    mode = recompute_mode(recompute)
    eff = positive(efficiency, "", "efficiency")
    if eff > 1:
        raise ConfigurationError(f"efficiency={eff:g} must be a fraction in (0, 1] of the GPU's peak")
    e = message_element_bytes(precision)
    peak, gpu_name = _peak(gpu, precision, peak_flops)
    size = tp_message_bytes(b, s, m.hidden, e)
    kwargs = dict(link=link, bandwidth=bandwidth, latency=latency)
    table: tuple[tuple[str, str], ...] = SP_COLLECTIVES if sequence_parallel else TP_COLLECTIVES
    if mode == "full":  # the recomputed forward repeats the forward collectives
        forward = [entry for entry in table if entry[0].startswith("forward")]
        table = (
            tuple(forward)
            + tuple((name.replace("forward:", "recomputed forward:"), op) for name, op in forward)
            + tuple(entry for entry in table if entry[0].startswith("backward"))
        )
    costs = tuple((name, collectives.collective_cost(op, size, t, **kwargs)) for name, op in table)
    bw, lat = link_parameters(link, bandwidth, latency)
    return TPLayerCost(
        model=m.name,
        tp=t,
        micro_batch_size=b,
        seq_len=s,
        hidden=m.hidden,
        element_bytes=e,
        sequence_parallel=bool(sequence_parallel),
        recompute=mode,
        message_bytes=size,
        collectives=costs,
        link=_link_name(link),
        bandwidth=bw,
        latency=lat,
        gpu=gpu_name,
        peak_flops=peak,
        efficiency=eff,
        flops_per_gpu=layer_flops_array(m.params_per_layer(), m.hidden, b, s, t, *forward_passes(mode)),
    )
