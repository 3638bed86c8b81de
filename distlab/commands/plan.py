"""distlab plan: every valid parallel configuration of a cluster, ranked (distlab.planner)."""

from __future__ import annotations

import json

__all__ = ["NAME", "HELP", "add_arguments", "run"]

NAME = "plan"
HELP = "rank every valid dp x tp x pp configuration (with micro-batch, ZeRO, recomputation, schedule) by step time"


def add_arguments(cmd) -> None:
    from ._configuration import (
        add_cluster_arguments,
        add_compute_arguments,
        add_fp8_attention_argument,
        add_moe_routing_arguments,
        add_tp_overlap_argument,
    )

    add_cluster_arguments(cmd)
    add_compute_arguments(cmd)
    add_fp8_attention_argument(cmd)
    add_tp_overlap_argument(cmd)
    add_moe_routing_arguments(cmd)
    cmd.add_argument(
        "--partial-recompute",
        action="store_true",
        help="price each configuration with full recomputation at the fewest layers per stage chunk that fit "
        "(Megatron-LM --recompute-method block; the table shows full:N; dense models only)",
    )
    cmd.add_argument("--top", type=int, default=10, help="rows to show (default 10)")
    cmd.add_argument(
        "--json",
        action="store_true",
        help="print a JSON list of the top rows: dp, tp, pp, chunks, microbatches, micro_batch_size, zero, "
        "recompute, sequence_parallel, schedule, step_time_s, mfu, memory_per_gpu_bytes, fits (and "
        "recompute_layers with --partial-recompute)",
    )


def run(args) -> int:
    from .. import planner
    from ..errors import ConfigurationError
    from ._configuration import cluster, compute_options, moe_routing, tp_overlap

    if args.top < 1:
        raise ConfigurationError(f"--top {args.top} must be at least 1")
    p = planner.plan(
        args.model,
        cluster(args),
        global_batch=args.global_batch,
        seq_len=args.seq_len,
        precision=args.precision,
        efficiency=args.efficiency,
        attention=args.attention,
        memory_recipe=args.memory_recipe,
        tp_overlap=tp_overlap(args),
        partial_recompute=args.partial_recompute,
        **compute_options(args),
        **moe_routing(args),
    )
    if args.json:
        print(json.dumps(p.top(args.top), indent=2))
        return 0
    print(p.summary())
    print(p.table(args.top, ties=p.feasible_count > 0))
    if p.feasible_count == 0:
        print("no configuration fits: try more GPUs, a smaller global batch or sequence")
        return 0
    print(ties_report(p))
    return 0


def ties_report(p) -> str:
    """The error band, how many configurations tie with the fastest, and what decides between the fastest and
    the fastest tie with other (dp, tp, pp) degrees (else the runner-up tie)."""
    from ..units import format_seconds, wrap_text

    band = p.band_percent
    count = p.tie_count(0)
    found = p.extra.get("band")
    dense = getattr(found, "dense_for_moe", False)  # a mixture-of-experts plan: no MoE run validated
    if dense:
        runs = "dense validation runs (no mixture-of-experts run has been validated)"
    elif found is not None and not found.matched:  # none of this kind: the wider runs the band is borrowed from
        runs = f"{found.over} (none of this plan's kind validated yet)"
    else:
        runs = "validation runs like these"
    lines = [
        f"≈: within the model's error band of ±{band:.1f}% of the fastest (its mean |step-time error| on "
        f"{runs} it never saw; `distlab validate`): {count} tied configuration"
        + ("s" if count != 1 else "")
        + "; the model cannot rank them"
        + (
            ""
            if p.extra.get("calibrated", True)
            else " (the band is the calibrated model's, efficiency=None; a fixed efficiency is further off)"
        )
    ]
    if count > 1:
        first = p.row(0)
        degrees = (first["dp"], first["tp"], first["pp"])
        other = next((r for r in range(1, count) if (p.row(r)["dp"], p.row(r)["tp"], p.row(r)["pp"]) != degrees), 1)
        second = p.row(other)
        d = p.deciding_assumption(0, other)
        lines.append(
            f"fastest dp {first['dp']} x tp {first['tp']} x pp {first['pp']} (ZeRO-{first['zero']}) against "
            f"tie #{other + 1} dp {second['dp']} x tp {second['tp']} x pp {second['pp']} (ZeRO-{second['zero']}), "
            f"{format_seconds(d.step_time_difference_s)} slower: {' '.join(d.text().split())}"
        )
    # each sentence broken at spaces into lines of units.TEXT_WIDTH, continued indented
    return wrap_text("\n".join(lines))
