"""Training FLOPs of a decoder-only transformer: the one counter behind step time, MFU and HFU.

A multiply-add is 2 FLOPs. Per token, in the forward pass:

    each layer:  2 x params_per_layer      every weight once (QKV, output projection, MLP; norms and biases
                                           are counted as weights, as the 6PT rule does: under 0.1 %)
               + 4 x s x a x d_head        attention scores Q K^T and the weighted sum A V, over all s keys
                                           (full, not causal-halved: as Narayanan et al. 2021 Eq. 3 and
                                           Chowdhery et al. 2022 (PaLM) App. B count it)
    once:        2 x h x V                 the logits

Training runs the forward once and the backward at twice its cost: 3 x forward. Recomputation makes the GPUs
execute more forward work than the model needs (Korthikanti et al. 2022, Sec. 5):

    full:       each layer's forward again (the logits are not recomputed)
    selective:  the attention core again (4 x s x a x d_head per token and layer)

Model FLOPs count no recomputation, hardware FLOPs count it: MFU = model FLOPs / (time x GPUs x peak) is
PaLM's definition (App. B: 6N + 12 L H Q T per token, N without the input embedding), HFU uses hardware FLOPs.
With full recomputation and the GPT shape (f = 4h, no GQA) the hardware count is Narayanan et al. 2021, Eq. 3:
96 B s l h^2 (1 + s / (6h) + V / (16 l h)).

Taught in Lesson 7 §1 (step time, MFU and HFU) and Lesson 5 §4 (one layer's compute next to its traffic).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._arguments import (
    RECOMPUTE_MODES,
    broadcasting,
    code_array,
    finite_result,
    number_array,
    recompute_mode,
    renamed_keyword,
    whole_number,
)
from .errors import ConfigurationError
from .units import FLOP_PER_SECOND, SECONDS, positive, positive_int

__all__ = [
    "TRAINING_PASSES",
    "StepFlops",
    "layer_forward_flops_array",
    "recomputed_forward_flops_array",
    "logit_forward_flops_array",
    "step_flops",
    "model_flops_per_token",
    "FLOPS_PER_PARAM_TOKEN",
    "FLOPS_PER_PARAM_TOKEN_FULL_RECOMPUTE",
    "model_flops",
    "forward_time",
    "hardware_flops",
    "megatron_flops_per_iteration",
    "training_days",
    "mfu",
]

#: Forward + backward, in forward passes: the backward computes gradients of inputs and of weights, 2 x forward.
TRAINING_PASSES = 3.0


def _model(model):
    from . import models

    return models.model(model)


def _attention_width(model) -> int:
    """a x d_head: the width of Q (and of the attention output) that the scores are computed over."""
    return model.heads * model.head_dim


@broadcasting
def layer_forward_flops_array(params_per_layer, attention_width, tokens, seq_len):
    """Forward FLOPs of one layer for `tokens` tokens of sequences of length seq_len (NumPy broadcast).

    tokens x (2 x params_per_layer + 4 x seq_len x attention_width). Lesson 7 §1.

    >>> float(layer_forward_flops_array(12 * 4096**2, 4096, tokens=2048, seq_len=2048))  # GPT layer, h = 4096
    893353197568.0
    """
    return finite_result(
        "layer forward FLOPs",
        number_array(tokens, "tokens")
        * (
            2.0 * number_array(params_per_layer, "params_per_layer")
            + 4.0 * number_array(seq_len, "seq_len") * number_array(attention_width, "attention_width")
        ),
    )


@broadcasting
def recomputed_forward_flops_array(params_per_layer, attention_width, tokens, seq_len, recompute_code, full_share=1.0):
    """Forward FLOPs of one layer that recomputation executes again in the backward (NumPy broadcast), on average
    over the layers counted.

    recompute_code indexes RECOMPUTE_MODES: 0 none (0), 1 selective (the attention core:
    tokens x 4 x s x a d_head), 2 full (the whole layer forward x full_share: the share of the layers fully
    recomputed, 1 for every layer; with partial-layer recomputation, distlab.partial_recompute, recomputed / layers:
    only those layers pay the extra forward). Lesson 7 §1.

    >>> float(recomputed_forward_flops_array(12 * 4096**2, 4096, 2048, 2048, 1))  # selective
    68719476736.0
    >>> float(recomputed_forward_flops_array(12 * 4096**2, 4096, 1, 2048, 2, 0.5))  # half of (24 h^2 + 4 s h)
    218103808.0
    """
    code = code_array(recompute_code, "recompute_code", RECOMPUTE_MODES)
    share = number_array(full_share, "full_share")
    if np.any(share > 1.0):
        raise ConfigurationError(f"full_share={full_share!r}; valid: 0 to 1 (the share of layers fully recomputed)")
    tokens = number_array(tokens, "tokens")
    core = finite_result(
        "attention FLOPs",
        tokens * 4.0 * number_array(seq_len, "seq_len") * number_array(attention_width, "attention_width"),
    )
    whole = layer_forward_flops_array(params_per_layer, attention_width, tokens, seq_len)
    return np.where(code == 2, whole * share, np.where(code == 1, core, 0.0))


@broadcasting
def op_sac_recomputed_forward_flops_array(hidden, kv_width, ffn, tokens):
    """Forward FLOPs of one layer that torchtitan's selective op checkpointing executes again in the backward
    (NumPy broadcast): the matmuls its policy does not save, every second one of a Llama block (wk, wo and w3:
    tokens x 2 x (h kv + h h + h f)); the attention core is not recomputed (SDPA's output is saved).
    Source: pytorch/torchtitan@3faaa1a0d parallelize_llama.py _custom_policy; memory.
    op_sac_activation_bytes_per_layer_array counts what it keeps. Lesson 7 §1.

    >>> float(op_sac_recomputed_forward_flops_array(8192, 1024, 28672, 1))  # Llama 2 70B, per token
    620756992.0
    """
    h = number_array(hidden, "hidden")
    work = h * (number_array(kv_width, "kv_width") + h + number_array(ffn, "ffn"))
    return finite_result("recomputed FLOPs", number_array(tokens, "tokens") * 2.0 * work)


@broadcasting
def logit_forward_flops_array(hidden, vocab, tokens):
    """Forward FLOPs of the output layer: tokens x 2 x h x V (NumPy broadcast). Lesson 7 §1.

    >>> float(logit_forward_flops_array(4096, 32000, 1))
    262144000.0
    """
    return finite_result(
        "logit FLOPs",
        number_array(tokens, "tokens") * 2.0 * number_array(hidden, "hidden") * number_array(vocab, "vocab"),
    )


@dataclass(frozen=True)
class StepFlops:
    """FLOPs of one training step (all GPUs together), by part. Plain floats.

    model_flops counts what the model needs (MFU); hardware_flops adds recomputation (HFU).
    """

    weights: float  # 3 x 2 x params_per_layer x tokens x layers
    attention: float  # 3 x 4 x s x a d_head x tokens x layers
    logits: float  # 3 x 2 x h x V x tokens
    recomputation: float  # the forward work recomputation repeats
    tokens: float
    recompute: str

    @property
    def model_flops(self) -> float:
        return self.weights + self.attention + self.logits

    @property
    def hardware_flops(self) -> float:
        return self.model_flops + self.recomputation

    @property
    def attention_share(self) -> float:
        """Share of the model FLOPs spent in attention scores and sums (what 6PT leaves out)."""
        return self.attention / self.model_flops

    def to_dict(self) -> dict:
        return dict(
            weights=self.weights,
            attention=self.attention,
            logits=self.logits,
            recomputation=self.recomputation,
            tokens=self.tokens,
            recompute=self.recompute,
            model_flops=self.model_flops,
            hardware_flops=self.hardware_flops,
        )

    def summary(self) -> str:
        return (
            f"model FLOPs {self.model_flops:.4g} (weights {self.weights:.3g}, attention {self.attention:.3g}, "
            f"logits {self.logits:.3g}); hardware FLOPs {self.hardware_flops:.4g} with {self.recompute} "
            f"recomputation"
        )


def step_flops(model, global_batch, seq_len=None, recompute="none", recomputed_layers=None) -> StepFlops:
    """FLOPs of one training step of `global_batch` sequences, by part, with and without recomputation.
    recomputed_layers (recompute='full' only): how many of the model's layers are fully recomputed (None: all;
    estimate(recompute_layers=N) passes partial_recompute.model_recomputed_layers); the others pay no extra forward.

    Lesson 7 §1. With full recomputation and the GPT shape the hardware FLOPs equal Narayanan et al. 2021,
    Eq. 3 (up to the norm and bias weights, which Eq. 3 leaves out).

    >>> f = step_flops('llama2-7b', global_batch=1024, seq_len=4096)
    >>> round(f.attention_share, 3)  # what 6PT leaves out at 4K context
    0.14
    >>> round(step_flops('llama2-7b', 1024, 4096, recompute='full').hardware_flops / f.model_flops, 3)
    1.328
    """
    m = _model(model)
    batch = positive_int(global_batch, "global_batch")
    s = positive_int(seq_len if seq_len is not None else m.seq_len, "seq_len")
    code = RECOMPUTE_MODES.index(recompute_mode(recompute))
    tokens = float(batch) * s
    width = _attention_width(m)
    weights = TRAINING_PASSES * 2.0 * m.params_per_layer() * tokens * m.layers
    attention = TRAINING_PASSES * 4.0 * s * width * tokens * m.layers
    logits = TRAINING_PASSES * float(logit_forward_flops_array(m.hidden, m.vocab, tokens))
    share = 1.0
    if recomputed_layers is not None:
        share = whole_number(recomputed_layers, "recomputed_layers", 0, m.layers) / m.layers
        if code != 2:
            raise ConfigurationError(
                f"recomputed_layers={recomputed_layers!r} applies to recompute='full'; valid: None otherwise"
            )
    again = float(recomputed_forward_flops_array(m.params_per_layer(), width, tokens, s, code, share)) * m.layers
    return StepFlops(weights, attention, logits, again, tokens, RECOMPUTE_MODES[code])


def model_flops_per_token(model, seq_len=None) -> float:
    """Model FLOPs per trained token: 6 x (layer and output weights) + 12 x L x s x a d_head (PaLM App. B).

    Lesson 7 §1.

    >>> round(model_flops_per_token('llama2-7b', 4096) / 6.738e9, 2)  # 6.84, not 6: attention at 4K context
    6.84
    """
    m = _model(model)
    s = positive_int(seq_len if seq_len is not None else m.seq_len, "seq_len")
    return step_flops(m, 1, s).model_flops / s


#: Training FLOPs per parameter per token: forward 2, backward 4 (weight and input gradients).
FLOPS_PER_PARAM_TOKEN = 6.0
#: With full recomputation the forward runs again during backward: 2 + 2 + 4.
FLOPS_PER_PARAM_TOKEN_FULL_RECOMPUTE = 8.0


def model_flops(params, tokens) -> float:
    """Model FLOPs of one training step: 6 x params x tokens (tokens = global batch x sequence length).

    The 6PT rule of thumb (Kaplan et al. 2020, Sec. 2.1): it leaves attention out. estimate() and
    MFU count with distlab.flops.step_flops. Lesson 7 §1 (and Lesson 4 §4).

    >>> model_flops(1e9, 1000)  # 6 x 1e9 x 1e3
    6000000000000.0
    """
    return finite_result(
        "model FLOPs", FLOPS_PER_PARAM_TOKEN * positive(params, "", "params") * positive(tokens, "", "tokens")
    )


def forward_time(params, tokens, peak_flops) -> float:
    """Seconds of one forward pass at peak: 2 x params x tokens / peak FLOP/s, the forward third of
    6PT (Kaplan et al. 2020). With one layer's parameters and one microbatch's tokens it is the
    layer_time of pipeline.analyze_stages. Lesson 4 §7.

    >>> forward_time(1e9, 1000, 1e15)  # 2e12 FLOPs at 1 PFLOP/s
    0.002
    """
    return finite_result(
        "forward time", model_flops(params, tokens) / 3 / positive(peak_flops, FLOP_PER_SECOND, "peak_flops")
    )


def hardware_flops(params, tokens, recompute="none") -> float:
    """FLOPs the GPUs execute: 6PT, or 8PT with full recomputation (selective recomputation of
    attention scores adds no parameter FLOPs in this model). Narayanan et al. 2021, Sec. 5.1. The rule
    of thumb; estimate() and HFU count with distlab.flops.step_flops (attention, logits, recompute by mode).
    Lesson 7 §1.

    >>> hardware_flops(1e9, 1000, recompute='full')  # 8 x 1e9 x 1e3
    8000000000000.0
    """
    factor = FLOPS_PER_PARAM_TOKEN_FULL_RECOMPUTE if recompute_mode(recompute) == "full" else FLOPS_PER_PARAM_TOKEN
    return finite_result("hardware FLOPs", factor * positive(params, "", "params") * positive(tokens, "", "tokens"))


@renamed_keyword(batch="global_batch")
def megatron_flops_per_iteration(global_batch, seq_len, layers, hidden, vocab) -> float:
    """Narayanan et al. 2021, Eq. 3 (full recomputation, attention and logits included):
    F = 96 B s l h^2 (1 + s / (6 h) + V / (16 l h)), B the global batch. Lesson 7 §1.

    >>> round(megatron_flops_per_iteration(1536, 2048, 96, 12288, 51200) / 1e18, 2)  # GPT-3 175B, batch 1536
    4.51
    """
    b = positive_int(global_batch, "global_batch")
    s = positive_int(seq_len, "seq_len")
    l = positive_int(layers, "layers")
    h = positive_int(hidden, "hidden")
    v = positive_int(vocab, "vocab")
    return finite_result("FLOPs per iteration", 96.0 * b * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h)))


def training_days(params, tokens, gpus, flops_per_gpu, recompute="full") -> float:
    """End-to-end training time in days: factor x T x P / (n X), factor 8 with full
    recomputation (Narayanan et al. 2021, Eq. 4), 6 without. Lesson 7 §1.

    >>> round(training_days(175e9, 300e9, 1024, 140e12))  # GPT-3 on 1,024 A100s at 140 TFLOP/s: Sec. 5.1's 34 days
    34
    """
    seconds = hardware_flops(params, tokens, recompute) / (
        positive_int(gpus, "gpus") * positive(flops_per_gpu, FLOP_PER_SECOND, "flops_per_gpu")
    )
    return finite_result("training days", seconds / 86400.0)


def mfu(model_flops_per_step, step_time, gpus, peak_flops) -> float:
    """Model FLOPs utilisation = model FLOPs / (step time x GPUs x peak FLOP/s per GPU).

    Chowdhery et al. 2022 (PaLM), App. B. Lesson 7 §1.

    >>> mfu(6e12, 2.0, 4, 1e12)  # 6e12 / (2 s x 4 GPUs x 1e12 FLOP/s)
    0.75
    """
    value = positive(model_flops_per_step, "FLOP", "model_flops") / (
        positive(step_time, SECONDS, "step_time")
        * positive_int(gpus, "gpus")
        * positive(peak_flops, FLOP_PER_SECOND, "peak_flops")
    )
    return finite_result("MFU", value)
