"""A configuration as a torchtitan JobConfig TOML (distlab.export).

torchtitan (pytorch/torchtitan@e347b1e, 2026-02-15: the last version configured by TOML files
read into torchtitan/config/job_config.py's JobConfig; from 9810191 on, 2026-02-23, runs are
Python Trainer.Config functions and the batch fields are renamed, so this TOML is for the older
releases). Keys, all in job_config.py:
  [model] name, flavor (Model): "llama3" flavors "8B", "70B", "405B" are the catalog's Llama 3.1
  shapes (torchtitan/models/llama3/__init__.py llama3_args; vocab_size 128256 and the SwiGLU width
  from ffn_dim_multiplier and multiple_of, torchtitan/models/llama3/model/model.py FeedForward);
  other catalog models have no flavor and the TOML says so in a comment. RoPE comes with the flavor, not
  the TOML: every llama3 flavor sets rope_theta=500000 and model/model.py precompute_freqs_cis always
  applies RoPEScalingArgs' "llama3" scaling (scaling_factor 8.0, low_freq_factor 1.0, high_freq_factor
  4.0, original_max_position_embeddings 8192; model/args.py): Llama 3.1's config.json values, which
  the export checks against the catalog's rope_theta and rope_scaling.
  [parallelism] data_parallel_replicate_degree (DDP; torchtitan's llama3 parallelize refuses DDP
  with TP or PP: "DDP has not supported > 1D parallelism", models/llama3/infra/parallelize.py),
  data_parallel_shard_degree (FSDP2), fsdp_reshard_after_forward: "always" = ZeRO-3 (parameters
  re-gathered for backward), "never" = ZeRO-2-like (gathered once in forward and kept unsharded
  until backward ends: ZeRO-2's peak memory and 2 x parameters of traffic; "default" means never
  under PP, apply_fsdp), so ZeRO-1 alone is not expressible; tensor_parallel_degree (always with
  sequence parallelism; seq_len must divide by 2 tp, parallel_dims.seq_len_divisor),
  pipeline_parallel_degree, pipeline_parallel_schedule ("GPipe", "1F1B", "Interleaved1F1B"),
  pipeline_parallel_microbatch_size, pipeline_parallel_layers_per_stage with
  pipeline_parallel_first_stage_less_layers = pipeline_parallel_last_stage_less_layers = 0
  (equal stages, as planned; the default 1 makes the first and last stage lighter, and
  distributed/pipeline_parallel.py then counts ceil((layers + 2) / layers_per_stage) stages).
  [training] local_batch_size ("Local batch size (i.e., per-device batch size)": one forward;
  train.py accumulates global_batch_size / (local_batch_size x dp) of them) and global_batch_size:
  with pp = 1 local = the micro-batch and torchtitan accumulates m microbatches; with pp > 1 the
  pipeline splits local_batch_size into local / pipeline_parallel_microbatch_size microbatches
  (pipeline_parallel.py), so local = m x micro-batch and there is one accumulation step;
  seq_len; mixed_precision_param "bfloat16" | "float32" (no fp16); fp8 is the model converter
  "quantize.linear.float8" (components/quantization/float8.py).
  [activation_checkpoint] mode "none" | "selective" | "full". torchtitan's "selective" is op- or
  layer-level SAC (selective_ac_option "op": keep SDPA outputs and every other matmul output,
  recompute the rest; a number n: checkpoint every n-th layer whole), not Megatron's recompute of
  the attention core: distlab plans "selective" with torchtitan's recipe ('fsdp2') by that policy (memory.
  op_sac_activation_bytes_per_layer_array, flops.op_sac_recomputed_forward_flops_array). estimate's
  recompute='full' with recompute_layers N exports as the number k whose every-k-th blocks are the rank's
  recomputed count (distlab.partial_recompute: floor(L_rank / k) blocks), where one exists.
The TOML is written by hand (no dependency); tests read it back with tomllib.
"""

from __future__ import annotations

import json

