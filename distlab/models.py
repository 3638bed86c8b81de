"""Transformer model shapes, their parameter counts, and a catalog with sources.

A `TransformerModel` is a frozen description of a decoder-only transformer: the sizes
that fix every weight matrix (layers, hidden, heads, kv_heads, ffn, vocab) and the
architectural switches that change the count (gated MLP, tied embeddings, LayerNorm or
RMSNorm, linear biases, learned position embeddings). Its methods count the parameters
tensor by tensor, so the count follows from the architecture and is checked against the
figure the authors publish (`published_params`), never copied from it.

`megatron_parameter_count` is the closed form of Narayanan et al. 2021, Eq. 2, for the
GPT shape that Megatron-LM trains (ffn = 4h, LayerNorm, biases, learned positions, tied
output layer). The architecture count of that shape is Eq. 2 plus the 2h parameters of
the final LayerNorm, which Eq. 2 leaves out.

    >>> from distlab import models
    >>> models.model("llama2-7b").parameter_count()
    6738415616
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any, Optional

from ._arguments import divisors
from ._catalog import lookup
from .errors import ConfigurationError, UnknownNameError
from .units import positive, positive_int

__all__ = [
    "param_count",
    "NORMS",
    "RopeScaling",
    "TransformerModel",
    "megatron_parameter_count",
    "MODELS",
    "MEGATRON_TABLE_1",
    "model",
]

#: Normalisation layers and the parameters each holds per hidden unit.
NORMS = {"layernorm": 2, "rmsnorm": 1}  # LayerNorm: weight + bias; RMSNorm: weight only


def _divisor_hint(n: int, value: int) -> str:
    """The divisors of n, or those nearest to value when there are many (or n is huge)."""
    if n > 10**10:
        return f"a divisor of {n}"
    divs = divisors(n)
    if len(divs) <= 12:
        return ", ".join(map(str, divs))
    below = [d for d in divs if d < value][-3:]
    above = [d for d in divs if d > value][:3]
    near = below + above
    head = "" if near[0] == divs[0] else "..., "
    tail = "" if near[-1] == divs[-1] else ", ..."
    return f"{head}{', '.join(map(str, near))}{tail} (divisors of {n})"


def _flag(value, name: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigurationError(f"{name}={value!r} must be True or False")
    return value


def _positive_number(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value <= 0:
        raise ConfigurationError(f"{name}={value!r} must be a positive finite number")
    return float(value)


@dataclass(frozen=True, kw_only=True)
class RopeScaling:
    """Llama 3.1's RoPE frequency scaling: the "rope_scaling" block of a Hugging Face config.json with
    "rope_type": "llama3". Rotary wavelengths longer than original_max_position_embeddings / low_freq_factor
    are divided by factor, those shorter than original / high_freq_factor are kept, and the band between is
    interpolated (Meta's llama-models reference code, apply_scaling; the same rule in Megatron-LM's
    RotaryEmbedding._apply_scaling and torchtitan's llama3 precompute_freqs_cis). It changes no parameter
    count: it is recorded so that an export builds the same model (distlab.export). Lesson 7 §7.

    >>> RopeScaling().factor  # Llama 3.1's config.json: factor 8.0, low 1.0, high 4.0, original 8192
    8.0
    """

    kind: str = "llama3"
    factor: float = 8.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position_embeddings: int = 8192

    def __post_init__(self):
        set_ = lambda field, value: object.__setattr__(self, field, value)  # noqa: E731 (frozen)
        if self.kind != "llama3":
            raise ConfigurationError(f"rope scaling kind={self.kind!r}; valid: llama3")
        for field in ("factor", "low_freq_factor", "high_freq_factor"):
            set_(field, _positive_number(getattr(self, field), field))
        if self.high_freq_factor <= self.low_freq_factor:
            raise ConfigurationError(
                f"high_freq_factor={self.high_freq_factor:g} must exceed low_freq_factor={self.low_freq_factor:g}"
            )
        set_(
            "original_max_position_embeddings",
            positive_int(self.original_max_position_embeddings, "original_max_position_embeddings"),
        )


@dataclass(frozen=True, kw_only=True)
class TransformerModel:
    """A decoder-only transformer, described by the sizes that fix its weights.

    Fields (all keyword-only):
        name:                catalog-style name, e.g. "llama2-7b"
        layers:              number of transformer blocks l
        hidden:              model width h (d_model)
        heads:               attention (query) heads a; must divide hidden
        kv_heads:            key/value heads (grouped-query attention); must divide heads;
                             default: heads (multi-head attention)
        ffn:                 MLP inner size f (4h for GPT-3 and Megatron GPT)
        vocab:               vocabulary size V (rows of the token embedding)
        gated_mlp:           SwiGLU MLP with three h x f matrices (gate, up, down) as in
                             Llama; False: two (up, down) as in GPT
        tied_embeddings:     the output layer reuses the token embedding (GPT-2/3, Megatron)
        norm:                "layernorm" (weight + bias) or "rmsnorm" (weight only)
        biases:              linear layers carry biases (GPT-2/3, Megatron); Llama: none
        position_embeddings: learned position embeddings (rows); 0 for rotary (RoPE)
        rope_theta:          the rotary base of RoPE ("rope_theta" in config.json: Llama 2 10,000,
                             Llama 3 and 3.1 500,000); None when not recorded or with learned positions
        rope_scaling:        a RopeScaling (Llama 3.1's "llama3" frequency scaling) or None (no scaling)
        seq_len:             default training context s in tokens
        dropout:             dropout layers present in training (GPT-3/Megatron: True;
                             Llama: False); used by activation memory
        published_params:    parameter count the authors report (None for a custom model)
        source:              where the architecture and the published count come from
    """

    name: str
    layers: int
    hidden: int
    heads: int
    # None (the default: multi-head attention) is replaced by heads in __post_init__: always an int once built
    kv_heads: int = None  # type: ignore[assignment]
    ffn: int
    vocab: int
    gated_mlp: bool = False
    tied_embeddings: bool = False
    norm: str = "layernorm"
    biases: bool = False
    position_embeddings: int = 0
    rope_theta: Optional[float] = None
    rope_scaling: Optional[RopeScaling] = None
    seq_len: int = 2048
    dropout: bool = False
    published_params: Optional[float] = None
    source: str = ""

    def __post_init__(self):
        set_ = lambda field, value: object.__setattr__(self, field, value)  # noqa: E731 (frozen)
        if not isinstance(self.name, str) or not self.name.strip():
            raise ConfigurationError(f"name={self.name!r} must be a non-empty string")
        for field in ("layers", "hidden", "heads", "ffn", "vocab", "seq_len"):
            set_(field, positive_int(getattr(self, field), field))
        kv = self.heads if self.kv_heads is None else positive_int(self.kv_heads, "kv_heads")
        set_("kv_heads", kv)
        if self.hidden % self.heads:
            raise ConfigurationError(
                f"heads={self.heads} does not divide hidden={self.hidden} "
                f"(each head needs hidden/heads channels); valid heads: {_divisor_hint(self.hidden, self.heads)}"
            )
        if self.heads % kv:
            raise ConfigurationError(
                f"kv_heads={kv} does not divide heads={self.heads} "
                f"(each key/value head serves a whole group of query heads); "
                f"valid kv_heads: {_divisor_hint(self.heads, kv)}"
            )
        for field in ("gated_mlp", "tied_embeddings", "biases", "dropout"):
            _flag(getattr(self, field), field)
        norm = self.norm.strip().lower() if isinstance(self.norm, str) else self.norm
        if norm not in NORMS:
            raise ConfigurationError(f"norm={self.norm!r} is not a normalisation; valid: {', '.join(NORMS)}")
        set_("norm", norm)
        pos = self.position_embeddings
        if (
            isinstance(pos, bool)
            or not isinstance(pos, numbers.Real)
            or not math.isfinite(pos)
            or pos != int(pos)
            or pos < 0
        ):
            raise ConfigurationError(
                f"position_embeddings={pos!r} must be a whole number >= 0 "
                f"(rows of learned positions; 0 for rotary embeddings)"
            )
        set_("position_embeddings", int(pos))
        if self.position_embeddings and self.seq_len > self.position_embeddings:
            raise ConfigurationError(
                f"seq_len={self.seq_len} exceeds position_embeddings={self.position_embeddings} "
                f"(a learned position per token); valid seq_len: 1 to {self.position_embeddings}"
            )
        if self.rope_theta is not None:
            set_("rope_theta", _positive_number(self.rope_theta, "rope_theta"))
        if self.rope_scaling is not None and not isinstance(self.rope_scaling, RopeScaling):
            raise ConfigurationError(f"rope_scaling={self.rope_scaling!r} must be a distlab.models.RopeScaling or None")
        if self.position_embeddings and (self.rope_theta is not None or self.rope_scaling is not None):
            raise ConfigurationError(
                f"position_embeddings={self.position_embeddings} (learned positions) with rope_theta or rope_scaling: "
                f"a model has learned positions or rotary ones; set position_embeddings=0 for RoPE"
            )
        if self.rope_scaling is not None and self.rope_theta is None:
            raise ConfigurationError("rope_scaling needs the rotary base rope_theta")
        pub = self.published_params
        if pub is not None:
            if isinstance(pub, bool) or not isinstance(pub, numbers.Real) or not math.isfinite(pub) or pub <= 0:
                raise ConfigurationError(f"published_params={pub!r} must be a positive number of parameters or None")
            set_("published_params", float(pub))
        if not isinstance(self.source, str):
            raise ConfigurationError(f"source={self.source!r} must be a string")

    # --- shapes ---------------------------------------------------------------------

    @property
    def head_dim(self) -> int:
        """Channels per attention head: hidden / heads."""
        return self.hidden // self.heads

    @property
    def kv_dim(self) -> int:
        """Width of the key (and of the value) projection: kv_heads x head_dim."""
        return self.kv_heads * self.head_dim

    # --- parameters, tensor by tensor ---------------------------------------------------

    def attention_params_per_layer(self) -> int:
        """Attention weights of one block.

        h*h (Q) + 2*h*kv_dim (K, V) + h*h (O), plus with biases h + 2*kv_dim + h.
        Multi-head attention (kv_dim = h) gives 4h^2 (+ 4h).
        """
        h, kv = self.hidden, self.kv_dim
        weights = h * h + 2 * h * kv + h * h
        return weights + ((h + 2 * kv + h) if self.biases else 0)

    def mlp_params_per_layer(self) -> int:
        """MLP weights of one block.

        Plain: 2*h*f (up, down) [+ biases f + h].
        Gated (SwiGLU): 3*h*f (gate, up, down) [+ biases 2f + h].
        """
        h, f = self.hidden, self.ffn
        matrices = 3 if self.gated_mlp else 2
        bias = ((matrices - 1) * f + h) if self.biases else 0
        return matrices * h * f + bias

    def norm_params_per_layer(self) -> int:
        """The two norms of one block (before attention and before the MLP).

        LayerNorm: 2 x (weight h + bias h) = 4h; RMSNorm: 2 x weight h = 2h.
        """
        return 2 * NORMS[self.norm] * self.hidden

    def params_per_layer(self) -> int:
        """attention + MLP + norms of one block (12h^2 + 13h for the GPT shape with f = 4h)."""
        return self.attention_params_per_layer() + self.mlp_params_per_layer() + self.norm_params_per_layer()

    def embedding_params(self) -> int:
        """Token embedding V*h plus learned positions position_embeddings*h (0 with rotary)."""
        return (self.vocab + self.position_embeddings) * self.hidden

    def output_params(self) -> int:
        """Output (logit) layer V*h; 0 when tied to the token embedding."""
        return 0 if self.tied_embeddings else self.vocab * self.hidden

    def final_norm_params(self) -> int:
        """The norm after the last block: 2h (LayerNorm) or h (RMSNorm)."""
        return NORMS[self.norm] * self.hidden

    def parameter_count(self) -> int:
        """All parameters: layers x params_per_layer + embeddings + output layer + final norm."""
        return (
            self.layers * self.params_per_layer()
            + self.embedding_params()
            + self.output_params()
            + self.final_norm_params()
        )


def megatron_parameter_count(layers, hidden, vocab, seq_len) -> int:
    """Parameters of a Megatron GPT model, Narayanan et al. 2021, Eq. 2.

        P = 12 l h^2 (1 + 13/(12h) + (V + s)/(12 l h)) = 12 l h^2 + 13 l h + (V + s) h

    l layers, hidden size h, vocabulary V, sequence length s (learned positions).
    Per block: 4h^2 + 4h attention, 8h^2 + 5h MLP (f = 4h), 4h for two LayerNorms; plus the
    token and position embeddings, the output layer tied to the token embedding. The
    final LayerNorm (2h) is not in Eq. 2. Computed in integers, so the result is exact.

    Lesson 1 §2.

    >>> megatron_parameter_count(96, 12288, 51200, 2048)  # GPT-3 175B as in Narayanan et al. 2021, Table 1
    174615822336
    """
    l = positive_int(layers, "layers")
    h = positive_int(hidden, "hidden")
    v = positive_int(vocab, "vocab")
    s = positive_int(seq_len, "seq_len")
    return 12 * l * h * h + 13 * l * h + (v + s) * h


# --- catalog -----------------------------------------------------------------------------

_LLAMA: dict[str, Any] = dict(
    gated_mlp=True,
    tied_embeddings=False,
    norm="rmsnorm",
    biases=False,
    position_embeddings=0,
    dropout=False,
)

#: Rotary settings from the models' Hugging Face config.json files: Llama 2 "rope_theta": 10000.0 with
#: "rope_scaling": null (the RoPE base of Su et al. 2021); Llama 3 "rope_theta": 500000.0, no scaling (Llama Team
#: 2024, Sec. 3.2.1: RoPE base frequency raised to 500,000); Llama 3.1 "rope_theta": 500000.0 and "rope_scaling":
#: {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
#: "original_max_position_embeddings": 8192}.
_LLAMA2_ROPE: dict[str, Any] = dict(rope_theta=10000.0, rope_scaling=None)
_LLAMA31_ROPE: dict[str, Any] = dict(rope_theta=500000.0, rope_scaling=RopeScaling())

_LLAMA2_SRC = (
    "Touvron et al. 2023, 'Llama 2: Open Foundation and Fine-Tuned Chat Models', Table 1 "
    "(sizes, 4k context, GQA for 70B only); Hugging Face meta-llama/Llama-2-{size}-hf config.json "
    "(rope_theta 10000.0, rope_scaling null) "
    "and Meta's reference code (FFN = multiple_of-rounded 2/3 x 4h{mult}). "
)
_LLAMA31_SRC = (
    "Llama Team 2024, 'The Llama 3 Herd of Models', Table 3 (layers, width, FFN, heads, 8 KV heads); "
    "Meta llama-models sku_list.py and Hugging Face meta-llama/Llama-3.1-{size} config.json "
    "(vocab_size 128256, intermediate_size {ffn}, tie_word_embeddings false, rope_theta 500000.0, rope_scaling "
    "rope_type llama3 with factor 8.0, low_freq_factor 1.0, high_freq_factor 4.0, "
    "original_max_position_embeddings 8192). seq_len 8192 is the "
    "pre-training context (Sec. 3.4); long-context training later extends it to 128K. "
)

_GPT3_175B = TransformerModel(
    name="gpt3-175b",
    layers=96,
    hidden=12288,
    heads=96,
    ffn=4 * 12288,
    vocab=50257,
    gated_mlp=False,
    tied_embeddings=True,
    norm="layernorm",
    biases=True,
    position_embeddings=2048,
    seq_len=2048,
    dropout=True,
    published_params=175e9,
    source=(
        "Brown et al. 2020, 'Language Models are Few-Shot Learners', Table 2.1 (175.0B params, "
        "96 layers, d_model 12288, 96 heads, d_head 128, n_ctx 2048) and Sec. 2.1 (d_ff = 4 d_model; "
        "same model and architecture as GPT-2: learned positions, LayerNorm, biases, tied output); "
        "GPT-2 BPE vocabulary of 50,257 (Radford et al. 2019). The architecture count is 174.6B."
    ),
)

_LLAMA_ENTRIES = [
    TransformerModel(
        name="llama2-7b",
        layers=32,
        hidden=4096,
        heads=32,
        ffn=11008,
        vocab=32000,
        seq_len=4096,
        published_params=6_738_415_616,
        **_LLAMA,
        **_LLAMA2_ROPE,
        source=_LLAMA2_SRC.format(size="7b", mult="") + "6,738,415,616 parameters as counted by "
        "Hugging Face transformers (model card: 7B).",
    ),
    TransformerModel(
        name="llama2-13b",
        layers=40,
        hidden=5120,
        heads=40,
        ffn=13824,
        vocab=32000,
        seq_len=4096,
        published_params=13.02e9,
        **_LLAMA,
        **_LLAMA2_ROPE,
        source=_LLAMA2_SRC.format(size="13b", mult="") + "13.02B parameters on Hugging Face (model card: 13B).",
    ),
    TransformerModel(
        name="llama2-70b",
        layers=80,
        hidden=8192,
        heads=64,
        kv_heads=8,
        ffn=28672,
        vocab=32000,
        seq_len=4096,
        published_params=68.98e9,
        **_LLAMA,
        **_LLAMA2_ROPE,
        source=_LLAMA2_SRC.format(size="70b", mult=" x 1.3") + "68.98B parameters on Hugging Face (model card: 70B).",
    ),
    TransformerModel(
        name="llama3.1-8b",
        layers=32,
        hidden=4096,
        heads=32,
        kv_heads=8,
        ffn=14336,
        vocab=128256,
        seq_len=8192,
        published_params=8_030_261_248,
        **_LLAMA,
        **_LLAMA31_ROPE,
        source=_LLAMA31_SRC.format(size="8B", ffn=14336) + "8,030,261,248 parameters on Hugging Face.",
    ),
    TransformerModel(
        name="llama3.1-70b",
        layers=80,
        hidden=8192,
        heads=64,
        kv_heads=8,
        ffn=28672,
        vocab=128256,
        seq_len=8192,
        published_params=70.55e9,
        **_LLAMA,
        **_LLAMA31_ROPE,
        source=_LLAMA31_SRC.format(size="70B", ffn=28672) + "70.55B parameters on Hugging Face.",
    ),
    TransformerModel(
        name="llama3.1-405b",
        layers=126,
        hidden=16384,
        heads=128,
        kv_heads=8,
        ffn=53248,
        vocab=128256,
        seq_len=8192,
        published_params=405.85e9,
        **_LLAMA,
        **_LLAMA31_ROPE,
        source=_LLAMA31_SRC.format(size="405B", ffn=53248) + "405.85B parameters on Hugging Face.",
    ),
]

#: Narayanan et al. 2021, Table 1: (name suffix, published params, heads, hidden, layers).
MEGATRON_TABLE_1 = (
    ("1.7b", 1.7e9, 24, 2304, 24),
    ("3.6b", 3.6e9, 32, 3072, 30),
    ("7.5b", 7.5e9, 32, 4096, 36),
    ("18.4b", 18.4e9, 48, 6144, 40),
    ("39.1b", 39.1e9, 64, 8192, 48),
    ("76.1b", 76.1e9, 80, 10240, 60),
    ("145.6b", 145.6e9, 96, 12288, 80),
    ("310.1b", 310.1e9, 128, 16384, 96),
    ("529.6b", 529.6e9, 128, 20480, 105),
    ("1t", 1008.0e9, 160, 25600, 128),
)
MEGATRON_VOCAB = 51200
MEGATRON_SEQ_LEN = 2048


def _megatron(suffix: str, published: float, heads: int, hidden: int, layers: int) -> TransformerModel:
    return TransformerModel(
        name=f"megatron-gpt-{suffix}",
        layers=layers,
        hidden=hidden,
        heads=heads,
        ffn=4 * hidden,
        vocab=MEGATRON_VOCAB,
        gated_mlp=False,
        tied_embeddings=True,
        norm="layernorm",
        biases=True,
        position_embeddings=MEGATRON_SEQ_LEN,
        seq_len=MEGATRON_SEQ_LEN,
        dropout=True,
        published_params=published,
        source=(
            "Narayanan et al. 2021, 'Efficient Large-Scale Language Model Training on GPU Clusters "
            f"Using Megatron-LM', Table 1 ({published / 1e9:.1f}B: {heads} heads, hidden {hidden}, "
            f"{layers} layers); vocabulary 51,200 and sequence length 2048 for all Table 1 models "
            "(paper text with Table 1; Megatron-LM README). GPT shape "
            "of Eq. 2 (ffn 4h, LayerNorm, biases, learned positions, tied output layer). "
            "Table 1 rounds to 0.1B."
        ),
    )


MODELS: dict[str, TransformerModel] = {
    m.name: m for m in [_GPT3_175B, *_LLAMA_ENTRIES, *(_megatron(*row) for row in MEGATRON_TABLE_1)]
}


def model(name) -> TransformerModel:
    """The catalog model called `name` (case and surrounding spaces ignored).

    A TransformerModel passes through unchanged. An unknown name raises UnknownNameError
    listing the closest names.

    Lesson 1 §2 (every lesson names its models through it).

    >>> model('Llama2-7B').parameter_count()
    6738415616
    """
    if isinstance(name, TransformerModel):
        return name
    if isinstance(name, str):
        from .moe.catalog import MOE_MODELS

        if name.strip().lower() in MOE_MODELS:
            raise UnknownNameError(
                f"{name.strip().lower()!r} is a mixture-of-experts model: its experts are counted "
                f"by distlab.moe (moe.model, moe.expert_parallel_memory, moe.moe_step_flops), "
                f"not by the dense formulas"
            )
    return lookup(MODELS, name, "model")


def param_count(value) -> float:
    """Parameter count of a model (a catalog name or anything with .parameter_count()) or of a plain number.
    Lesson 1 §1.

    >>> param_count('llama2-7b') == model('llama2-7b').parameter_count(), param_count(7e9)
    (True, 7000000000.0)
    """
    if isinstance(value, str):
        return float(model(value).parameter_count())
    if hasattr(value, "parameter_count"):
        return float(value.parameter_count())
    return positive(value, "", "params")
