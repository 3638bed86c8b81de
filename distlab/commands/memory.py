"""distlab memory: the per-GPU training memory breakdown (distlab.memory)."""

from __future__ import annotations

import json
import re

from ..errors import ConfigurationError
from .._words import counted

__all__ = ["NAME", "HELP", "parse_count", "add_arguments", "run"]

NAME = "memory"
HELP = "per-GPU training memory breakdown"

_COUNT_SUFFIX = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}


def parse_count(text: str) -> float:
    """'7B' -> 7e9, '350M' -> 3.5e8, '1.5T' -> 1.5e12, '70e9' -> 7e10."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([kKmMbBgGtT]?)\s*", str(text))
    if not match:
        raise ConfigurationError(f"--params {text!r} is not a parameter count; write e.g. 7B, 350M, 70e9")
    return float(match.group(1)) * _COUNT_SUFFIX[match.group(2).lower()]


def add_arguments(mem) -> None:
    mem.add_argument("--model", help="catalog model name, e.g. llama2-7b")
    mem.add_argument("--params", help="bare parameter count instead of a model, e.g. 7B or 70e9")
    mem.add_argument("--precision", default="mixed", help="mixed (default), bf16, fp16, fp32, fp8")
    mem.add_argument("--zero", type=int, default=0, help="ZeRO stage 0-3 (default 0)")
    mem.add_argument("--dp", type=int, default=1, help="data-parallel degree (default 1)")
    mem.add_argument("--tp", type=int, default=1, help="tensor-parallel degree (default 1)")
    mem.add_argument("--pp", type=int, default=1, help="pipeline-parallel degree (default 1)")
    mem.add_argument("--ep", type=int, default=1, help="expert-parallel degree, MoE models (default 1)")
    mem.add_argument("--etp", type=int, default=None, help="expert tensor-parallel degree, MoE models (default tp)")
    mem.add_argument("--micro-batch-size", type=int, default=1, help="sequences per microbatch (default 1)")
    mem.add_argument("--seq-len", type=int, default=None, help="sequence length (default: the model's)")
    mem.add_argument("--recompute", default="none", help="none (default), selective, full")
    mem.add_argument("--sequence-parallel", action="store_true", help="shard the non-TP activations too")
    mem.add_argument("--gpu", help="GPU name (h100-sxm) or capacity ('80 GB') to check the fit")
    mem.add_argument("--json", action="store_true", help="print a JSON object (bytes as plain numbers)")


def run(args) -> int:
    from .. import memory

    if (args.model is None) == (args.params is None):
        raise ConfigurationError("give exactly one of --model NAME or --params N")
    if args.model is not None and str(args.model).strip().lower() in _moe_models():
        return _run_moe(args)
    if args.ep != 1 or args.etp is not None:
        raise ConfigurationError("--ep and --etp apply to mixture-of-experts models (distlab.moe.MOE_MODELS)")
    model = args.model if args.model is not None else parse_count(args.params)
    bd = memory.training_memory(
        model,
        precision=args.precision,
        zero=args.zero,
        dp=args.dp,
        tp=args.tp,
        pp=args.pp,
        micro_batch_size=args.micro_batch_size,
        seq_len=args.seq_len,
        recompute=args.recompute,
        sequence_parallel=args.sequence_parallel,
        gpu=args.gpu,
    )
    if args.json:
        print(json.dumps(bd.to_dict(), indent=2))
    else:
        name = bd.config.get("model") or f"{bd.config['params']:.4g} parameters"
        print(
            f"{name}, {bd.config['precision']} precision, ZeRO-{bd.config['zero']}, "
            f"dp={bd.config['dp']} tp={bd.config['tp']} pp={bd.config['pp']}: per GPU"
        )
        print(bd.summary())
    return 0


def _moe_models():
    from ..moe import MOE_MODELS

    return MOE_MODELS


def _run_moe(args) -> int:
    """Model states of an MoE model over dp x tp x pp GPUs with experts over ep x etp, and the first stage's
    activations (distlab.moe)."""
    from .. import memory, moe
    from ..units import format_bytes

    gpus = args.dp * args.tp * args.pp
    etp = args.tp if args.etp is None else args.etp
    mem = moe.expert_parallel_memory(
        args.model, gpus, tp=args.tp, pp=args.pp, ep=args.ep, etp=etp, precision=args.precision, zero=args.zero
    )
    capacity = memory.gpu_capacity(args.gpu)[0] if args.gpu else None
    activations = moe.stage_activation_bytes(
        args.model,
        args.micro_batch_size,
        args.seq_len,
        pp=args.pp,
        tp=args.tp,
        ep=args.ep,
        etp=etp,
        recompute=args.recompute,
        precision=args.precision,
    )
    total = mem.total_bytes + activations
    if args.json:
        data = dict(
            mem.to_dict(),
            model=args.model,
            gpus=gpus,
            tp=args.tp,
            pp=args.pp,
            ep=args.ep,
            etp=etp,
            zero=args.zero,
            precision=args.precision,
            activations_bytes=activations,
            total_with_activations_bytes=total,
        )
        if capacity is not None:
            data["capacity_bytes"] = capacity
            data["fits"] = total <= capacity
        print(json.dumps(data, indent=2))
        return 0
    print(
        f"{args.model} (mixture of experts), {args.precision} precision, ZeRO-{args.zero}, {gpus} GPUs: "
        f"dp={mem.dp} tp={args.tp} pp={args.pp}, experts ep={args.ep} etp={etp} edp={mem.edp}: per GPU"
    )
    print(mem.summary())
    print(
        f"activations {format_bytes(activations)} (first stage, {counted(args.pp, 'microbatch')} in flight, recompute "
        f"{args.recompute}; distlab.moe.stage_activation_bytes); total {format_bytes(total)}"
    )
    if capacity is not None:
        verdict = "fits" if total <= capacity else f"does not fit: {format_bytes(total - capacity)} over"
        print(f"GPU capacity {format_bytes(capacity)}: model states + activations: {verdict}")
    return 0
