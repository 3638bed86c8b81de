"""Mixture-of-experts models: their shapes, parameter counts (total and active per token) and sources.

An `MoEModel` is a decoder-only transformer whose MLP, in every layer after the first
`dense_layers`, is a set of `experts` routed experts (each a SwiGLU MLP of width `expert_ffn`),
`shared_experts` experts every token passes through, and a router (a linear map h -> experts)
that picks `top_k` routed experts per token (Shazeer et al. 2017; GShard, Lepikhin et al. 2021;
Switch Transformer, Fedus et al. 2022). The count follows from the architecture, tensor by
tensor, as in distlab.models, and tests check it against the published figures.

Attention is either grouped-query attention ("gqa": Q, K, V, O projections with an explicit
head_dim, optional biases, sinks and QK norms) or DeepSeek's multi-head latent attention ("mla",
DeepSeek-V2 report Sec. 2.1; DeepSeek-V3 report Sec. 2.1): queries and keys/values pass through
low-rank latents of width q_lora_rank and kv_lora_rank, each followed by an RMSNorm, with a
decoupled rotary key of qk_rope_head_dim shared by all heads. MLA is modelled weight by weight
(no approximation in the parameter count). Its attention core is counted per head with query/key
width qk_nope_head_dim + qk_rope_head_dim and value width v_head_dim.

Active parameters per token: everything but the routed experts, plus top_k routed experts per
MoE layer. Publishers differ on the input embedding (a table lookup, no multiply): Mistral counts
it in Mixtral's 12.9B, OpenAI leaves it out of gpt-oss-120b's 5.13B; `active_parameter_count`
takes `embedding=` for that reason and the tests state which convention each figure uses.

    >>> from distlab import moe
    >>> moe.model("mixtral-8x7b").parameter_count()
    46702792704

Lesson 10 §1.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any, Optional

from .._catalog import lookup
from ..errors import ConfigurationError
from ..units import positive_int

__all__ = ["ATTENTION_KINDS", "MoEModel", "MOE_MODELS", "model"]

#: "gqa": grouped-query (or multi-head) attention; "mla": DeepSeek's multi-head latent attention.
ATTENTION_KINDS = ("gqa", "mla")


def _whole(value: Any, name: str, low: int = 0) -> int:
    # two steps, so that the type check does not narrow `value` to numbers.Real (whose stub lacks __int__)
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    ok = ok and math.isfinite(value) and value == int(value) and value >= low
    if not ok:
        raise ConfigurationError(f"{name}={value!r} must be a whole number >= {low}")
    return int(value)


def _flag(value, name: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigurationError(f"{name}={value!r} must be True or False")
    return value


@dataclass(frozen=True, kw_only=True)
class MoEModel:
    """A mixture-of-experts decoder, described by the sizes that fix its weights (all keyword-only).

    Fields:
        name, layers, hidden, heads, kv_heads (GQA), head_dim (GQA; default hidden / heads), vocab
        attention:        "gqa" or "mla"
        q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim:  MLA sizes
                          (q_lora_rank 0: queries projected directly, as DeepSeek-V2-Lite)
        attention_biases: Q, K, V, O carry biases (gpt-oss)
        attention_sinks:  one learned sink logit per head (gpt-oss)
        qk_norm:          RMSNorm over each query and key head (Qwen3): 2 x head_dim weights
        sliding_window, window_layers: `window_layers` of the layers attend to the last
                          sliding_window tokens only (gpt-oss: every other layer, 128 tokens)
        dense_layers:     the first layers have a dense MLP of width dense_ffn (DeepSeek-V3: 3)
        dense_ffn:        width of those dense MLPs
        experts:          routed experts per MoE layer E
        expert_ffn:       intermediate width of one expert f_e (SwiGLU: 3 h f_e weights)
        shared_experts:   experts every token passes through (DeepSeek: 1)
        top_k:            routed experts per token k
        expert_biases:    expert linears carry biases (gpt-oss)
        router_bias:      the router carries one bias per expert (gpt-oss's linear bias; DeepSeek-V3's
                          e_score_correction_bias, its auxiliary-loss-free balancing bias)
        tied_embeddings:  output layer reuses the token embedding
        seq_len:          default training context in tokens
        published_params, published_active:  the authors' figures; published_active_embedding says
                          whether their active figure includes the input embedding
        source:           where every number comes from
    """

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int = None  # type: ignore[assignment]  # __post_init__ makes it an int (default: heads)
    head_dim: int = None  # type: ignore[assignment]  # __post_init__ makes it an int (default: hidden / heads)
    vocab: int
    attention: str = "gqa"
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    attention_biases: bool = False
    attention_sinks: bool = False
    qk_norm: bool = False
    sliding_window: int = 0
    window_layers: int = 0
    dense_layers: int = 0
    dense_ffn: int = 0
    experts: int
    expert_ffn: int
    shared_experts: int = 0
    top_k: int
    expert_biases: bool = False
    router_bias: bool = False
    tied_embeddings: bool = False
    seq_len: int = 4096
    published_params: Optional[float] = None
    published_active: Optional[float] = None
    published_active_embedding: bool = True
    source: str = ""

    def __post_init__(self):
        def set_(field, value):
            object.__setattr__(self, field, value)

        if not isinstance(self.name, str) or not self.name.strip():
            raise ConfigurationError(f"name={self.name!r} must be a non-empty string")
        for field in ("layers", "hidden", "heads", "vocab", "experts", "expert_ffn", "top_k", "seq_len"):
            set_(field, positive_int(getattr(self, field), field))
        for field in (
            "q_lora_rank",
            "kv_lora_rank",
            "qk_nope_head_dim",
            "qk_rope_head_dim",
            "v_head_dim",
            "sliding_window",
            "window_layers",
            "dense_layers",
            "dense_ffn",
            "shared_experts",
        ):
            set_(field, _whole(getattr(self, field), field))
        for field in (
            "attention_biases",
            "attention_sinks",
            "qk_norm",
            "expert_biases",
            "router_bias",
            "tied_embeddings",
            "published_active_embedding",
        ):
            _flag(getattr(self, field), field)
        kind = self.attention.strip().lower() if isinstance(self.attention, str) else self.attention
        if kind not in ATTENTION_KINDS:
            raise ConfigurationError(f"attention={self.attention!r} is not an attention kind; valid: gqa, mla")
        set_("attention", kind)
        kv = self.heads if self.kv_heads is None else positive_int(self.kv_heads, "kv_heads")
        set_("kv_heads", kv)
        if self.heads % kv:
            raise ConfigurationError(
                f"kv_heads={kv} does not divide heads={self.heads} (each key/value head "
                f"serves a whole group of query heads)"
            )
        if self.head_dim is None:
            if self.hidden % self.heads:
                raise ConfigurationError(f"heads={self.heads} does not divide hidden={self.hidden}; give head_dim=")
            set_("head_dim", self.hidden // self.heads)
        else:
            set_("head_dim", positive_int(self.head_dim, "head_dim"))
        if kind == "mla":
            for field in ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
                if getattr(self, field) < 1:
                    raise ConfigurationError(f"{field}={getattr(self, field)} must be >= 1 for attention='mla'")
        if self.top_k > self.experts:
            raise ConfigurationError(
                f"top_k={self.top_k} is more than the {self.experts} experts; valid: 1 to {self.experts}"
            )
        if self.dense_layers > self.layers:
            raise ConfigurationError(f"dense_layers={self.dense_layers} is more than layers={self.layers}")
        if self.dense_layers and not self.dense_ffn:
            raise ConfigurationError(f"dense_layers={self.dense_layers} needs dense_ffn= (their MLP width)")
        if self.window_layers > self.layers:
            raise ConfigurationError(f"window_layers={self.window_layers} is more than layers={self.layers}")
        if self.window_layers and not self.sliding_window:
            raise ConfigurationError("window_layers > 0 needs sliding_window= (tokens each query sees)")
        for field in ("published_params", "published_active"):
            value = getattr(self, field)
            if value is not None:
                if (
                    isinstance(value, bool)
                    or not isinstance(value, numbers.Real)
                    or not math.isfinite(value)
                    or value <= 0
                ):
                    raise ConfigurationError(f"{field}={value!r} must be a positive number or None")
                set_(field, float(value))
        if not isinstance(self.source, str):
            raise ConfigurationError(f"source={self.source!r} must be a string")

    # --- shapes -------------------------------------------------------------------------
    @property
    def moe_layers(self) -> int:
        """Layers whose MLP is a mixture of experts: layers - dense_layers."""
        return self.layers - self.dense_layers

    @property
    def attention_width(self) -> int:
        """Query width of the attention core, heads x query/key head width (what the scores run over)."""
        if self.attention == "mla":
            return self.heads * (self.qk_nope_head_dim + self.qk_rope_head_dim)
        return self.heads * self.head_dim

    @property
    def value_width(self) -> int:
        """Value width of the attention core, heads x value head width."""
        return self.heads * (self.v_head_dim if self.attention == "mla" else self.head_dim)

    # --- parameters, tensor by tensor -----------------------------------------------------
    def attention_params_per_layer(self) -> int:
        """Attention weights of one block (GQA or MLA, with its norms inside attention).

        GQA: h*a*d (Q) + 2*h*kv*d (K, V) + a*d*h (O) [+ biases a*d + 2*kv*d + h] [+ a sinks]
        [+ 2d QK-norm weights]. MLA (DeepSeek-V2 Sec. 2.1): h*r_q + r_q + r_q*a*(d_nope+d_rope) (queries
        through the latent r_q and its norm), h*(r_kv + d_rope) + r_kv (the KV latent and the shared rotary
        key, and its norm), r_kv*a*(d_nope + d_v) (keys and values up), a*d_v*h (output).
        """
        h, a = self.hidden, self.heads
        if self.attention == "mla":
            qk = self.qk_nope_head_dim + self.qk_rope_head_dim
            if self.q_lora_rank:
                q = h * self.q_lora_rank + self.q_lora_rank + self.q_lora_rank * a * qk
            else:
                q = h * a * qk
            kv = (
                h * (self.kv_lora_rank + self.qk_rope_head_dim)
                + self.kv_lora_rank
                + self.kv_lora_rank * a * (self.qk_nope_head_dim + self.v_head_dim)
            )
            return q + kv + a * self.v_head_dim * h
        d, kv = self.head_dim, self.kv_heads
        weights = 2 * h * a * d + 2 * h * kv * d
        biases = (a * d + 2 * kv * d + h) if self.attention_biases else 0
        sinks = a if self.attention_sinks else 0
        norms = 2 * d if self.qk_norm else 0
        return weights + biases + sinks + norms

    def expert_params(self) -> int:
        """One expert (routed or shared): SwiGLU, 3 h f_e [+ biases 2 f_e + h]."""
        h, f = self.hidden, self.expert_ffn
        return 3 * h * f + ((2 * f + h) if self.expert_biases else 0)

    def router_params(self) -> int:
        """The router of one MoE layer: h x E [+ E biases]."""
        return self.hidden * self.experts + (self.experts if self.router_bias else 0)

    def dense_mlp_params(self) -> int:
        """The SwiGLU MLP of one dense layer: 3 h f_dense (0 when the model has no dense layers)."""
        return 3 * self.hidden * self.dense_ffn

    def norm_params_per_layer(self) -> int:
        """The two RMSNorms of one block: 2h."""
        return 2 * self.hidden

    def dense_layer_params(self) -> int:
        """One dense block: attention + dense MLP + norms."""
        return self.attention_params_per_layer() + self.dense_mlp_params() + self.norm_params_per_layer()

    def moe_layer_params(self) -> int:
        """One MoE block, all experts: attention + norms + router + (E + shared) experts."""
        return (
            self.attention_params_per_layer()
            + self.norm_params_per_layer()
            + self.router_params()
            + (self.experts + self.shared_experts) * self.expert_params()
        )

    def moe_layer_active_params(self) -> int:
        """What one token passes through in one MoE block: attention + norms + router + (k + shared) experts."""
        return (
            self.attention_params_per_layer()
            + self.norm_params_per_layer()
            + self.router_params()
            + (self.top_k + self.shared_experts) * self.expert_params()
        )

    def embedding_params(self) -> int:
        """Token embedding V x h."""
        return self.vocab * self.hidden

    def output_params(self) -> int:
        """Output layer V x h (0 when tied) plus the final RMSNorm h."""
        return (0 if self.tied_embeddings else self.vocab * self.hidden) + self.hidden

    def routed_expert_parameter_count(self) -> int:
        """All routed experts of all MoE layers: what expert parallelism shards."""
        return self.moe_layers * self.experts * self.expert_params()

    def parameter_count(self) -> int:
        """All parameters: dense blocks + MoE blocks + embedding + output layer and final norm."""
        return (
            self.dense_layers * self.dense_layer_params()
            + self.moe_layers * self.moe_layer_params()
            + self.embedding_params()
            + self.output_params()
        )

    def non_expert_parameter_count(self) -> int:
        """Everything but the routed experts (replicated over data parallelism like a dense model's weights)."""
        return self.parameter_count() - self.routed_expert_parameter_count()

    def active_parameter_count(self, embedding: bool = True) -> int:
        """Parameters one token uses: all but the routed experts, plus top_k routed experts per MoE layer.

        embedding=False leaves out the input embedding (a lookup, not a matmul), as OpenAI counts gpt-oss.
        """
        _flag(embedding, "embedding")
        total = (
            self.dense_layers * self.dense_layer_params()
            + self.moe_layers * self.moe_layer_active_params()
            + self.output_params()
        )
        return total + (self.embedding_params() if embedding else 0)

    def sparsity(self) -> float:
        """Active share of the parameters (with the embedding)."""
        return self.active_parameter_count() / self.parameter_count()


# --- catalog -----------------------------------------------------------------------------

_MIXTRAL = MoEModel(
    name="mixtral-8x7b",
    layers=32,
    hidden=4096,
    heads=32,
    kv_heads=8,
    vocab=32000,
    experts=8,
    expert_ffn=14336,
    top_k=2,
    seq_len=32768,
    published_params=46.7e9,
    published_active=12.9e9,
    published_active_embedding=True,
    source=(
        "Jiang et al. 2024, 'Mixtral of Experts' (arXiv:2401.04088), Table 1 (dim 4096, n_layers 32, head_dim 128, "
        "hidden_dim 14336, n_heads 32, n_kv_heads 8, context_len 32768, vocab_size 32000, num_experts 8, "
        "top_k_experts 2) and Sec. 2 ('47B parameters, but only uses 13B active parameters during inference'); "
        "Hugging Face mistralai/Mixtral-8x7B-v0.1 config.json (num_local_experts 8, num_experts_per_tok 2, "
        "intermediate_size 14336, tie_word_embeddings false; model page: 46.7B params); Mistral AI's "
        "announcement 'Mixtral of experts' (Dec 2023): 46.7B total, 12.9B per token."
    ),
)

_DEEPSEEK_V3 = MoEModel(
    name="deepseek-v3",
    layers=61,
    hidden=7168,
    heads=128,
    vocab=129280,
    attention="mla",
    q_lora_rank=1536,
    kv_lora_rank=512,
    qk_nope_head_dim=128,
    qk_rope_head_dim=64,
    v_head_dim=128,
    dense_layers=3,
    dense_ffn=18432,
    experts=256,
    expert_ffn=2048,
    shared_experts=1,
    top_k=8,
    router_bias=True,
    seq_len=4096,
    published_params=671e9,
    published_active=37e9,
    published_active_embedding=False,
    source=(
        "DeepSeek-AI 2024, 'DeepSeek-V3 Technical Report' (arXiv:2412.19437), Sec. 4.2 (61 layers, hidden 7168, "
        "128 heads, d_h 128, d_c 512, d'_c 1536, d_h^R 64; all FFNs but the first three are MoE, 1 shared and "
        "256 routed experts of intermediate size 2048, 8 activated, each token sent to at most 4 nodes; "
        "671B total, 37B activated per token; sequence length 4K) and Hugging Face deepseek-ai/DeepSeek-V3 "
        "config.json (vocab_size 129280, intermediate_size 18432, first_k_dense_replace 3, n_group 8, "
        "topk_group 4, e_score_correction_bias per expert). The multi-token-prediction module (14B of the "
        "685B checkpoint, report Sec. 2.2) is not counted, as the report's 671B does not."
    ),
)

_QWEN3 = MoEModel(
    name="qwen3-235b-a22b",
    layers=94,
    hidden=4096,
    heads=64,
    kv_heads=4,
    head_dim=128,
    vocab=151936,
    qk_norm=True,
    experts=128,
    expert_ffn=1536,
    top_k=8,
    seq_len=4096,
    published_params=235e9,
    published_active=22e9,
    published_active_embedding=True,
    source=(
        "Qwen Team 2025, 'Qwen3 Technical Report' (arXiv:2505.09388), Table 2 (94 layers, 64 query / 4 KV heads, "
        "128 experts, 8 activated, no shared experts, QK-Norm) and Sec. 3 (first pre-training stage at 4,096 "
        "tokens); Hugging Face Qwen/Qwen3-235B-A22B config.json (hidden_size 4096, head_dim 128, "
        "moe_intermediate_size 1536, vocab_size 151936, decoder_sparse_step 1, mlp_only_layers [], "
        "tie_word_embeddings false) and model card (235B total, 22B activated, 234B non-embedding)."
    ),
)

_GPT_OSS = MoEModel(
    name="gpt-oss-120b",
    layers=36,
    hidden=2880,
    heads=64,
    kv_heads=8,
    head_dim=64,
    vocab=201088,
    attention_biases=True,
    attention_sinks=True,
    sliding_window=128,
    window_layers=18,
    experts=128,
    expert_ffn=2880,
    top_k=4,
    expert_biases=True,
    router_bias=True,
    seq_len=4096,
    published_params=116.83e9,
    published_active=5.13e9,
    published_active_embedding=False,
    source=(
        "OpenAI 2025, 'gpt-oss-120b & gpt-oss-20b Model Card' (arXiv:2508.10925), Sec. 2 and Table 1 "
        "(36 layers, 128 experts, top-4, residual width 2880, 64 query heads of 64, 8 KV heads, attention "
        "sinks, alternating banded (128 tokens) and dense layers; 116.83B total, 5.13B active parameters, "
        "the active count excluding the embedding); Hugging Face openai/gpt-oss-120b config.json "
        "(intermediate_size 2880, vocab_size 201088, attention_bias true, tie_word_embeddings false). "
        "seq_len 4096 is the lessons' choice: the card gives no pre-training context."
    ),
)

#: The MoE catalog, by lowercase name.
MOE_MODELS: dict[str, MoEModel] = {m.name: m for m in (_MIXTRAL, _DEEPSEEK_V3, _QWEN3, _GPT_OSS)}


def model(name) -> MoEModel:
    """The catalog MoE model called `name` (case and spaces ignored); an MoEModel passes through.

    Lesson 10 §1.

    >>> model("DeepSeek-V3").top_k
    8
    """
    if isinstance(name, MoEModel):
        return name
    return lookup(MOE_MODELS, name, "MoE model")