from ..errors import ConfigurationError
from ..units import wrap_text
from ..partial_recompute import torchtitan_ac_frequency
from .engines import config_of, even_chunks, refuse_activation_offload

__all__ = ["TORCHTITAN_SCHEDULES", "TORCHTITAN_FLAVORS", "TORCHTITAN_ROPE", "torchtitan"]

TORCHTITAN_SCHEDULES = {"gpipe": "GPipe", "1f1b": "1F1B", "interleaved": "Interleaved1F1B"}
#: catalog model -> torchtitan (model.name, model.flavor) of the same shape (torchtitan/models/llama3/__init__.py).
TORCHTITAN_FLAVORS = {
    "llama3.1-8b": ("llama3", "8B"),
    "llama3.1-70b": ("llama3", "70B"),
    "llama3.1-405b": ("llama3", "405B"),
}
#: torchtitan model name -> (rope_theta, rope_scaling) every flavor of it builds (see the module docstring).
TORCHTITAN_ROPE = {"llama3": (500000.0, "llama3", 8.0, 1.0, 4.0, 8192)}


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return json.dumps(str(value))  # a TOML basic string: same escapes as JSON for these names


def _torchtitan_checks(c: dict) -> None:
    """ConfigurationError for what torchtitan cannot run, naming the engines that can."""
    refuse_activation_offload(c, "torchtitan")
    if c["zero"] == 1:
        raise ConfigurationError(
            "zero=1: torchtitan shards with FSDP2, which shards gradients with the optimizer state "
            "(ZeRO-2-like with fsdp_reshard_after_forward='never', ZeRO-3 with 'always'); "
            "use zero=0, 2 or 3, or export to megatron (--use-distributed-optimizer) or deepspeed"
        )
    if c["zero"] == 0 and c["dp"] > 1 and (c["tp"] > 1 or c["pp"] > 1):
        raise ConfigurationError(
            f"zero=0 with dp={c['dp']}, tp={c['tp']}, pp={c['pp']}: torchtitan's DDP "
            f'(data_parallel_replicate_degree) runs alone ("DDP has not supported > 1D '
            f'parallelism"); use zero=2 or 3 (FSDP), or export to megatron or deepspeed'
        )
    if c["schedule"] == "interleaved" and c["pp"] > 1 and c["chunks"] < 2:
        raise ConfigurationError(
            "schedule='interleaved' with chunks=1: torchtitan's Interleaved1F1B needs at least "
            "2 stages per rank; use chunks >= 2 or schedule='1f1b', or export to megatron"
        )
    if c["seq_len"] % (2 * c["tp"]):
        raise ConfigurationError(
            f"seq_len={c['seq_len']}: torchtitan needs seq_len divisible by 2 x tp = "
            f"{2 * c['tp']} (parallel_dims.seq_len_divisor); export to megatron or deepspeed"
        )
    if c["precision"] == "fp16":
        raise ConfigurationError(
            "precision='fp16': torchtitan's mixed precision is bfloat16 or float32; use "
            "precision='bf16', or export to megatron or deepspeed"
        )
    if c.get("tp_overlap_method") == "userbuffers":
        raise ConfigurationError(
            "tp_overlap='userbuffers': Transformer Engine's userbuffers overlap is Megatron-LM's --tp-comm-overlap; "
            "torchtitan overlaps TP with async TP (tp_overlap='async-tp'), or export to megatron"
        )
    if c.get("tp_overlap_method") == "megatron-async-backward":
        raise ConfigurationError(
            "tp_overlap='megatron-async-backward' is Megatron-LM's own backward (the column-parallel all-reduces "
            "beside the weight-gradient GEMMs; what Megatron's memory recipes run by default): estimate with "
            "memory_recipe='fsdp2' (torchtitan's), tp_overlap=False or 'async-tp', or export to megatron"
        )


def _rope(model) -> tuple:
    """(rope_theta, kind, factor, low_freq_factor, high_freq_factor, original context) of a model; None where absent."""
    r = model.rope_scaling
    scaling = (
        (None,) * 5
        if r is None
        else (r.kind, r.factor, r.low_freq_factor, r.high_freq_factor, r.original_max_position_embeddings)
    )
    return (model.rope_theta, *scaling)


