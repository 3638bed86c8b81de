"""A configuration as a DeepSpeed config JSON (distlab.export).

DeepSpeed ("DeepSpeed Configuration JSON", batch size parameters): train_batch_size =
train_micro_batch_size_per_gpu x gradient_accumulation_steps x data-parallel size;
"zero_optimization": {"stage": z}; "bf16"/"fp16": {"enabled": true}; "pipeline": {"stages": pp}
(the pipeline section; the model must be a deepspeed.pipe.PipelineModule); and
"tensor_parallel": {"autotp_size": tp}, DeepSpeed's AutoTP training, documented in the tutorial
"Automatic Tensor Parallelism (Training)" (https://www.deepspeed.ai/tutorials/autotp-training),
whose example config is {"zero_optimization": {"stage": 2}, "bf16": {"enabled": true},
"tensor_parallel": {"autotp_size": 4}} and which combines TP with ZeRO stages 0, 1 or 2.
DeepSpeed's PipelineEngine asserts "ZeRO-2 and ZeRO-3 are incompatible with pipeline
parallelism" and runs only its own 1F1B-style TrainSchedule (no GPipe, no interleaving).
"overlap_comm": true at stages 1 and 2 without a pipeline, where estimate() prices the gradient reduction as
overlapped with the backward: DeepSpeed's default is true only at stage 3 (DeepSpeedZeroConfig.overlap_comm_valid:
None -> stage == 3). What DeepSpeed runs exposed, estimate(memory_recipe='deepspeed') prices exposed
(step.data_parallel._deepspeed_exposure): the pipeline engine turns overlap_comm off ("Pipeline parallelism does
not support overlapped communication, will be disabled": engine.py), so its gradient reduction runs after the last
backward; ZeRO-1/2's parameter all-gather runs at the end of the optimizer step (stage_1_and_2.py step:
all_gather_dp_groups); and without ZeRO the engine all-reduces after the backward (engine.backward:
allreduce_gradients). Not priced: without ZeRO, bf16 runs DeepSpeed's BF16_Optimizer, which all-reduces fp32
gradients (twice the bytes the estimate moves).
Activation recomputation is not a config key that works alone (the model calls
deepspeed.checkpointing), so it is left out of the JSON. The JSON has no model section (the
model is the user's code), so no model shape is exported for DeepSpeed.
"""

from __future__ import annotations

import json

from ..errors import ConfigurationError
from .engines import config_of, refuse_activation_offload

__all__ = ["deepspeed_config", "deepspeed"]


def deepspeed_config(estimate) -> dict:
    """The DeepSpeed config as a dict (ConfigurationError where DeepSpeed cannot run it).

    Lesson 7 §7.

    >>> from distlab import training
    >>> est = training.estimate('llama2-7b', 'dgx-h100', nodes=2, global_batch=64, tp=2, pp=2, zero=1)
    >>> deepspeed_config(est)['gradient_accumulation_steps']  # 64 samples / (dp 4 x micro-batch 1)
    16
    """
    c = config_of(estimate)
    refuse_activation_offload(c, "DeepSpeed")
    if c["pp"] > 1 and c["zero"] >= 2:
        raise ConfigurationError(
            f"zero={c['zero']} with pp={c['pp']}: DeepSpeed's pipeline engine supports ZeRO-0/1 only "
            f'("ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism"); use zero=1, or export '
            f"to torchtitan"
        )
    if c["pp"] > 1 and c["schedule"] != "1f1b":
        raise ConfigurationError(
            f"schedule={c['schedule']!r}: DeepSpeed's pipeline engine runs its own 1F1B schedule; "
            f"choose schedule='1f1b', or export to megatron or torchtitan"
        )
    if c["tp"] > 1 and c["zero"] >= 3:
        raise ConfigurationError(
            f"zero=3 with tp={c['tp']}: DeepSpeed AutoTP training combines tensor parallelism with "
            f"ZeRO stages 0-2 only; use zero<=2, or export to torchtitan (FSDP + TP)"
        )
    if c.get("cp", 1) > 1:
        raise ConfigurationError(
            f"cp={c['cp']}: DeepSpeed has no ring-attention context parallelism (DeepSpeed-Ulysses "
            f"splits the sequence with all-to-alls, which distlab does not price); export to "
            f"megatron or torchtitan"
        )
    if c["precision"] == "fp8":
        raise ConfigurationError(
            "precision='fp8': the DeepSpeed config has no fp8 switch (fp8 comes from Transformer "
            "Engine in the model code); export to megatron instead"
        )
    if c.get("tp_overlap_method"):
        raise ConfigurationError(
            f"tp_overlap={c['tp_overlap_method']!r}: DeepSpeed's AutoTP runs its TP collectives on the critical path "
            "(no overlap switch in the config); estimate with memory_recipe='deepspeed' (whose default is no overlap) "
            "or tp_overlap=False, or export to megatron (userbuffers, megatron-async-backward) or torchtitan (async-tp)"
        )
    out = {
        "train_batch_size": c["global_batch"],
        "train_micro_batch_size_per_gpu": c["micro_batch_size"],
        "gradient_accumulation_steps": c["microbatches"],
        "zero_optimization": {"stage": c["zero"]},
    }
    if c["zero"] in (1, 2) and c["pp"] == 1:  # the gradient reduction under the backward, as estimate() prices it
        out["zero_optimization"]["overlap_comm"] = True
    if c["precision"] in ("mixed", "bf16"):
        out["bf16"] = {"enabled": True}
    elif c["precision"] == "fp16":
        out["fp16"] = {"enabled": True}
    if c["pp"] > 1:
        out["pipeline"] = {"stages": c["pp"]}
    if c["tp"] > 1:
        out["tensor_parallel"] = {"autotp_size": c["tp"]}
    return out


def deepspeed(estimate) -> str:
    """The DeepSpeed config JSON (train_batch_size = micro batch x accumulation x dp).

    Lesson 7 §7.

    >>> from distlab import training
    >>> est = training.estimate('llama2-7b', 'dgx-h100', nodes=2, global_batch=64, tp=2, pp=2, zero=1)
    >>> deepspeed(est).startswith('{')
    True
    """
    return json.dumps(deepspeed_config(estimate), indent=2)
