"""The checks of one configuration that training.estimate prices: the parallel layout on the cluster, the batch,
the sequence and the pipeline schedule, each refused with our error naming the valid values. Lesson 7 §1-§6.
"""

from __future__ import annotations

from .._arguments import zero_stage
from ..errors import ConfigurationError
from ..units import positive_int
from .config import SCHEDULES, batch_and_sequence

__all__ = ["check_layout", "check_batch", "check_memory_recipe", "check_fp8_attention"]


def check_layout(model, cl, dp, tp, pp, cp) -> tuple[int, int, int, int]:
    """(dp, tp, pp, cp) of a model on a hardware.Cluster: tp x cp x pp divides the GPUs, dp (default GPUs / (tp x cp
    x pp)) fills them, tp divides the GPUs of an NVLink domain (hardware.Cluster.nvlink_domain: a node, or a share of
    an NVL72 rack) and the heads, pp at most the layers. Lesson 7 §1, §6."""
    from .. import memory

    g = cl.nvlink_domain  # the GPUs the intra link joins: a node, or a share of an NVL72 rack
    tp, pp, cp = positive_int(tp, "tp"), positive_int(pp, "pp"), positive_int(cp, "cp")
    names, sizes = ("tp x pp", f"{tp} x {pp}") if cp == 1 else ("tp x cp x pp", f"{tp} x {cp} x {pp}")
    mp = tp * cp * pp
    if mp > cl.gpus or cl.gpus % mp:
        valid = ", ".join(str(d) for d in range(1, cl.gpus + 1) if cl.gpus % d == 0)
        what = "is more than" if mp > cl.gpus else "does not divide"
        raise ConfigurationError(
            f"{names} = {sizes} = {mp} {what} the cluster's {cl.gpus} GPUs; {names} must divide them (valid: {valid})"
        )
    dp = cl.gpus // mp if dp is None else positive_int(dp, "dp")
    if dp * mp != cl.gpus:
        raise ConfigurationError(f"dp x {names} = {dp} x {sizes} = {dp * mp} must equal the cluster's {cl.gpus} GPUs")
    if tp > g or g % tp:
        valid = ", ".join(str(d) for d in range(1, g + 1) if g % d == 0)
        where = "a node" if g == cl.gpus_per_node else "an NVLink domain"
        raise ConfigurationError(
            f"tp={tp} must divide the {g} GPUs of {where} (tensor parallelism stays inside {where}); valid: {valid}"
        )
    memory.check_tp_divides_heads(model, tp)
    return dp, tp, pp, cp


def check_batch(model, global_batch, seq_len, micro_batch_size, chunks, schedule, dp, pp, cp, balance_stages) -> dict:
    """The batch, sequence and schedule of a layout: global_batch, seq_len (default the model's), micro_batch_size and
    chunks whole numbers in range, the sequence split into 2 cp chunks, whole microbatches per replica (m), schedule
    one of SCHEDULES (chunks > 1 only interleaved, which needs pp x chunks layers and m a multiple of pp). Returns
    batch, s, b, v, m, schedule. Lesson 7 §4-§5."""
    batch, s, b = batch_and_sequence(global_batch, seq_len if seq_len is not None else model.seq_len, micro_batch_size)
    v = positive_int(chunks, "chunks")
    if cp > 1 and s % (2 * cp):
        raise ConfigurationError(
            f"cp={cp}: the sequence of {s} tokens must split into 2 x cp = {2 * cp} equal chunks "
            f"(load-balanced causal ring attention); valid cp: "
            f"{', '.join(str(c) for c in range(1, 65) if s % (2 * c) == 0)}"
        )
    if batch % (dp * b):
        raise ConfigurationError(
            f"global_batch={batch} is not a multiple of dp x micro_batch_size = {dp} x {b}; "
            f"each replica must get whole microbatches"
        )
    m = batch // (dp * b)
    sched = str(schedule).strip().lower()
    if not isinstance(sched, str) or sched not in SCHEDULES:
        raise ConfigurationError(f"schedule={schedule!r}; valid: {', '.join(SCHEDULES)}")
    if v > 1 and sched != "interleaved":
        raise ConfigurationError(f"chunks={v} needs schedule='interleaved'")
    if sched == "interleaved":
        # balanced stages (Llama 3): the first chunk may hold only the embedding, the last only the logits and loss
        ends = 2 if balance_stages and pp > 2 else 0
        if model.layers + ends < pp * v:
            raise ConfigurationError(
                f"interleaved: {model.layers} layers"
                + (" plus the embedding and the logits" if ends else "")
                + f" cannot fill pp x chunks = {pp * v} chunks (at least one layer each)"
            )
        if m % pp:
            raise ConfigurationError(f"interleaved: microbatches per pipeline m={m} must be a multiple of pp={pp}")
    return dict(batch=batch, s=s, b=b, v=v, m=m, schedule=sched)


def check_memory_recipe(memory_recipe, zero):
    """(the memory_recipes.MemoryRecipe, the ZeRO stage), the stage one that recipe's engine runs. Lesson 7 §2."""
    from ..memory_recipes import memory_recipe as catalog_recipe

    zero = zero_stage(zero)
    recipe = catalog_recipe(memory_recipe)
    if zero not in recipe.zero_stages:
        raise ConfigurationError(
            f"zero={zero} is not a ZeRO stage of memory_recipe={recipe.name!r}; valid: "
            f"{', '.join(str(z) for z in recipe.zero_stages)}"
        )
    return recipe, zero


def check_fp8_attention(fp8_attention, recipe):
    """The precision recipe, with fp8_attention checked against it: FP8 attention runs only inside an FP8 recipe
    (Megatron's --fp8-dot-product-attention needs --fp8-format; distlab.attention_variants). Lesson 7 §8."""
    from .._arguments import flag

    if flag(fp8_attention, "fp8_attention") and getattr(recipe, "compute_precision", None) != "fp8":
        raise ConfigurationError(
            f"fp8_attention=True needs precision='fp8' (the attention core runs in FP8 only inside an FP8 recipe); "
            f"precision={recipe.name!r} (valid: precision='fp8', or fp8_attention=False)"
        )
    return recipe
