"""A configuration as the input of a real training engine: Megatron-LM, DeepSpeed or torchtitan.

Each exporter takes a distlab.training.StepEstimate (so the configuration has been validated
and priced) and writes what the engine reads; each output parses back (shlex / json / tomllib)
to the same degrees, which tests/test_export.py checks. A setting an engine cannot express
raises ConfigurationError naming the engines that can.

Megatron-LM (megatron/training/arguments.py): --tensor-model-parallel-size,
--pipeline-model-parallel-size, --num-layers-per-virtual-pipeline-stage (interleaved 1F1B:
layers / (pp v)), --micro-batch-size, --global-batch-size, --seq-length, --sequence-parallel,
--recompute-granularity selective|full (full with --recompute-method uniform
--recompute-num-layers 1), --use-distributed-optimizer (the optimizer state sharded over the DP
group: ZeRO-1; there is no ZeRO-2/3 flag), --bf16 / --fp16. Megatron derives the data-parallel
degree as world size / (tp pp), so the flags come on a torchrun line whose --nnodes x
--nproc-per-node fixes the world size. Megatron-LM's pipeline schedules are 1F1B and interleaved 1F1B (no GPipe).

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
Activation recomputation is not a config key that works alone (the model calls
deepspeed.checkpointing), so it is left out of the JSON.

torchtitan (JobConfig, TOML): [parallelism] data_parallel_replicate_degree,
data_parallel_shard_degree (FSDP2 = ZeRO-3; torchtitan has no ZeRO-1/2), tensor_parallel_degree,
pipeline_parallel_degree, pipeline_parallel_schedule ("GPipe", "1F1B", "Interleaved1F1B"),
pipeline_parallel_microbatch_size; [training] local_batch_size (per data-parallel rank),
global_batch_size, seq_len; [activation_checkpoint] mode "none" | "selective" | "full".
torchtitan's tensor parallelism always shards the sequence dimension too (sequence parallel).
The TOML is written by hand (no dependency); tests read it back with tomllib.
"""

from __future__ import annotations

import json
import shlex

from .errors import ConfigurationError

__all__ = [
    "FORMATS",
    "TORCHTITAN_SCHEDULES",
    "megatron_flags",
    "megatron",
    "parse_megatron",
    "deepspeed_config",
    "deepspeed",
    "torchtitan",
    "export",
]

FORMATS = ("megatron", "deepspeed", "torchtitan")
TORCHTITAN_SCHEDULES = {"gpipe": "GPipe", "1f1b": "1F1B", "interleaved": "Interleaved1F1B"}


def _config(estimate) -> dict:
    config = getattr(estimate, "config", None)
    if not isinstance(config, dict):
        raise ConfigurationError(f"export needs a distlab.training.StepEstimate, got {type(estimate).__name__}")
    return config


def _launch(gpus: int, gpus_per_node: int) -> tuple[int, int]:
    """(nodes, processes per node) of a torchrun launch of `gpus` GPUs."""
    if gpus <= gpus_per_node:
        return 1, gpus
    if gpus % gpus_per_node:
        raise ConfigurationError(f"{gpus} GPUs do not fill whole nodes of {gpus_per_node}")
    return gpus // gpus_per_node, gpus_per_node


