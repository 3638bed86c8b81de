"""The cluster and configuration options shared by `distlab estimate`, `plan`, `export` and `triage`.

Not a subcommand (cli.py skips modules whose name starts with an underscore).
"""

from __future__ import annotations

from typing import Any

from ..attention_kernels import ATTENTION_KERNEL_NAMES
from ..expert_gemms import EXPERT_GEMM_NAMES
from ..elementwise import FP8_SCALING
from ..errors import ConfigurationError
from ..hardware import LINKS, NODES
from ..step.data_parallel import ZERO3_COLLECTIVES
from ..tp_overlap import TP_OVERLAP_NAMES


def add_cluster_arguments(cmd) -> None:
    cmd.add_argument("--model", required=True, help="catalog model, e.g. llama3.1-70b")
    cmd.add_argument("--gpus", type=int, required=True, help="GPUs in all; whole nodes: nodes = GPUs / GPUs per node")
    cmd.add_argument("--node", default="dgx-h100", help=f"node type (default dgx-h100): {', '.join(NODES)}")
    fabrics = ", ".join(name for name, link in LINKS.items() if link.kind == "inter-node")
    cmd.add_argument("--fabric", default="ib-ndr", help=f"inter-node link (default ib-ndr): {fabrics}")
    cmd.add_argument("--global-batch", type=int, required=True, help="sequences per step (global batch B)")
    cmd.add_argument("--seq-len", type=int, default=None, help="sequence length (default: the model's)")
    hidden_alias(cmd, "--seq", dest="seq_len", type=int)
    cmd.add_argument("--precision", default="mixed", help="mixed (default, bf16 + fp32 master), fp16, fp32, fp8")
    cmd.add_argument(
        "--efficiency",
        type=float,
        default=None,
        help="a fixed share of the dense peak for every FLOP (Lesson 7 §1); default: the calibrated "
        "compute model of distlab.efficiency (Lesson 7 §8)",
    )
    cmd.add_argument(
        "--memory-recipe",
        default="zero-paper",
        help="what the engine keeps per parameter: zero-paper (default, 16 B), megatron, "
        "megatron-distributed-optimizer, megatron-bf16-grads, megatron-distributed-optimizer-bf16-grads, "
        "megatron-fsdp, deepspeed, fsdp2, fsdp2-sp-regather, fsdp1, fsdp1-pure (distlab.memory_recipes); export plans with the engine's own",
    )
    cmd.add_argument(
        "--attention",
        default="flash",
        choices=("flash", "unfused"),
        help="attention kernel: flash (default; scores never stored) or unfused (Megatron-LM 2021-22)",
    )


def add_config_arguments(cmd, required: bool = True) -> None:
    cmd.add_argument("--dp", type=int, default=None, help="data-parallel degree (default: GPUs / (tp pp))")
    cmd.add_argument("--tp", type=int, default=1, help="tensor-parallel degree (default 1)")
    cmd.add_argument("--cp", type=int, default=1, help="context-parallel degree, ring attention (default 1)")
    cmd.add_argument("--pp", type=int, default=1, help="pipeline stages (default 1)")
    cmd.add_argument(
        "--microbatches",
        type=int,
        default=None,
        help="microbatches per pipeline per step m: fixes micro-batch size = B / (dp m)",
    )
    cmd.add_argument("--micro-batch-size", type=int, default=None, help="sequences per microbatch (default 1)")
    cmd.add_argument("--chunks", type=int, default=1, help="model chunks per stage v (interleaved only, default 1)")
    cmd.add_argument("--schedule", default=None, help="gpipe, 1f1b (default), interleaved (default when --chunks > 1)")
    cmd.add_argument("--zero", type=int, default=0, help="ZeRO stage 0-3 (default 0)")
    cmd.add_argument("--recompute", default="none", help="none (default), selective, full")
    cmd.add_argument(
        "--recompute-layers",
        type=int,
        default=None,
        metavar="N",
        help="with --recompute full: only N layers of each pipeline stage (of each chunk) fully recomputed, the rest "
        "keeping their activations (Megatron-LM --recompute-method block; default: every layer)",
    )
    cmd.add_argument("--sequence-parallel", action="store_true", help="shard the non-TP activations too (with tp > 1)")
    cmd.add_argument(
        "--balance-stages",
        action="store_true",
        help="first and last pipeline stage one layer fewer, for the embedding and logits (Llama 3)",
    )
    cmd.add_argument(
        "--no-overlap-param-gather",
        dest="overlap_param_gather",
        action="store_false",
        help="ZeRO-1/2: the parameter all-gather before the first forward, exposed (Megatron-LM without "
        "--overlap-param-gather); default: under it",
    )
    add_tp_overlap_argument(cmd)