def _rope_text(rope: tuple) -> str:
    theta, kind, factor, low, high, original = rope
    text = f"rope_theta {'not recorded' if theta is None else f'{theta:g}'}"
    if kind is None:
        return text + ", no RoPE scaling"
    return (
        text + f", {kind} RoPE scaling (factor {factor:g}, low_freq_factor {low:g}, high_freq_factor {high:g}, "
        f"original context {original})"
    )


def _parallelism(c: dict, model) -> dict:
    """The [parallelism] keys: DDP or FSDP2 (resharding after forward at ZeRO-3), TP, CP, the pipeline."""
    dp, pp = c["dp"], c["pp"]
    sharded = c["zero"] >= 2 and dp > 1
    parallelism = {
        "data_parallel_replicate_degree": 1 if sharded else dp,
        "data_parallel_shard_degree": dp if sharded else 1,
    }
    if sharded:
        parallelism["fsdp_reshard_after_forward"] = "always" if c["zero"] == 3 else "never"
    parallelism["tensor_parallel_degree"] = c["tp"]
    if c.get("tp_overlap_method") == "async-tp":  # "currently only effective when compile is enabled": [compile]
        parallelism["enable_async_tensor_parallel"] = True
    parallelism["pipeline_parallel_degree"] = pp
    if c.get("cp", 1) > 1:
        parallelism["context_parallel_degree"] = c["cp"]
    if pp > 1:
        parallelism |= {
            "pipeline_parallel_schedule": TORCHTITAN_SCHEDULES[c["schedule"]],
            "pipeline_parallel_microbatch_size": c["micro_batch_size"],
            "pipeline_parallel_layers_per_stage": model.layers // (pp * c["chunks"]),
            "pipeline_parallel_first_stage_less_layers": 0,
            "pipeline_parallel_last_stage_less_layers": 0,
        }
    return parallelism


def _model_lines(c: dict, model) -> list:
    """The [model] section: torchtitan's flavor of the catalog model (its RoPE checked), else a comment."""
    flavor = TORCHTITAN_FLAVORS.get(c["model"])
    lines = ["[model]"]
    if flavor:
        rope = TORCHTITAN_ROPE[flavor[0]]
        if _rope(model) != rope:
            raise ConfigurationError(
                f"{c['model']}: RoPE {_rope_text(_rope(model))} differs from torchtitan's "
                f"{flavor[0]} flavors ({_rope_text(rope)}); register a flavor"
            )
        lines += [
            f"name = {_toml_value(flavor[0])}",
            f"flavor = {_toml_value(flavor[1])}",
            f"# RoPE comes with the flavor (no TOML key): {_rope_text(rope)}",
        ]
    else:
        lines += [
            f"# torchtitan ships no flavor of {c['model']} (layers {model.layers}, hidden {model.hidden}, "
            f"heads {model.heads}, kv heads {model.kv_heads}, ffn {model.ffn}, vocab {model.vocab}"
            + (f", {_rope_text(_rope(model))}" if not model.position_embeddings else "")
            + "); register one"
        ]
    if c["precision"] == "fp8":
        lines.append(f"converters = {json.dumps(['quantize.linear.float8'])}")
    return lines