def megatron_flags(estimate) -> list[str]:
    """Megatron-LM pretrain_gpt.py arguments for this configuration (ConfigurationError for ZeRO-2/3).

    Lesson 7 §7.

    >>> from distlab import training
    >>> est = training.estimate('llama2-7b', 'dgx-h100', nodes=2, global_batch=64, tp=2, pp=2, zero=1)
    >>> megatron_flags(est)[8:12]
    ['--tensor-model-parallel-size', '2', '--pipeline-model-parallel-size', '2']
    """
    from . import models

    c = _config(estimate)
    if c["zero"] >= 2:
        raise ConfigurationError(
            f"zero={c['zero']}: Megatron-LM shards only the optimizer state over the data-parallel group "
            f"(--use-distributed-optimizer, ZeRO-1) and has no ZeRO-2/3 flag; use zero=0 or 1, or export to "
            f"deepspeed (ZeRO-2, and ZeRO-3 without pipeline/tensor parallelism) or torchtitan (FSDP = ZeRO-3)")
    model = models.model(c["model"])
    flags = ["--num-layers", str(model.layers), "--hidden-size", str(model.hidden),
             "--ffn-hidden-size", str(model.ffn), "--num-attention-heads", str(model.heads)]
    if model.kv_heads and model.kv_heads < model.heads:
        flags += ["--group-query-attention", "--num-query-groups", str(model.kv_heads)]
    flags += ["--tensor-model-parallel-size", str(c["tp"]), "--pipeline-model-parallel-size", str(c["pp"])]
    if c["schedule"] == "interleaved":
        flags += ["--num-layers-per-virtual-pipeline-stage", str(model.layers // (c["pp"] * c["chunks"]))]
    elif c["schedule"] == "gpipe" and c["pp"] > 1:
        raise ConfigurationError("schedule='gpipe': Megatron-LM runs 1F1B or interleaved 1F1B pipelines; "
                                 "choose schedule='1f1b' (same bubble, less activation memory) or export to torchtitan")
    flags += ["--micro-batch-size", str(c["micro_batch_size"]), "--global-batch-size", str(c["global_batch"]),
              "--seq-length", str(c["seq_len"]), "--max-position-embeddings", str(c["seq_len"])]
    if c["sequence_parallel"]:
        flags.append("--sequence-parallel")
    if c["recompute"] == "selective":
        flags += ["--recompute-granularity", "selective"]
    elif c["recompute"] == "full":
        flags += ["--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"]
    if c["zero"] == 1:
        flags.append("--use-distributed-optimizer")
    precision = c["precision"]
    if precision in ("mixed", "bf16"):
        flags.append("--bf16")
    elif precision == "fp16":
        flags.append("--fp16")
    elif precision == "fp8":
        flags += ["--bf16", "--fp8-format", "hybrid"]
    return flags


def megatron(estimate, gpus_per_node: int = 8) -> str:
    """A torchrun line launching Megatron-LM's pretrain_gpt.py; data parallelism = world / (tp pp).

    Lesson 7 §7.

    >>> from distlab import training
    >>> est = training.estimate('llama2-7b', 'dgx-h100', nodes=2, global_batch=64, tp=2, pp=2, zero=1)
    >>> print(megatron(est).splitlines()[0])
    torchrun --nnodes 2 --nproc-per-node 8 pretrain_gpt.py \\
    """
    c = _config(estimate)
    nnodes, nproc = _launch(c["gpus"], gpus_per_node)
    lines = [f"torchrun --nnodes {nnodes} --nproc-per-node {nproc} pretrain_gpt.py"]
    for word in megatron_flags(estimate):  # one flag (with its value) per continued line
        if word.startswith("--"):
            lines.append(word)
        else:
            lines[-1] += " " + shlex.quote(word)
    return " \\\n    ".join(lines)


def parse_megatron(text: str) -> dict:
    """The degrees a megatron() line sets: dp (world / (tp pp)), tp, pp, chunks, batch sizes, zero, recompute.

    Lesson 7 §7 (the round trip the export tests check).

    >>> from distlab import training
    >>> est = training.estimate('llama2-7b', 'dgx-h100', nodes=2, global_batch=64, tp=2, pp=2, zero=1)
    >>> parse_megatron(megatron(est))['dp']
    4
    """
    words = shlex.split(text.replace("\\\n", " "))
    values, switches = {}, set()
    for i, word in enumerate(words):
        if word.startswith("--"):
            if i + 1 < len(words) and not words[i + 1].startswith("--") and words[i + 1] != "pretrain_gpt.py":
                values[word] = words[i + 1]
            else:
                switches.add(word)
    world = int(values["--nnodes"]) * int(values["--nproc-per-node"])
    tp, pp = int(values["--tensor-model-parallel-size"]), int(values["--pipeline-model-parallel-size"])
    layers = int(values["--num-layers"])
    per_virtual = values.get("--num-layers-per-virtual-pipeline-stage")
    return dict(dp=world // (tp * pp), tp=tp, pp=pp, chunks=1 if per_virtual is None else layers // (pp * int(per_virtual)),
                micro_batch_size=int(values["--micro-batch-size"]), global_batch=int(values["--global-batch-size"]),
                seq_len=int(values["--seq-length"]), zero=1 if "--use-distributed-optimizer" in switches else 0,
                recompute=values.get("--recompute-granularity", "none"),
                sequence_parallel="--sequence-parallel" in switches)


def deepspeed_config(estimate) -> dict:
    """The DeepSpeed config as a dict (ConfigurationError where DeepSpeed cannot run it).

    Lesson 7 §7.

    >>> from distlab import training
    >>> est = training.estimate('llama2-7b', 'dgx-h100', nodes=2, global_batch=64, tp=2, pp=2, zero=1)
    >>> deepspeed_config(est)['gradient_accumulation_steps']  # 64 samples / (dp 4 x micro-batch 1)
    16
    """
    c = _config(estimate)
    if c["pp"] > 1 and c["zero"] >= 2:
        raise ConfigurationError(f"zero={c['zero']} with pp={c['pp']}: DeepSpeed's pipeline engine supports ZeRO-0/1 only "
                                 f"(\"ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism\"); use zero=1, or export "
                                 f"to torchtitan")
    if c["pp"] > 1 and c["schedule"] != "1f1b":
        raise ConfigurationError(f"schedule={c['schedule']!r}: DeepSpeed's pipeline engine runs its own 1F1B schedule; "
                                 f"choose schedule='1f1b', or export to megatron or torchtitan")
    if c["tp"] > 1 and c["zero"] >= 3:
        raise ConfigurationError(f"zero=3 with tp={c['tp']}: DeepSpeed AutoTP training combines tensor parallelism with "
                                 f"ZeRO stages 0-2 only; use zero<=2, or export to torchtitan (FSDP + TP)")
    if c["precision"] == "fp8":
        raise ConfigurationError("precision='fp8': the DeepSpeed config has no fp8 switch (fp8 comes from Transformer "
                                 "Engine in the model code); export to megatron instead")
    out = {
        "train_batch_size": c["global_batch"],
        "train_micro_batch_size_per_gpu": c["micro_batch_size"],
        "gradient_accumulation_steps": c["microbatches"],
        "zero_optimization": {"stage": c["zero"]},
    }
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


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return json.dumps(str(value))  # a TOML basic string: same escapes as JSON for these names


def torchtitan(estimate) -> str:
    """torchtitan TOML sections [parallelism], [training], [activation_checkpoint] (ConfigurationError for ZeRO-1/2).

    Lesson 7 §7.

    >>> from distlab import training
    >>> est = training.estimate('llama2-7b', 'dgx-h100', nodes=2, global_batch=64, tp=2, pp=2, zero=3)
    >>> '[parallelism]' in torchtitan(est)
    True
    """
    from . import models

    c = _config(estimate)
    if c["zero"] in (1, 2):
        raise ConfigurationError(f"zero={c['zero']}: torchtitan shards with FSDP (ZeRO-3) or replicates (ZeRO-0); it has "
                                 f"no ZeRO-1/2; use zero=0 or 3, or export to megatron (ZeRO-1) or deepspeed")
    dp = c["dp"]
    parallelism = {
        "data_parallel_replicate_degree": dp if c["zero"] == 0 else 1,
        "data_parallel_shard_degree": dp if c["zero"] == 3 else 1,
        "tensor_parallel_degree": c["tp"],
        "pipeline_parallel_degree": c["pp"],
    }
    if c["pp"] > 1:
        parallelism["pipeline_parallel_schedule"] = TORCHTITAN_SCHEDULES[c["schedule"]]
        parallelism["pipeline_parallel_microbatch_size"] = c["micro_batch_size"]
        if c["schedule"] == "interleaved":
            parallelism["pipeline_parallel_layers_per_stage"] = models.model(c["model"]).layers // (c["pp"] * c["chunks"])
    sections = {
        "parallelism": parallelism,
        "training": {"local_batch_size": c["global_batch"] // dp, "global_batch_size": c["global_batch"],
                     "seq_len": c["seq_len"]},
        "activation_checkpoint": {"mode": c["recompute"]},
    }
    lines = [f"# distlab: {c['model']} on {c['gpus']} GPUs, dp={dp} tp={c['tp']} pp={c['pp']}"
             + (f" v={c['chunks']}" if c["chunks"] > 1 else "") + f", ZeRO-{c['zero']}"]
    for name, items in sections.items():
        lines += ["", f"[{name}]"] + [f"{key} = {_toml_value(value)}" for key, value in items.items()]
    return "\n".join(lines) + "\n"


def export(estimate, fmt: str, gpus_per_node: int = 8) -> str:
    """The configuration in engine format `fmt`: 'megatron', 'deepspeed' or 'torchtitan'.

    Lesson 7 §7 (`distlab export`).

    >>> from distlab import training
    >>> est = training.estimate('llama2-7b', 'dgx-h100', nodes=2, global_batch=64, tp=2, pp=2, zero=1)
    >>> export(est, 'torchtitan')
    Traceback (most recent call last):
        ...
    distlab.errors.ConfigurationError: zero=1: torchtitan shards with FSDP (ZeRO-3) or replicates (ZeRO-0); ...
    """
    key = str(fmt).strip().lower()
    if key == "megatron":
        return megatron(estimate, gpus_per_node)
    if key == "deepspeed":
        return deepspeed(estimate)
    if key == "torchtitan":
        return torchtitan(estimate)
    raise ConfigurationError(f"format={fmt!r}; valid: {', '.join(FORMATS)}")