def add_tp_overlap_argument(cmd) -> None:
    """--tp-overlap [METHOD] (estimate, plan, export, triage)."""
    cmd.add_argument(
        "--tp-overlap",
        nargs="?",
        const=True,
        default=None,
        metavar="METHOD",
        help="overlap the TP collectives with the matmuls: absent, the memory recipe's engine's default "
        "(megatron-async-backward for Megatron-LM's recipes, else none); alone, the engine's opt-in method (async-tp "
        "for fsdp2, else userbuffers = Megatron-Core --tp-comm-overlap; with sequence parallelism); or none, "
        "userbuffers, async-tp, megatron-async-backward (Megatron-LM's default since 2021-09: the backward's "
        "collectives beside the weight-gradient GEMMs; distlab.tp_overlap)",
    )


def add_activation_offload_argument(cmd) -> None:
    """--activation-offload-layers N (estimate, export): training.estimate's activation_offload_layers."""
    cmd.add_argument(
        "--activation-offload-layers",
        type=int,
        default=0,
        metavar="N",
        help="offload the saved activations of the model's first N layers to host memory (Megatron-Core "
        "--cpu-offloading-num-layers; a megatron* memory recipe, pp 1, no recompute, a node with a host link such as "
        "gb200-nvl72's NVLink-C2C; default 0)",
    )


def activation_offload(args) -> dict:
    """estimate()'s activation_offload_layers from --activation-offload-layers; nothing at 0 (the default estimate)."""
    layers = getattr(args, "activation_offload_layers", 0)
    return {"activation_offload_layers": layers} if layers else {}


def add_compute_arguments(cmd) -> None:
    """--attention-kernel, --fp8-scaling, --expert-gemm, --zero3-collectives: training.estimate's and planner.plan's
    named compute choices (estimate, plan, export), checked by compute_options."""
    cmd.add_argument(
        "--attention-kernel",
        default=None,
        help="flash-attention kernel whose measured rates price the attention core: "
        f"{', '.join(ATTENTION_KERNEL_NAMES)} (distlab.attention_kernels; default: the memory recipe's engine's, "
        "e.g. cudnn for Megatron, sdpa for FSDP2, flash otherwise)",
    )
    cmd.add_argument(
        "--fp8-scaling",
        default="delayed",
        help=f"with --precision fp8: how tensors are scaled before the FP8 cast: {', '.join(FP8_SCALING)} "
        "(default delayed, NeMo/Megatron's; distlab.elementwise)",
    )
    cmd.add_argument(
        "--expert-gemm",
        default=None,
        help=f"an MoE model's expert GEMMs on a GPU: {', '.join(EXPERT_GEMM_NAMES)} (one at a time, up to 4 on CUDA "
        "streams, one grouped launch; distlab.expert_gemms; default: the memory recipe's engine's, e.g. multi-stream "
        "for Megatron with --moe-grouped-gemm, grouped for FSDP2)",
    )
    cmd.add_argument(
        "--zero3-collectives",
        default="layer",
        help="ZeRO-3's gathers and reductions: layer (default; one flat buffer per layer, FSDP2 and Megatron) or "
        "tensor (one per parameter tensor, DeepSpeed ZeRO-3 as of 2021)",
    )


def add_fp8_attention_argument(cmd) -> None:
    """--fp8-attention (estimate, plan): an FP8 recipe's attention core in FP8 too (compute_options passes it)."""
    cmd.add_argument(
        "--fp8-attention",
        action="store_true",
        help="with --precision fp8: the attention core in FP8 too (Megatron's --fp8-dot-product-attention; cuDNN's "
        "kernel; priced at its measured time over BF16's, distlab.attention_variants)",
    )


def _choice(value, flag: str, valid) -> str:
    """value, lower-cased, if it is one of valid; else our error naming the flag and the valid values."""
    key = value.strip().lower() if isinstance(value, str) else ""
    if key not in valid:
        raise ConfigurationError(f"{flag} {value!r}; valid: {', '.join(valid)}")
    return key


def compute_options(args) -> dict:
    """training.estimate's and planner.plan's attention_kernel, fp8_scaling, expert_gemm and zero3_collectives from
    add_compute_arguments, each checked against its valid values (our error names the flag); fp8_attention where
    --fp8-attention was given."""
    kernel, experts = args.attention_kernel, args.expert_gemm
    options: dict[str, Any] = dict(
        attention_kernel=None if kernel is None else _choice(kernel, "--attention-kernel", ATTENTION_KERNEL_NAMES),
        expert_gemm=None if experts is None else _choice(experts, "--expert-gemm", EXPERT_GEMM_NAMES),
        fp8_scaling=_choice(args.fp8_scaling, "--fp8-scaling", FP8_SCALING),
        zero3_collectives=_choice(args.zero3_collectives, "--zero3-collectives", ZERO3_COLLECTIVES),
    )
    if getattr(args, "fp8_attention", False):  # estimate and plan only (add_fp8_attention_argument)
        options["fp8_attention"] = True
    return options


