"""distlab triage: what to do when a configuration runs out of memory (distlab.triage.oom_triage).

The single fixes from the given configuration and the production ladder (smaller micro-batch with more
accumulation, selective then full recomputation, ZeRO stages, more TP, more PP), each priced by
re-running the step model; the cluster and configuration options are distlab estimate's.
"""

from __future__ import annotations

import json

from ._configuration import add_cluster_arguments, add_config_arguments, cluster, config
from .._words import counted

__all__ = ["NAME", "HELP", "add_arguments", "run"]

NAME = "triage"
HELP = "out-of-memory triage: the fixes production tries, in order, each priced by re-running the step model"


def add_arguments(cmd) -> None:
    add_cluster_arguments(cmd)
    add_config_arguments(cmd)
    cmd.add_argument(
        "--json", action="store_true", help="print a JSON object: already_fits, base, fixes, ladder, first_fit"
    )


def run(args) -> int:
    from ..triage import oom_triage

    cl = cluster(args)
    result = oom_triage(args.model, cl, **config(args))
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
        return 0
    c = result.base.config
    print(f"{c['model']} on {cl.describe()}")
    print(
        f"dp={c['dp']} tp={c['tp']} pp={c['pp']}, micro-batch {c['micro_batch_size']} "
        f"({counted(c['microbatches'], 'microbatch')}), ZeRO-{c['zero']}, recompute {c['recompute']}"
        + (", sequence parallel" if c["sequence_parallel"] else "")
    )
    print(result.summary())
    return 0
