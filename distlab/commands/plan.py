"""distlab plan: every valid parallel configuration of a cluster, ranked (distlab.planner)."""

from __future__ import annotations

import json

__all__ = ["NAME", "HELP", "add_arguments", "run"]

NAME = "plan"
HELP = "rank every valid dp x tp x pp configuration (with micro-batch, ZeRO, recomputation, schedule) by step time"


def add_arguments(cmd) -> None:
    from ._configuration import add_cluster_arguments

    add_cluster_arguments(cmd)
    cmd.add_argument("--top", type=int, default=10, help="rows to show (default 10)")
    cmd.add_argument("--json", action="store_true",
                     help="print a JSON list of the top rows: dp, tp, pp, chunks, microbatches, micro_batch_size, zero, "
                          "recompute, sequence_parallel, schedule, step_time_s, mfu, memory_per_gpu_bytes, fits")


def run(args) -> int:
    from .. import planner
    from ..errors import ConfigurationError
    from ._configuration import cluster

    if args.top < 1:
        raise ConfigurationError(f"--top {args.top} must be at least 1")
    p = planner.plan(args.model, cluster(args), global_batch=args.global_batch, seq_len=args.seq,
                     precision=args.precision, efficiency=args.efficiency)
    if args.json:
        print(json.dumps(p.top(args.top), indent=2))
        return 0
    print(p.summary())
    print(p.table(args.top))
    if p.feasible_count == 0:
        print("no configuration fits: try more GPUs, a smaller global batch or sequence")
    return 0
