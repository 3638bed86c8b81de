"""Tensor-parallel degrees and weight shards: which t are valid, and what each GPU holds (Shoeybi et al. 2019, Sec. 3). Lesson 5 §1-§3."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .._arguments import divisors, short_list
from ..errors import ConfigurationError
from ..units import (
    positive_int,
)

__all__ = ["valid_tp_degrees", "check_tp", "WeightShard", "TPLayerShards", "layer_shards"]

# ----------------------------------------------------------------------------------------
# Validation


def _model(model):
    """A TransformerModel from a model or a catalog name."""
    from .. import models

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
    for size, what in (
        (m.heads, "attention heads"),
        (m.kv_heads, "key/value heads"),
        (m.hidden, "hidden size"),
        (m.ffn, "MLP inner size (ffn)"),
    ):
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
        lines = [
            f"{self.model}, tp={self.tp}: {self.heads_per_gpu} query heads, {self.kv_heads_per_gpu} key/value "
            f"heads and {self.ffn_per_gpu} MLP columns per GPU"
        ]
        for s in self.shards:
            full = " x ".join(f"{d:,}" for d in s.full_shape)
            part = " x ".join(f"{d:,}" for d in s.shard_shape)
            lines.append(
                f"  {s.name:<22}{s.split:<11}{full:>16} -> {part:<16}{s.params_per_gpu:>14,} parameters per GPU"
            )
        lines.append(
            f"  {'layer total':<22}{'':<11}{self.params_full:>16,} -> {'':<16}{self.params_per_gpu:>14,} parameters per GPU"
        )
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
