"""Tensor parallelism (Megatron-LM), sequence parallelism and context parallelism: shapes, bytes, time.

Megatron-LM (Shoeybi et al. 2019, "Megatron-LM: Training Multi-Billion Parameter Language
Models Using Model Parallelism", Sec. 3) splits each transformer layer over t GPUs so that
every layer needs only two all-reduces in the forward pass:

- MLP: the first matrix A (h x f; and the gate of a gated MLP) is split by COLUMNS, so each
  GPU computes f/t of the inner activations and applies the nonlinearity locally (GeLU of a
  column block needs no other block); the second matrix B (f x h) is split by ROWS, so each
  GPU produces a partial sum of the output, and one all-reduce adds the t partial sums.
- Attention: Q, K and V are split by columns, i.e. by HEADS (a/t query heads and kv_heads/t
  key/value heads per GPU; each head's attention is local); the output projection is split
  by rows; one all-reduce adds the partial outputs.

Shapes are written (in_features, out_features), as in Y = X W. In training each layer runs
four all-reduces of the layer's activation, b x s x h elements, per microbatch: two in the
forward pass (after attention and after the MLP, Megatron's g operator) and two in the
backward pass (the input gradients of the two column-parallel blocks, Megatron's f operator).
Full activation recomputation runs the forward again: six.

Sequence parallelism (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
Transformer Models", Sec. 4.2.2) also splits the layer norms and dropouts along the sequence;
each all-reduce becomes a reduce-scatter plus an all-gather of the same buffer, which move
exactly what a ring all-reduce moves (a ring all-reduce IS a reduce-scatter then an all-gather),
so the bytes and the time stay the same while the replicated activations shrink t-fold.
(Implementations may gather an input once more in backward rather than keep it; not counted.)

Collectives are priced by distlab.collectives (ring over the t GPUs of the group on the chosen
link, alpha-beta); activation memory comes from distlab.memory. Compute per layer per GPU:
a forward pass costs 2 x (parameters of the layer) FLOPs per token for the matmuls plus
4 x s x h per token for the attention scores and the weighted sum of values (QK^T and AV,
2 s h each, full non-causal attention: causal kernels that skip the masked half do about half
of it); training runs forward + backward = 3 forward passes (the 6 x params x tokens rule),
4 with full recomputation (selective recomputation repeats only the attention scores); tensor
parallelism divides it by t.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass

import numpy as np

from ._arguments import divisors, link_parameters, recompute_mode, short_list
from . import collectives, memory
from .flops import layer_forward_flops_array
from .errors import ConfigurationError
from .units import (
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

__all__ = [
    "TP_COLLECTIVES",
    "SP_COLLECTIVES",
    "WeightShard",
    "TPLayerShards",
    "TPLayerCost",
    "SequenceParallelSaving",
    "RingAttentionBuffer",
    "SplitMatmulResult",
    "TPMLPResult",
    "check_tp",
    "valid_tp_degrees",
    "layer_shards",
    "element_bytes",
    "message_element_bytes",
    "forward_passes",
    "layer_flops",
    "layer_flops_array",
    "tp_message_bytes",
    "tp_comm_time",
    "tp_layer_cost",
    "sequence_parallel_saving",
    "ring_attention_buffer_bytes",
    "ring_attention_buffer",
    "random_mlp",
    "simulate_split_matmul",
    "simulate_tp_mlp",
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
#: tensor-parallel region) and an all-gather (entering it), Korthikanti et al. 2022, Sec. 4.2.2.
SP_COLLECTIVES = (
    ("forward: gather the sequence before attention", "all-gather"),
    ("forward: reduce-scatter after attention", "reduce-scatter"),
    ("forward: gather the sequence before the MLP", "all-gather"),
    ("forward: reduce-scatter after the MLP", "reduce-scatter"),
    ("backward: all-gather (conjugate of the MLP reduce-scatter)", "all-gather"),
    ("backward: reduce-scatter (conjugate of the MLP all-gather)", "reduce-scatter"),
    ("backward: all-gather (conjugate of the attention reduce-scatter)", "all-gather"),
    ("backward: reduce-scatter (conjugate of the attention all-gather)", "reduce-scatter"),
)

# ----------------------------------------------------------------------------------------
# Validation


def _model(model):
    """A TransformerModel from a model or a catalog name."""
    from . import models

    if isinstance(model, str) or isinstance(model, models.TransformerModel):
        return models.model(model)
    raise ConfigurationError(
        f"model={model!r} must be a TransformerModel or a catalog name such as 'llama2-7b' "
        f"(tensor parallelism needs the layer shapes, not just a parameter count)"
    )


def valid_tp_degrees(model, gpus_per_node=None) -> list[int]:
    """The TP degrees that divide the heads, the key/value heads, the hidden and MLP sizes
    (and the GPUs of a node, when gpus_per_node is given). Lesson 5 §3.

    Llama 2 7B: gcd(32 heads, 32 key/value heads, 4096, 11008 = 2^8 x 43) = 32, and a node of 8.

    >>> valid_tp_degrees('llama2-7b', gpus_per_node=8)
    [1, 2, 4, 8]
    """
    m = _model(model)
    common = math.gcd(math.gcd(m.heads, m.kv_heads), math.gcd(m.hidden, m.ffn))
    if gpus_per_node is not None:
        common = math.gcd(common, positive_int(gpus_per_node, "gpus_per_node"))
    return divisors(common)


def check_tp(model, tp, gpus_per_node=None) -> int:
    """The TP degree as an int, or ConfigurationError naming what it does not divide.

    t must divide the query heads (attention is split by heads), the key/value heads (each GPU
    keeps whole key/value groups, as Megatron-LM requires), the hidden size and the MLP inner
    size (the column and row blocks). With gpus_per_node, t must also divide the GPUs of a
    node, so that every TP group sits inside one node on the fast intra-node link. Lesson 5 §3.

    >>> check_tp('llama2-7b', 8, gpus_per_node=8)
    8
    """
    m = _model(model)
    t = positive_int(tp, "tp")
    for size, what in ((m.heads, "attention heads"), (m.kv_heads, "key/value heads"), (m.hidden, "hidden size"),
                       (m.ffn, "MLP inner size (ffn)")):
        if size % t:
            raise ConfigurationError(
                f"tp={t} does not divide the {size} {what} of {m.name}; valid: {short_list(valid_tp_degrees(m), 16)}"
            )
    if gpus_per_node is not None:
        g = positive_int(gpus_per_node, "gpus_per_node")
        if g % t:
            raise ConfigurationError(
                f"tp={t} does not divide the {g} GPUs of a node; valid: {short_list(divisors(g), 16)} "
                f"(a TP group must stay inside one node: its all-reduces run on every layer)"
            )
    return t


# ----------------------------------------------------------------------------------------
# Weight shapes


@dataclass(frozen=True)
class WeightShard:
    """One weight of a transformer layer and the piece each of the t GPUs keeps.

    split: 'column' (output features divided by t), 'row' (input features divided by t) or
    'replicated' (every GPU keeps it all). Shapes are (in_features, out_features); a bias or
    a norm weight has a 1-tuple shape.
    """

    name: str
    block: str
    split: str
    full_shape: tuple
    shard_shape: tuple

    @property
    def params_full(self) -> int:
        return math.prod(self.full_shape)

    @property
    def params_per_gpu(self) -> int:
        return math.prod(self.shard_shape)


@dataclass(frozen=True)
class TPLayerShards:
    """The weights of one transformer layer split over tp GPUs (Megatron-LM, Sec. 3)."""

    model: str
    tp: int
    heads_per_gpu: int
    kv_heads_per_gpu: int
    ffn_per_gpu: int
    shards: tuple

    @property
    def params_full(self) -> int:
        """All parameters of the layer (equals TransformerModel.params_per_layer())."""
        return sum(s.params_full for s in self.shards)

    @property
    def params_per_gpu(self) -> int:
        """Parameters one GPU keeps: the split matrices and biases / t, plus the replicated ones."""
        return sum(s.params_per_gpu for s in self.shards)

    @property
    def replicated_params(self) -> int:
        """Parameters every GPU keeps whole (norm weights, row-parallel biases)."""
        return sum(s.params_per_gpu for s in self.shards if s.split == "replicated")

    def shard(self, name: str) -> WeightShard:
        for s in self.shards:
            if s.name == name:
                return s
        raise ConfigurationError(f"no weight {name!r} in this layer; valid: {', '.join(s.name for s in self.shards)}")

    def table(self) -> str:
        """One line per weight: name, split, full shape -> shape per GPU, parameters per GPU."""
        lines = [f"{self.model}, tp={self.tp}: {self.heads_per_gpu} query heads, {self.kv_heads_per_gpu} key/value "
                 f"heads and {self.ffn_per_gpu} MLP columns per GPU"]
        for s in self.shards:
            full = " x ".join(f"{d:,}" for d in s.full_shape)
            part = " x ".join(f"{d:,}" for d in s.shard_shape)
            lines.append(f"  {s.name:<22}{s.split:<11}{full:>16} -> {part:<16}{s.params_per_gpu:>14,} per GPU")
        lines.append(f"  {'layer total':<22}{'':<11}{self.params_full:>16,} -> {'':<16}{self.params_per_gpu:>14,} per GPU")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


def layer_shards(model, tp) -> TPLayerShards:
    """Per-GPU weight shapes and parameters of one transformer layer at TP degree `tp`.

    Column-parallel: Q, K, V (by heads), the MLP up (and gate) matrices, and their biases.
    Row-parallel: the attention output projection and the MLP down matrix; their biases are
    added once after the all-reduce, so every GPU keeps them whole, as it keeps the norms.
    Megatron-LM, Shoeybi et al. 2019, Sec. 3. Lesson 5 §3.

    >>> layer_shards('llama2-7b', 8).shard('mlp up').shard_shape  # 11008 / 8 columns
    (4096, 1376)
    """
    m = _model(model)
    t = check_tp(m, tp)
    h, kv, f = m.hidden, m.kv_dim, m.ffn
    shards = [
        WeightShard("query", "attention", "column", (h, h), (h, h // t)),
        WeightShard("key", "attention", "column", (h, kv), (h, kv // t)),
        WeightShard("value", "attention", "column", (h, kv), (h, kv // t)),
        WeightShard("attention output", "attention", "row", (h, h), (h // t, h)),
    ]
    if m.biases:
        shards += [
            WeightShard("query bias", "attention", "column", (h,), (h // t,)),
            WeightShard("key bias", "attention", "column", (kv,), (kv // t,)),
            WeightShard("value bias", "attention", "column", (kv,), (kv // t,)),
            WeightShard("attention output bias", "attention", "replicated", (h,), (h,)),
        ]
    mlp_in = ["mlp gate", "mlp up"] if m.gated_mlp else ["mlp up"]
    shards += [WeightShard(name, "mlp", "column", (h, f), (h, f // t)) for name in mlp_in]
    shards.append(WeightShard("mlp down", "mlp", "row", (f, h), (f // t, h)))
    if m.biases:
        shards += [WeightShard(f"{name} bias", "mlp", "column", (f,), (f // t,)) for name in mlp_in]
        shards.append(WeightShard("mlp down bias", "mlp", "replicated", (h,), (h,)))
    norm = m.norm_params_per_layer() // 2  # each of the two norms: weight (and bias) of size h
    shards += [
        WeightShard("norm before attention", "norm", "replicated", (norm,), (norm,)),
        WeightShard("norm before MLP", "norm", "replicated", (norm,), (norm,)),
    ]
    return TPLayerShards(m.name, t, m.heads // t, m.kv_heads // t, f // t, tuple(shards))


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
    tokens = np.asarray(micro_batch_size, dtype=float) * np.asarray(seq_len, dtype=float)
    attention = passes if attention_passes is None else attention_passes
    weights = layer_forward_flops_array(params_per_layer, 0.0, tokens, seq_len)
    core = layer_forward_flops_array(0.0, hidden, tokens, seq_len)
    result = (np.asarray(passes, dtype=float) * weights + np.asarray(attention, dtype=float) * core) \
        / np.asarray(tp, dtype=float)
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


def tp_message_bytes(micro_batch_size, seq_len, hidden, element_bytes=2.0):
    """Bytes of one TP all-reduce: the layer activation b x s x h x element bytes (NumPy broadcast;
    distlab.memory.message_bytes). Lesson 5 §4.

    >>> tp_message_bytes(1, 4096, 4096, 2)  # Llama 2 7B, one 4K sequence: 32 MiB
    33554432.0
    """
    return memory.message_bytes(micro_batch_size, seq_len, hidden, element_bytes)


def tp_comm_time(message_bytes, tp, bandwidth, latency=0.0, all_reduces=4):
    """TP communication time of one layer and microbatch in s (plain floats or NumPy, unvalidated).

    all_reduces x ring all-reduce time over the tp GPUs (distlab.collectives.ring_all_reduce_time).
    With sequence parallelism each all-reduce is a reduce-scatter + all-gather pair whose ring
    times add up to exactly the same, so the same call prices it. all_reduces: 4 in training,
    6 with full recomputation, 2 for a forward pass alone. Lesson 5 §4.

    >>> round(tp_comm_time(32e6, 4, 100e9), 6)  # 4 x 2 x 3 x 32 MB / (4 x 100 GB/s)
    0.00192
    """
    result = np.asarray(all_reduces, dtype=float) * collectives.ring_all_reduce_time(message_bytes, tp, bandwidth, latency)
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
        return dict(data, all_reduces=self.all_reduces, comm_bytes_per_gpu=self.comm_bytes_per_gpu,
                    comm_time_s=self.comm_time_s, compute_time_s=self.compute_time_s, ratio=self.ratio,
                    collectives=[dict(cost.to_dict(), name=name) for name, cost in self.collectives])

    def summary(self) -> str:
        ops = (f"{self.all_reduces} reduce-scatter + all-gather pairs" if self.sequence_parallel
               else f"{self.all_reduces} all-reduces")
        on = f" on {self.link}" if self.link else f" at {format_rate(self.bandwidth)}"
        comm = (f"{ops} of {format_bytes(self.message_bytes)}, {format_bytes(self.comm_bytes_per_gpu)} sent, "
                f"{format_seconds(self.comm_time_s)}{on}" if self.tp > 1
                else "none (tp=1: one GPU holds the whole layer)")
        return (
            f"{self.model}, tp={self.tp}, b={self.micro_batch_size}, s={self.seq_len}: per layer per microbatch, "
            f"per GPU\n"
            f"  communication: {comm}\n"
            f"  compute: {self.flops_per_gpu / 1e12:.3g} TFLOP, {format_seconds(self.compute_time_s)} at "
            f"{format_rate(self.peak_flops * self.efficiency, 'FLOP/s')}" + (f" ({self.gpu})" if self.gpu else "") + "\n"
            f"  communication / compute = {self.ratio:.3g} ({self.comm_share:.0%} of the layer's time communicating)"
        )

    def __str__(self) -> str:
        return self.summary()


def _link_name(link):
    if link is None:
        return None
    if isinstance(link, str):
        from . import hardware

        return hardware.link(link).name
    return getattr(link, "name", None)


def _peak(gpu, precision, peak_flops):
    if peak_flops is not None:
        return positive(peak_flops, FLOP_PER_SECOND, "peak_flops"), None
    from . import hardware

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
    sequence_parallel each becomes a reduce-scatter + all-gather (same bytes, same time).
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
    table = SP_COLLECTIVES if sequence_parallel else TP_COLLECTIVES
    if mode == "full":  # the recomputed forward repeats the forward collectives
        forward = [entry for entry in table if entry[0].startswith("forward")]
        table = tuple(forward) + tuple((name.replace("forward:", "recomputed forward:"), op) for name, op in forward) \
            + tuple(entry for entry in table if entry[0].startswith("backward"))
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


# ----------------------------------------------------------------------------------------
# Sequence parallelism: activation memory


@dataclass(frozen=True)
class SequenceParallelSaving:
    """Activation bytes of one layer per GPU with tensor parallelism alone and with sequence parallelism."""

    tp: int
    without_bytes: float
    with_bytes: float

    @property
    def saved_bytes(self) -> float:
        return self.without_bytes - self.with_bytes

    @property
    def saved_fraction(self) -> float:
        return self.saved_bytes / self.without_bytes

    @property
    def saved(self):
        return Q_(self.saved_bytes, BYTES).to("MB")

    def __str__(self) -> str:
        return (f"tp={self.tp}: {format_bytes(self.without_bytes)} per layer without sequence parallelism, "
                f"{format_bytes(self.with_bytes)} with it ({format_bytes(self.saved_bytes)} saved, "
                f"{self.saved_fraction:.0%})")


def sequence_parallel_saving(model, tp, micro_batch_size=1, seq_len=None, recompute="selective",
                             precision="mixed") -> SequenceParallelSaving:
    """Activation memory of one layer with and without sequence parallelism (distlab.memory).

    Korthikanti et al. 2022, Table 2: with tensor parallelism alone s b h (10 + 24/t + 5 a s/(h t));
    sequence parallelism divides the 10 (norms and dropouts) by t too: s b h (34/t + 5 a s/(h t)).
    Lesson 5 §6.

    GPT-3, t = 8, selective recomputation: (10 + 24/8) against 34/8 s b h, 4.25 / 13 of it left:

    >>> round(sequence_parallel_saving('gpt3-175b', 8).saved_fraction, 3)
    0.673
    """
    m = _model(model)
    t = check_tp(m, tp)
    args = dict(micro_batch_size=micro_batch_size, seq_len=seq_len, tp=t, recompute=recompute, precision=precision)
    without = memory.activation_bytes_per_layer(m, sequence_parallel=False, **args)
    with_sp = memory.activation_bytes_per_layer(m, sequence_parallel=True, **args)
    return SequenceParallelSaving(t, without, with_sp)


# ----------------------------------------------------------------------------------------
# Context parallelism: the ring-attention KV buffer


def ring_attention_buffer_bytes(seq_len, cp, hidden, element_bytes=2.0, micro_batch_size=1):
    """KV ring buffer per GPU, 2 x S/N x H x bytes (x b), NumPy broadcast, unvalidated (the fast path).

    Liu et al. 2023. Lesson 5 §7.

    >>> ring_attention_buffer_bytes(131072, 8, 1024, 2)  # 2 x 16,384 x 1,024 x 2 B = 64 MiB
    67108864.0
    """
    result = (2.0 * np.asarray(seq_len, dtype=float) / np.asarray(cp, dtype=float) * np.asarray(hidden, dtype=float)
              * np.asarray(element_bytes, dtype=float) * np.asarray(micro_batch_size, dtype=float))
    return float(result) if np.ndim(result) == 0 else result


@dataclass(frozen=True)
class RingAttentionBuffer:
    """The ring-attention KV buffer of one GPU and whether it fits the memory left for it."""

    seq_len: int
    cp: int
    hidden: int
    element_bytes: float
    micro_batch_size: int
    buffer_bytes: float
    available_bytes: float | None = None

    @property
    def buffer(self):
        return Q_(self.buffer_bytes, BYTES).to("MB")

    @property
    def fits(self) -> bool | None:
        if self.available_bytes is None:
            return None
        return self.buffer_bytes <= self.available_bytes

    @property
    def max_seq_len(self) -> int | None:
        """The longest sequence (a multiple of cp) whose buffer fits the available bytes."""
        if self.available_bytes is None:
            return None
        per_token = self.buffer_bytes / self.seq_len
        return int(self.available_bytes // (per_token * self.cp)) * self.cp

    def verdict(self) -> str:
        if self.available_bytes is None:
            return ""
        if self.fits:
            return f"fits the {format_bytes(self.available_bytes)} available"
        return f"does not fit: {format_bytes(self.buffer_bytes - self.available_bytes)} over the " \
               f"{format_bytes(self.available_bytes)} available"

    def __str__(self) -> str:
        text = (f"S={self.seq_len:,} over cp={self.cp}: KV ring buffer 2 x {self.seq_len // self.cp:,} x "
                f"{self.hidden:,} x {self.element_bytes:g} B = {format_bytes(self.buffer_bytes)} per GPU")
        return text + (f"; {self.verdict()}" if self.available_bytes is not None else "")


def ring_attention_buffer(seq_len, cp, hidden, *, precision="mixed", micro_batch_size=1,
                          available=None) -> RingAttentionBuffer:
    """The KV ring buffer of context parallelism / ring attention (Liu et al. 2023, "Ring Attention
    with Blockwise Transformers"): each GPU holds S/N tokens and, while it computes attention against
    one key/value block, receives the next: 2 x S/N x H x bytes per sequence.

    hidden: the key/value width (H for multi-head attention; model.kv_dim with grouped-query
    attention). precision sets the bytes per element (PrecisionRecipe.activation_bytes, fp8: 1: FP8
    attention, e.g. Transformer Engine's FP8 DotProductAttention, can keep and exchange K/V in FP8).
    available: memory left for the buffer (e.g. '2 GB'); then `fits` and `max_seq_len` say when it
    stops fitting. cp must divide seq_len. Lesson 5 §7.

    64 MiB do not fit 32 MB; 512 B per token x 8 GPUs: 32e6 // 4096 = 7,812 tokens per GPU fit, x 8:

    >>> buf = ring_attention_buffer(131072, 8, 1024, available='32 MB')
    >>> buf.buffer_bytes, buf.fits, buf.max_seq_len
    (67108864.0, False, 62496)
    """
    s = positive_int(seq_len, "seq_len")
    n = positive_int(cp, "cp")
    h = positive_int(hidden, "hidden")
    b = positive_int(micro_batch_size, "micro_batch_size")
    if s % n:
        raise ConfigurationError(
            f"cp={n} does not divide seq_len={s}: every GPU of the ring holds an equal block of tokens; "
            f"valid cp: {short_list(divisors(s), 16)}"
        )
    e = element_bytes(precision)
    avail = None if available is None else positive(available, BYTES, "available")
    return RingAttentionBuffer(s, n, h, e, b, ring_attention_buffer_bytes(s, n, h, e, b), avail)


# ----------------------------------------------------------------------------------------
# The numerical demonstration: real matrices on simulated GPUs


def _matrix(a, name: str) -> np.ndarray:
    array = np.asarray(a)
    if array.ndim != 2:
        raise ConfigurationError(f"{name} has shape {array.shape}; expected a 2-D matrix")
    if array.dtype == bool or not np.issubdtype(array.dtype, np.number):
        raise ConfigurationError(f"{name} has dtype {array.dtype}; expected numbers")
    if array.size == 0:
        raise ConfigurationError(f"{name} is empty (shape {array.shape})")
    if np.issubdtype(array.dtype, np.inexact) and not np.all(np.isfinite(array)):
        raise ConfigurationError(f"{name} contains NaN or infinity")
    return array.astype(np.result_type(array.dtype, np.float64), copy=False)


def _check_split(size: int, t: int, what: str) -> None:
    if size % t:
        raise ConfigurationError(f"tp={t} does not divide the {size} {what}; valid: {short_list(divisors(size), 16)}")


def _gelu(x):
    # GeLU, tanh approximation (Hendrycks & Gimpel 2016), as GPT-2/3 and Megatron-LM use
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


ACTIVATIONS = {"gelu": _gelu, "relu": lambda x: np.maximum(x, 0.0), "identity": lambda x: x}


def _activation(name):
    if not isinstance(name, str) or name.strip().lower() not in ACTIVATIONS:
        raise ConfigurationError(f"activation={name!r} is not known; valid: {', '.join(ACTIVATIONS)}")
    return ACTIVATIONS[name.strip().lower()]


def random_mlp(tokens=4, hidden=8, ffn=32, seed=0):
    """(x, w_in, w_out) with standard-normal entries from a seeded generator: x (tokens, hidden),
    w_in (hidden, ffn), w_out (ffn, hidden), weights scaled by 1/sqrt(fan-in). Lesson 5 §2.

    >>> [a.shape for a in random_mlp(tokens=4, hidden=8, ffn=32, seed=0)]
    [(4, 8), (8, 32), (32, 8)]
    """
    n, h, f = positive_int(tokens, "tokens"), positive_int(hidden, "hidden"), positive_int(ffn, "ffn")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise ConfigurationError(f"seed={seed!r} must be a whole number")
    rng = np.random.default_rng(int(seed))
    return rng.standard_normal((n, h)), rng.standard_normal((h, f)) / math.sqrt(h), rng.standard_normal((f, h)) / math.sqrt(f)


@dataclass(frozen=True)
class SplitMatmulResult:
    """Y = X W computed on tp simulated GPUs, then combined by a simulated collective."""

    split: str
    tp: int
    weight_shards: tuple
    partials: tuple
    combined: np.ndarray
    reference: np.ndarray
    trace: object

    @property
    def max_abs_error(self) -> float:
        return float(np.max(np.abs(self.combined - self.reference)))

    @property
    def allclose(self) -> bool:
        return bool(np.allclose(self.combined, self.reference))


def simulate_split_matmul(x, w, tp, split="column") -> SplitMatmulResult:
    """One matmul Y = X W on tp simulated GPUs.

    split='column': GPU i keeps W[:, block i] and computes the column block X W_i; an all-gather
    (distlab.collectives.simulate_all_gather) concatenates the blocks. split='row': GPU i keeps
    W[block i, :] and X[:, block i] and computes a partial X_i W_i of the full shape; an all-reduce
    (simulate_ring_all_reduce) adds them. Either way every GPU ends with X W. Lesson 5 §1.

    >>> x, w, _ = random_mlp(seed=0)
    >>> r = simulate_split_matmul(x, w, 4, split='column')
    >>> r.weight_shards[0].shape, r.allclose  # 32 columns / 4 GPUs
    ((8, 8), True)
    """
    xm, wm = _matrix(x, "x"), _matrix(w, "w")
    if xm.shape[1] != wm.shape[0]:
        raise ConfigurationError(f"x is {xm.shape} and w is {wm.shape}: x's columns must equal w's rows")
    t = positive_int(tp, "tp")
    if split not in ("column", "row"):
        raise ConfigurationError(f"split={split!r} is not valid; valid: column, row")
    reference = xm @ wm
    if split == "column":
        _check_split(wm.shape[1], t, "columns of w")
        blocks = np.split(np.arange(wm.shape[1]), t)
        shards = tuple(wm[:, blk] for blk in blocks)
        partials = tuple(xm @ s for s in shards)
        # all-gather on the transposed blocks: their flattened rows concatenate to Y^T
        trace = collectives.simulate_all_gather([p.T.ravel() for p in partials])
        combined = trace.outputs[0].reshape(wm.shape[1], xm.shape[0]).T
    else:
        _check_split(wm.shape[0], t, "rows of w")
        blocks = np.split(np.arange(wm.shape[0]), t)
        shards = tuple(wm[blk, :] for blk in blocks)
        partials = tuple(xm[:, blk] @ wm[blk, :] for blk in blocks)
        trace = collectives.simulate_ring_all_reduce([p.ravel() for p in partials])
        combined = trace.outputs[0].reshape(reference.shape)
    return SplitMatmulResult(split, t, shards, partials, combined, reference, trace)


@dataclass(frozen=True)
class TPMLPResult:
    """A Megatron MLP, act(X A) B, computed on tp simulated GPUs and summed by a simulated ring all-reduce.

    outputs[i] is GPU i's result after the all-reduce; reference the unsplit MLP on one GPU.
    """

    tp: int
    activation: str
    w_in_shards: tuple
    w_out_shards: tuple
    hidden_shards: tuple
    partials: tuple
    outputs: tuple
    reference: np.ndarray
    trace: object

    @property
    def max_abs_error(self) -> float:
        return float(max(np.max(np.abs(out - self.reference)) for out in self.outputs))

    @property
    def allclose(self) -> bool:
        """Every GPU's output equals the unsplit MLP (np.allclose, float64)."""
        return all(bool(np.allclose(out, self.reference)) for out in self.outputs)

    @property
    def bytes_sent_per_gpu(self) -> float:
        """Bytes each GPU sent in the ring all-reduce (2 (t-1)/t x the output buffer)."""
        return self.trace.bytes_sent_per_gpu

    def __str__(self) -> str:
        a, b = self.w_in_shards[0].shape, self.w_out_shards[0].shape
        return (f"tp={self.tp}: each GPU keeps A_i {a[0]} x {a[1]} and B_i {b[0]} x {b[1]}; one ring all-reduce "
                f"({self.trace.steps} steps) sums the partial outputs; largest difference from the unsplit MLP "
                f"{self.max_abs_error:.1e}; allclose: {self.allclose}")


def simulate_tp_mlp(x, w_in, w_out, tp, activation="gelu") -> TPMLPResult:
    """Megatron's MLP split over tp simulated GPUs, with real numbers.

    GPU i keeps the column block A_i = w_in[:, block i] and the row block B_i = w_out[block i, :]
    (blocks of ffn/tp), computes Y_i = act(X A_i) with no communication (the nonlinearity acts
    element by element, so a column block of act(X A) is act of the column block), then the
    partial Z_i = Y_i B_i of the full output shape. A ring all-reduce
    (distlab.collectives.simulate_ring_all_reduce) sums the Z_i on every GPU; the result equals
    act(X A) B, since X A B = sum_i X A_i B_i. tp must divide ffn. Shoeybi et al. 2019, Sec. 3. Lesson 5 §2.

    The 4 x 8 float64 output (256 B) is summed in 2 (t - 1) = 6 ring steps, each GPU sending 2 (t-1)/t x 256 B:

    >>> r = simulate_tp_mlp(*random_mlp(seed=0), tp=4)
    >>> r.allclose, r.trace.steps, r.bytes_sent_per_gpu
    (True, 6, 384.0)
    """
    xm, a, b = _matrix(x, "x"), _matrix(w_in, "w_in"), _matrix(w_out, "w_out")
    if xm.shape[1] != a.shape[0]:
        raise ConfigurationError(f"x is {xm.shape} and w_in is {a.shape}: x's columns must equal w_in's rows")
    if a.shape[1] != b.shape[0]:
        raise ConfigurationError(f"w_in is {a.shape} and w_out is {b.shape}: w_in's columns must equal w_out's rows")
    t = positive_int(tp, "tp")
    _check_split(a.shape[1], t, "MLP columns (ffn)")
    act = _activation(activation)
    blocks = np.split(np.arange(a.shape[1]), t)
    a_shards = tuple(a[:, blk] for blk in blocks)
    b_shards = tuple(b[blk, :] for blk in blocks)
    hidden = tuple(act(xm @ ai) for ai in a_shards)
    partials = tuple(y @ bi for y, bi in zip(hidden, b_shards))
    trace = collectives.simulate_ring_all_reduce([z.ravel() for z in partials])
    outputs = tuple(out.reshape(xm.shape[0], b.shape[1]) for out in trace.outputs)
    reference = act(xm @ a) @ b
    return TPMLPResult(t, activation.strip().lower(), a_shards, b_shards, hidden, partials, outputs, reference, trace)
