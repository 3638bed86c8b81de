"""FP8: which bytes halve and which do not (Micikevicius et al. 2022; Transformer Engine). Lesson 8 §3."""

from __future__ import annotations

from dataclasses import dataclass

from .. import dataparallel, memory, tensor, training
from .._arguments import estimate_config
from ..units import (
    FLOP_PER_SECOND,
    format_bytes,
    format_rate,
    format_seconds,
)

__all__ = ["FP8Comparison", "fp8_comparison"]

# ----------------------------------------------------------------------------------------
# 3. FP8: which bytes halve


@dataclass(frozen=True)
class FP8Comparison:
    """The same configuration in bf16 mixed precision and in the fp8 recipe (distlab.memory.PRECISION_RECIPES['fp8']).

    rows: (quantity, bf16 value, fp8 value, unit) with values in bytes, seconds or FLOP/s;
    bf16 and fp8: the two StepEstimates.
    """

    bf16: training.StepEstimate
    fp8: training.StepEstimate
    rows: tuple

    def ratios(self) -> dict:
        """{quantity: fp8 / bf16}."""
        return {name: (b8 / b16 if b16 else 1.0) for name, b16, b8, _ in self.rows}

    def table(self) -> str:
        out = [f"{'':<47}{'bf16':>14}{'fp8':>14}{'fp8/bf16':>10}"]
        for name, b16, b8, unit in self.rows:
            fmt = {
                "B": format_bytes,
                "s": format_seconds,
                "FLOP/s": lambda v: format_rate(v, FLOP_PER_SECOND),
                "B/param": lambda v: f"{v:g} B",
            }[unit]
            out.append(f"{name:<47}{fmt(b16):>14}{fmt(b8):>14}{(b8 / b16 if b16 else 1.0):>10.3f}")
        return "\n".join(out)


def fp8_comparison(model, cluster, **config) -> FP8Comparison:
    """Run estimate() in 'mixed' (bf16) and 'fp8' precision and list what changes, by how much.

    Halves: weight bytes (2 -> 1 B/param) and, in distlab's simplified recipe, every stored
    2-byte activation (dropout masks stay 1 byte, so exactly half only for models without
    dropout). That is an upper bound on the saving: Transformer Engine keeps FP8 copies only of
    GEMM inputs; LayerNorm inputs, the softmax output and other saved tensors stay bf16. Compute
    time does not halve although the fp8 dense peak is twice bf16's on H100: only the layers' weight GEMMs run in FP8
    (the output layer stays 16-bit), and at 70.9% of the FP8 peak against bf16's 80.3% (efficiency.BEST_FP8_GEMM_EFFICIENCY, Bekman's MAMF); the attention
    core, the element-wise work (2-byte) and the casts to FP8 stay 16-bit (distlab.step.compute). Does not halve: TP all-reduce and pipeline messages (FP8 is the GEMMs'
    input format; their outputs and the gradients are bf16: PrecisionRecipe.message_bytes = 2),
    gradients (bf16, so the DP all-reduce moves the same bytes), fp32 master weights and Adam
    moments (12 B/param): model states go from 16 to 15 B/param, not 8. The 1-byte weights assume
    FP8 primary weights (Transformer Engine's fp8_model_init, Megatron-LM's --fp8-param-gather);
    with them a ZeRO-1 parameter all-gather would move 1-byte weights, so pricing the DP traffic
    as a bf16 all-reduce of the gradients (distlab's) is an upper bound there.
    Micikevicius et al. 2022, "FP8 Formats for Deep Learning"; NVIDIA Transformer Engine. Lesson 8 §3.

    >>> r = fp8_comparison('llama2-7b', 'dgx-h100', nodes=1, fabric='ib-ndr', global_batch=8, seq_len=4096, zero=3)
    >>> r.ratios()['model-state bytes per parameter'], r.ratios()['weights per GPU']  # 15 / 16 and 1 / 2
    (0.9375, 0.5)
    """
    estimate_config(config)
    config = {k: v for k, v in config.items() if k != "precision"}
    m = training.estimate(model, cluster, precision="mixed", **config)
    f = training.estimate(model, cluster, precision="fp8", **config)
    from .. import models

    mdl = models.model(model)
    c = m.config
    b, s, t, p = c["micro_batch_size"], c["seq_len"], c["tp"], c["pp"]
    r16, r8 = memory.precision_recipe("mixed"), memory.precision_recipe("fp8")
    peak16, peak8 = m.peak_flops, f.peak_flops
    rows = (
        ("model-state bytes per parameter", r16.bytes_per_param, r8.bytes_per_param, "B/param"),
        ("weights per GPU", m.memory.weights_bytes, f.memory.weights_bytes, "B"),
        ("gradients per GPU", m.memory.gradients_bytes, f.memory.gradients_bytes, "B"),
        ("optimizer state per GPU", m.memory.optimizer_bytes, f.memory.optimizer_bytes, "B"),
        ("activations per GPU (fp8 saving: upper bound)", m.memory.activations_bytes, f.memory.activations_bytes, "B"),
        ("memory per GPU", m.memory.total_bytes, f.memory.total_bytes, "B"),
        (
            "TP all-reduce message (b s h e_msg)",
            tensor.tp_message_bytes(b, s, mdl.hidden, r16.message_bytes),
            tensor.tp_message_bytes(b, s, mdl.hidden, r8.message_bytes),
            "B",
        ),
        (
            "pipeline send (b s h e_msg / tp)",
            training.p2p_message_bytes(b, s, mdl.hidden, t, r16.message_bytes),
            training.p2p_message_bytes(b, s, mdl.hidden, t, r8.message_bytes),
            "B",
        ),
        (
            "DP gradient all-reduce (M per GPU)",
            dataparallel.gradient_bytes(mdl, "mixed", t, p),
            dataparallel.gradient_bytes(mdl, "fp8", t, p),
            "B",
        ),
        ("dense peak per GPU", peak16, peak8, "FLOP/s"),
        ("compute time per step", m.compute_s, f.compute_s, "s"),
        ("step time", m.step_time_s, f.step_time_s, "s"),
    )
    return FP8Comparison(m, f, rows)
