"""distlab memory: the per-GPU training memory breakdown (distlab.memory)."""

from __future__ import annotations

import json
import re

from ..errors import ConfigurationError

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