def tp_overlap(args):
    """estimate()'s tp_overlap of --tp-overlap: None (absent: the engine's default), True (alone: the engine's method)
    or a method name."""
    value = args.tp_overlap
    if value is None or value is True or value is False:
        return value
    return _choice(value, "--tp-overlap", TP_OVERLAP_NAMES)


def cluster(args):
    """The hardware.Cluster of --gpus on --node nodes joined by --fabric."""
    from .. import hardware

    node = hardware.node(args.node)
    g = node.gpus_per_node
    if args.gpus is None or args.gpus < 1 or args.gpus % g:
        valid = ", ".join(str(g * k) for k in (1, 2, 4, 8, 16, 32))
        raise ConfigurationError(
            f"--gpus {args.gpus} must be a whole number of {node.name} nodes of {g} GPUs (e.g. {valid}, ...)"
        )
    return hardware.cluster(node, args.gpus // g, args.fabric)


def config(args) -> dict:
    """estimate()'s keyword arguments from the configuration options (checks --microbatches)."""
    tp, pp, cp = args.tp, args.pp, args.cp
    dp = args.dp
    if dp is None:
        if tp < 1 or pp < 1 or cp < 1 or args.gpus % (tp * cp * pp):
            what = f"tp x pp = {tp} x {pp}" if cp == 1 else f"tp x cp x pp = {tp} x {cp} x {pp}"
            raise ConfigurationError(f"{what} must divide --gpus {args.gpus}")
        dp = args.gpus // (tp * cp * pp)
    b = args.micro_batch_size
    if args.microbatches is not None:
        m = args.microbatches
        if m < 1 or dp < 1 or args.global_batch % (dp * m):
            raise ConfigurationError(
                f"--microbatches {m}: the global batch {args.global_batch} must split into dp x m = "
                f"{dp} x {m} whole microbatches"
            )
        implied = args.global_batch // (dp * m)
        if b is not None and b != implied:
            raise ConfigurationError(
                f"--microbatches {m} means micro-batch size B / (dp m) = {args.global_batch} / "
                f"({dp} x {m}) = {implied}, not --micro-batch-size {b}"
            )
        b = implied
    schedule = args.schedule or ("interleaved" if args.chunks > 1 else "1f1b")
    partial = {} if args.recompute_layers is None else {"recompute_layers": args.recompute_layers}
    if not args.overlap_param_gather:
        partial["overlap_param_gather"] = False
    return dict(
        global_batch=args.global_batch,
        seq_len=args.seq_len,
        dp=dp,
        tp=tp,
        cp=cp,
        pp=pp,
        chunks=args.chunks,
        micro_batch_size=1 if b is None else b,
        zero=args.zero,
        recompute=args.recompute,
        sequence_parallel=args.sequence_parallel,
        schedule=schedule,
        precision=args.precision,
        efficiency=args.efficiency,
        attention=args.attention,
        tp_overlap=tp_overlap(args),
        memory_recipe=args.memory_recipe,
        balance_stages=args.balance_stages,
        **partial,
    )


def hidden_alias(cmd, flag: str, **kwargs) -> None:
    """An older spelling of a flag, still read (scripts and notes written with it keep working) but left out of
    --help: one visible name per concept across the subcommands (tests/cli/test_cli_flags.py)."""
    import argparse

    cmd.add_argument(flag, default=argparse.SUPPRESS, help=argparse.SUPPRESS, **kwargs)


def add_moe_routing_arguments(cmd) -> None:
    """--moe-imbalance, --capacity-factor, --max-nodes-per-token (training.estimate's and planner.plan's routing
    knobs of a mixture-of-experts model)."""
    cmd.add_argument(
        "--moe-imbalance",
        type=float,
        default=1.0,
        help="busiest EP rank's token copies over the mean, 1 to min(ep, experts / top_k) (MoE; default 1)",
    )
    cmd.add_argument(
        "--capacity-factor",
        type=float,
        default=None,
        help="expert capacity factor: buffers padded to it, overflow dropped (MoE; default dropless)",
    )
    cmd.add_argument(
        "--max-nodes-per-token",
        type=int,
        default=None,
        help="node-limited routing: at most this many nodes per token, as DeepSeek-V3's 4 (MoE; default no limit)",
    )


def moe_routing(args) -> dict:
    """The routing keywords of add_moe_routing_arguments."""
    return dict(
        moe_imbalance=args.moe_imbalance,
        capacity_factor=args.capacity_factor,
        max_nodes_per_token=args.max_nodes_per_token,
    )
