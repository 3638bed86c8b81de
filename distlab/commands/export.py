"""distlab export: a configuration as Megatron-LM flags, a DeepSpeed config JSON or a torchtitan TOML (distlab.export)."""

from __future__ import annotations

from .._words import counted

__all__ = ["NAME", "HELP", "add_arguments", "run"]

NAME = "export"
HELP = "write a configuration (given, or --best from the planner) for Megatron-LM, DeepSpeed or torchtitan"


def add_arguments(cmd) -> None:
    from ..export import FORMATS
    from ._configuration import (
        add_activation_offload_argument,
        add_cluster_arguments,
        add_compute_arguments,
        add_config_arguments,
        add_moe_routing_arguments,
        hidden_alias,
    )

    cmd.add_argument("--format", required=True, help=f"engine: {', '.join(FORMATS)}")
    add_cluster_arguments(cmd)
    add_config_arguments(cmd)
    add_compute_arguments(cmd)
    add_activation_offload_argument(cmd)
    cmd.add_argument("--ep", type=int, default=1, help="expert-parallel degree (MoE models, distlab.moe)")
    cmd.add_argument("--etp", type=int, default=None, help="expert tensor-parallel degree (MoE; default tp)")
    add_moe_routing_arguments(cmd)
    hidden_alias(cmd, "--max-nodes", dest="max_nodes_per_token", type=int)  # the name before --max-nodes-per-token
    cmd.add_argument(
        "--best",
        action="store_true",
        help="export the planner's fastest configuration that the engine can express and that fits with the "
        "engine's own memory recipe (the configuration options are then ignored)",
    )
    cmd.add_argument(
        "--partial-recompute",
        action="store_true",
        help="with --best: the planner also searches full recomputation of only some layers per stage chunk "
        "(Megatron-LM --recompute-method block --recompute-num-layers N; distlab plan --partial-recompute)",
    )


def _given(args, recipe) -> dict:
    """What --best plans and prices every configuration with: the batch, sequence, compute model and recipe."""
    from ._configuration import compute_options, tp_overlap

    return dict(
        global_batch=args.global_batch,
        seq_len=args.seq_len,
        precision=args.precision,
        efficiency=args.efficiency,
        attention=args.attention,
        memory_recipe=recipe,
        tp_overlap=tp_overlap(args),
        **compute_options(args),
    )


def _estimate(args, cl, row, recipe):
    from .. import training

    partial = {} if row.get("recompute_layers") is None else {"recompute_layers": row["recompute_layers"]}
    return training.estimate(args.model, cl, **{k: row[k] for k in _DEGREES}, **partial, **_given(args, recipe))


#: The planner's columns that make a configuration (with the model, batch, sequence and recipe).
_DEGREES = (
    "dp",
    "tp",
    "cp",
    "pp",
    "chunks",
    "micro_batch_size",
    "zero",
    "recompute",
    "sequence_parallel",
    "schedule",
)


def _candidates(args, cl, fmt):
    """Every feasible configuration of the planner under each memory recipe the engine runs (distlab.export.
    engine_recipes), fastest first: (step time, rank, recipe, row). The engine's recipe, never the teaching one,
    decides what fits, so --best cannot write a layout the engine's own recipe refuses."""
    from .. import export, planner
    from ._configuration import moe_routing

    rows, total, fitting = [], 0, 0
    for recipe in export.engine_recipes(fmt, args.memory_recipe):
        routing = moe_routing(args) if str(args.model).strip().lower() in _moe_models() else {}
        partial = dict(partial_recompute=args.partial_recompute)
        p = planner.plan(args.model, cl, **_given(args, recipe), **partial, **routing)
        total, fitting = total + len(p), fitting + p.feasible_count
        for rank in range(p.feasible_count):  # feasible rows come first in the ranking
            row = p.row(rank)
            rows.append((row["step_time_s"], len(rows), recipe, row))
    rows.sort(key=lambda r: (r[0], r[1]))
    return rows, total, fitting