def _checkpoint(c: dict, model) -> dict:
    """[activation_checkpoint]: mode none / full / selective with selective_ac_option "op"; recompute='full' with
    recompute_layers N: "full" where every block of a rank is recomputed, "none" where none is, else "selective"
    with the option k whose every-k-th blocks are the rank's min(v N, L / pp) (partial_recompute.
    torchtitan_ac_frequency), our error where no k gives that count."""
    checkpoint = {"mode": c["recompute"]}
    if c["recompute"] == "selective":
        checkpoint["selective_ac_option"] = "op"
    n = c.get("recompute_layers")
    if c["recompute"] != "full" or n is None:
        return checkpoint
    rank_layers = model.layers // c["pp"]
    recomputed = min(c["chunks"] * n, rank_layers)
    if recomputed in (0, rank_layers):
        return {"mode": "none" if recomputed == 0 else "full"}
    k = torchtitan_ac_frequency(rank_layers, recomputed)
    if k is None:
        raise ConfigurationError(
            f'recompute_layers={n}: torchtitan checkpoints every k-th block (selective_ac_option = "k": '
            f"floor({rank_layers} / k) of a rank's {rank_layers} blocks), and no k gives {recomputed}; valid: "
            f"recompute_layers whose count is floor({rank_layers} / k) for some k >= 2, 0, or export to megatron"
        )
    return {"mode": "selective", "selective_ac_option": str(k)}


def torchtitan(estimate) -> str:
    """torchtitan TOML sections [model], [parallelism], [training], [activation_checkpoint].

    ZeRO-0 = DDP (alone), ZeRO-2 = FSDP2 without resharding after forward, ZeRO-3 = FSDP2
    resharding after forward; ZeRO-1 raises ConfigurationError. Lesson 7 §7.

    >>> from distlab import training
    >>> est = training.estimate('llama2-7b', 'dgx-h100', nodes=2, global_batch=64, tp=2, pp=1, zero=3)
    >>> import tomllib; tomllib.loads(torchtitan(est))['training']  # micro-batch 1, 64 / (1 x dp 8) = 8 accumulated
    {'local_batch_size': 1, 'global_batch_size': 64, 'seq_len': 4096, 'mixed_precision_param': 'bfloat16'}
    """
    from .. import models

    c = config_of(estimate)
    _torchtitan_checks(c)
    model = models.model(c["model"])
    even_chunks(c, model, "torchtitan")
    dp, pp, b = c["dp"], c["pp"], c["micro_batch_size"]
    # one forward per device: the micro-batch (pp = 1; torchtitan accumulates m of them) or the m
    # microbatches the pipeline splits it into (pp > 1)
    local = b if pp == 1 else c["microbatches"] * b
    training = {
        "local_batch_size": local,
        "global_batch_size": c["global_batch"],
        "seq_len": c["seq_len"],
        "mixed_precision_param": "float32" if c["precision"] == "fp32" else "bfloat16",
    }
    checkpoint = _checkpoint(c, model)
    lines = [
        f"# distlab: {c['model']} on {c['gpus']} GPUs, dp={dp} tp={c['tp']}"
        + (f" cp={c['cp']}" if c.get("cp", 1) > 1 else "")
        + f" pp={pp}"
        + (f" v={c['chunks']}" if c["chunks"] > 1 else "")
        + f", micro-batch {b} x {c['microbatches']} microbatches, ZeRO-{c['zero']}",
        "# torchtitan JobConfig TOML (pytorch/torchtitan@e347b1e); tokenizer: [model] hf_assets_path",
        "",
        *_model_lines(c, model),
    ]
    sections = {"parallelism": _parallelism(c, model), "training": training, "activation_checkpoint": checkpoint}
    if c.get("tp_overlap_method") == "async-tp":  # job_config.py: async TP is "only effective when compile is enabled"
        sections["compile"] = {"enable": True}
    for name, items in sections.items():
        lines += ["", f"[{name}]"] + [f"{key} = {_toml_value(value)}" for key, value in items.items()]
    if checkpoint.get("selective_ac_option", "op") != "op":
        lines.append(
            f"# layer-level SAC: every k-th block checkpointed whole (k = {checkpoint['selective_ac_option']}), "
            f"{c['recompute_layers']} per stage chunk as planned (recompute_layers)"
        )
    elif c["recompute"] == "selective":
        lines.append(
            "# op-level SAC (keeps SDPA and every other matmul output), not Megatron's attention-core "
            "recompute, as planned with torchtitan's memory recipe"
        )
    # a long comment goes on over several comment lines, so that no line is wider than a notebook's output
    return "\n".join(wrap_text(line, indent="# ") if line.startswith("#") else line for line in lines) + "\n"
