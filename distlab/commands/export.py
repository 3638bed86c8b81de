"""distlab export: a configuration as Megatron-LM flags, a DeepSpeed config JSON or a torchtitan TOML (distlab.export)."""

from __future__ import annotations

__all__ = ["NAME", "HELP", "add_arguments", "run"]

NAME = "export"
HELP = "write a configuration (given, or --best from the planner) for Megatron-LM, DeepSpeed or torchtitan"


def add_arguments(cmd) -> None:
    from ..export import FORMATS
    from ._configuration import add_cluster_arguments, add_config_arguments, add_moe_routing_arguments, hidden_alias

    cmd.add_argument("--format", required=True, help=f"engine: {', '.join(FORMATS)}")
    add_cluster_arguments(cmd)
    add_config_arguments(cmd)
    cmd.add_argument("--ep", type=int, default=1, help="expert-parallel degree (MoE models, distlab.moe)")
    cmd.add_argument("--etp", type=int, default=None, help="expert tensor-parallel degree (MoE; default tp)")
    add_moe_routing_arguments(cmd)
    hidden_alias(cmd, "--max-nodes", dest="max_nodes_per_token", type=int)  # the name before --max-nodes-per-token
    cmd.add_argument(
        "--best",
        action="store_true",
        help="export the planner's fastest feasible configuration that the engine can express "
        "(the configuration options are then ignored)",
    )


def _ranked(args, cl):
    """The planner's ranking for --best (dense and MoE alike): the model, batch, sequence, recipe and (MoE) routing
    given."""
    from .. import planner
    from ._configuration import moe_routing

    return planner.plan(
        args.model,
        cl,
        global_batch=args.global_batch,
        seq_len=args.seq_len,
        precision=args.precision,
        efficiency=args.efficiency,
        attention=args.attention,
        memory_recipe=args.memory_recipe,
        **(moe_routing(args) if str(args.model).strip().lower() in _moe_models() else {}),
    )


def run(args) -> int:
    from .. import export, training
    from ..errors import ConfigurationError
    from ._configuration import cluster, config

    cl = cluster(args)
    if str(args.model).strip().lower() in _moe_models():
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
        est = training.estimate(args.model, cl, **config(args))
        if not est.feasible:
            raise ConfigurationError(
                f"this configuration cannot run: {est.explain()}; see `distlab estimate` for fixes, or use --best"
            )
        print(export.export(est, fmt, cl.node.gpus_per_node))
        return 0
    p = _ranked(args, cl)
    skipped = 0
    for rank in range(p.feasible_count):  # feasible rows come first in the ranking
        row = p.row(rank)
        est = training.estimate(
            args.model,
            cl,
            global_batch=args.global_batch,
            seq_len=args.seq_len,
            dp=row["dp"],
            tp=row["tp"],
            cp=row["cp"],
            pp=row["pp"],
            chunks=row["chunks"],
            micro_batch_size=row["micro_batch_size"],
            zero=row["zero"],
            recompute=row["recompute"],
            sequence_parallel=row["sequence_parallel"],
            schedule=row["schedule"],
            precision=args.precision,
            efficiency=args.efficiency,
            attention=args.attention,
            memory_recipe=args.memory_recipe,
        )
        try:
            text = export.export(est, fmt, cl.node.gpus_per_node)
        except ConfigurationError:
            skipped += 1  # e.g. ZeRO-1 for torchtitan: the next row
            continue
        if skipped:
            import sys

            print(f"# {skipped} faster configuration(s) skipped: {fmt} cannot express them", file=sys.stderr)
        print(text)
        return 0
    raise ConfigurationError(
        f"no feasible configuration that {fmt} can express ({p.feasible_count} of {len(p)} fit in memory)"
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
    )
    if dp is not None and dp != config.dp:
        raise ConfigurationError(f"--dp {dp}: {gpus} GPUs with tp={args.tp} pp={args.pp} give dp={config.dp}")
    print(moe.export_moe(config, args.format))
    return 0


def _best_moe(args, cl) -> int:
    from .. import moe
    from ..errors import ConfigurationError

    p = _ranked(args, cl)
    skipped = 0
    for rank in range(p.feasible_count):  # feasible rows come first in the ranking
        row = p.row(rank)
        if row["cp"] > 1:
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
            )
            text = moe.export_moe(config, args.format)
        except ConfigurationError:
            skipped += 1
            continue
        import sys

        if skipped:
            print(f"# {skipped} faster configuration(s) skipped: {args.format} cannot express them", file=sys.stderr)
        print(
            f"# planner row {rank + 1}: ZeRO-{row['zero']}, recompute {row['recompute']}, {row['schedule']}"
            + (f" v={row['chunks']}" if row["chunks"] > 1 else "")
            + " (set these in the engine too)",
            file=sys.stderr,
        )
        print(text)
        return 0
    raise ConfigurationError(
        f"no feasible MoE configuration that {args.format} can express ({p.feasible_count} of {len(p)} fit in memory)"
    )