def run(args) -> int:
    from .. import export, training
    from ..errors import ConfigurationError
    from ._configuration import activation_offload, cluster, compute_options, config

    cl = cluster(args)
    moe_model = str(args.model).strip().lower() in _moe_models()
    if activation_offload(args) and (args.best or moe_model):
        raise ConfigurationError(
            "--activation-offload-layers applies to a given dense configuration: the planner (--best) does not "
            "search activation offloading, and the MoE export does not price it"
        )
    if not args.overlap_param_gather and (args.best or moe_model):
        raise ConfigurationError(
            "--no-overlap-param-gather applies to a given dense configuration: the planner (--best) and the MoE "
            "export price the parameter all-gather as each engine runs it (under the forward; DeepSpeed's after the "
            "optimizer step, exposed)"
        )
    if moe_model:
        return _run_moe(args, cl)
    if (
        args.ep != 1
        or args.etp is not None
        or args.capacity_factor is not None
        or args.max_nodes_per_token is not None
        or args.moe_imbalance != 1.0
    ):
        raise ConfigurationError(
            "--ep, --etp, --moe-imbalance, --capacity-factor and --max-nodes-per-token apply to mixture-of-experts models"
        )
    fmt = str(args.format).strip().lower()
    if fmt not in export.FORMATS:
        raise ConfigurationError(f"--format {args.format!r}; valid: {', '.join(export.FORMATS)}")
    if not args.best:
        if args.partial_recompute:
            raise ConfigurationError(
                "--partial-recompute applies to --best (the planner's search); for a given configuration use "
                "--recompute full --recompute-layers N"
            )
        given = dict(config(args), **compute_options(args), **activation_offload(args))
        given["memory_recipe"] = export.engine_recipe(fmt, given.get("zero", 0), args.memory_recipe)
        est = training.estimate(args.model, cl, **given)
        if not est.feasible:
            raise ConfigurationError(
                f"this configuration cannot run with {fmt}'s memory recipe {given['memory_recipe']!r}: "
                f"{est.explain()}; see `distlab estimate` for fixes, or use --best"
            )
        print(export.export(est, fmt, cl.node.gpus_per_node))
        return 0
    rows, total, fitting = _candidates(args, cl, fmt)
    skipped = 0
    for _, _, recipe, row in rows:
        est = _estimate(args, cl, row, recipe)
        try:
            text = export.export(est, fmt, cl.node.gpus_per_node)
        except ConfigurationError:
            skipped += 1  # e.g. ZeRO-2 with a pipeline for DeepSpeed: the next row
            continue
        if skipped:
            import sys

            print(f"# {counted(skipped, 'faster configuration')} skipped: {fmt} cannot express them", file=sys.stderr)
        print(text)
        return 0
    raise ConfigurationError(
        f"no feasible configuration that {fmt} can express ({fitting} of {total} fit in memory with "
        f"{fmt}'s memory recipes: {', '.join(export.engine_recipes(fmt, args.memory_recipe))})"
    )


def _moe_models():
    from ..moe import MOE_MODELS

    return MOE_MODELS


def _run_moe(args, cl) -> int:
    """An MoE configuration through distlab.moe.moe_config and export_moe; --best: the planner's fastest feasible
    row that moe_config accepts and the format can express (context parallelism is not exported for MoE)."""
    from .. import moe
    from ..errors import ConfigurationError

    if args.best:
        return _best_moe(args, cl)
    gpus = cl.gpus
    dp = args.dp if args.dp is not None else None
    config = moe.moe_config(
        args.model,
        gpus,
        tp=args.tp,
        pp=args.pp,
        ep=args.ep,
        etp=args.etp,
        micro_batch=args.micro_batch_size or 1,
        global_batch=args.global_batch,
        seq_len=args.seq_len,
        capacity_factor=args.capacity_factor,
        max_nodes=args.max_nodes_per_token,
        gpus_per_node=cl.gpus_per_node,
        expert_gemm=args.expert_gemm,
    )
    if dp is not None and dp != config.dp:
        raise ConfigurationError(f"--dp {dp}: {gpus} GPUs with tp={args.tp} pp={args.pp} give dp={config.dp}")
    print(moe.export_moe(config, args.format))
    return 0


def _best_moe(args, cl) -> int:
    from .. import moe
    from ..errors import ConfigurationError

    fmt = str(args.format).strip().lower()
    rows, total, fitting = _candidates(args, cl, fmt)
    skipped, refused = 0, set()  # refused: the layouts the format could not express (rows differ in more than that)
    for rank, (_, _, recipe, row) in enumerate(rows):
        layout = (row["tp"], row["pp"], row["ep"], row["etp"], row["micro_batch_size"])
        if row["cp"] > 1 or layout in refused:
            skipped += 1
            continue
        try:
            config = moe.moe_config(
                args.model,
                cl.gpus,
                tp=row["tp"],
                pp=row["pp"],
                ep=row["ep"],
                etp=row["etp"],
                micro_batch=row["micro_batch_size"],
                global_batch=args.global_batch,
                seq_len=args.seq_len,
                capacity_factor=args.capacity_factor,
                max_nodes=args.max_nodes_per_token,
                gpus_per_node=cl.gpus_per_node,
                expert_gemm=args.expert_gemm,
            )
            text = moe.export_moe(config, args.format)
        except ConfigurationError:
            skipped += 1
            refused.add(layout)
            continue
        import sys

        if skipped:
            print(
                f"# {counted(skipped, 'faster configuration')} skipped: {args.format} cannot express them",
                file=sys.stderr,
            )
        print(
            f"# planner row {rank + 1}: ZeRO-{row['zero']} ({recipe}), recompute {row['recompute']}, "
            f"{row['schedule']}"
            + (f" v={row['chunks']}" if row["chunks"] > 1 else "")
            + " (set these in the engine too)",
            file=sys.stderr,
        )
        print(text)
        return 0
    raise ConfigurationError(
        f"no feasible MoE configuration that {args.format} can express ({fitting} of {total} fit in memory with "
        f"{fmt}'s memory recipes)"
    )
