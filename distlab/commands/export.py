"""distlab export: a configuration as Megatron-LM flags, a DeepSpeed config JSON or a torchtitan TOML (distlab.export)."""

from __future__ import annotations

__all__ = ["NAME", "HELP", "add_arguments", "run"]

NAME = "export"
HELP = "write a configuration (given, or --best from the planner) for Megatron-LM, DeepSpeed or torchtitan"


def add_arguments(cmd) -> None:
    from ..export import FORMATS
    from ._configuration import add_cluster_arguments, add_config_arguments

    cmd.add_argument("--format", required=True, help=f"engine: {', '.join(FORMATS)}")
    add_cluster_arguments(cmd)
    add_config_arguments(cmd)
    cmd.add_argument("--best", action="store_true",
                     help="export the planner's fastest feasible configuration that the engine can express "
                          "(the configuration options are then ignored)")


def run(args) -> int:
    from .. import export, planner, training
    from ..errors import ConfigurationError
    from ._configuration import cluster, config

    cl = cluster(args)
    fmt = str(args.format).strip().lower()
    if fmt not in export.FORMATS:
        raise ConfigurationError(f"--format {args.format!r}; valid: {', '.join(export.FORMATS)}")
    if not args.best:
        est = training.estimate(args.model, cl, **config(args))
        if not est.feasible:
            raise ConfigurationError(f"this configuration cannot run: {est.explain()}; "
                                     f"see `distlab estimate` for fixes, or use --best")
        print(export.export(est, fmt, cl.node.gpus_per_node))
        return 0
    p = planner.plan(args.model, cl, global_batch=args.global_batch, seq_len=args.seq, precision=args.precision,
                     efficiency=args.efficiency)
    skipped = 0
    for rank in range(p.feasible_count):  # feasible rows come first in the ranking
        row = p.row(rank)
        est = training.estimate(args.model, cl, global_batch=args.global_batch, seq_len=args.seq, dp=row["dp"],
                                tp=row["tp"], pp=row["pp"], chunks=row["chunks"],
                                micro_batch_size=row["micro_batch_size"], zero=row["zero"],
                                recompute=row["recompute"], sequence_parallel=row["sequence_parallel"],
                                schedule=row["schedule"], precision=args.precision, efficiency=args.efficiency)
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
    raise ConfigurationError(f"no feasible configuration that {fmt} can express "
                             f"({p.feasible_count} of {len(p)} fit in memory)")
