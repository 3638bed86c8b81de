"""distlab mesh: the rank layout of DP x TP x PP (x CP x EP) and its groups (distlab.mesh)."""

from __future__ import annotations

import json

__all__ = ["NAME", "HELP", "add_arguments", "run"]

NAME = "mesh"
HELP = "rank layout of data, tensor, pipeline (context, expert) parallelism: groups and their nodes"


def add_arguments(parser) -> None:
    parser.add_argument("--gpus", type=int, help="world size; dp = gpus / (tp x pp x cp x ep) unless --dp is given")
    parser.add_argument("--tp", type=int, default=1, help="tensor-parallel degree (default 1)")
    parser.add_argument("--pp", type=int, default=1, help="pipeline-parallel degree (default 1)")
    parser.add_argument("--dp", type=int, default=None, help="data-parallel degree (default: derived from --gpus)")
    parser.add_argument("--cp", type=int, default=1, help="context-parallel degree (default 1)")
    parser.add_argument("--ep", type=int, default=1, help="expert-parallel degree (default 1)")
    parser.add_argument("--gpus-per-node", type=int, default=8, help="GPUs per node for the placement (default 8)")
    parser.add_argument(
        "--order", default="tp-cp-ep-dp-pp", help="Megatron-LM order, leftmost varies fastest (default tp-cp-ep-dp-pp)"
    )
    parser.add_argument("--rank", type=int, default=None, help="also show this rank's coordinates and groups")
    parser.add_argument("--max-groups", type=int, default=8, help="groups listed per dimension in text (default 8)")
    parser.add_argument("--json", action="store_true", help="print a JSON object with every group")


def run(args) -> int:
    from .. import mesh
    from ..errors import ConfigurationError

    lay = mesh.layout(
        args.gpus,
        tp=args.tp,
        pp=args.pp,
        dp=args.dp,
        cp=args.cp,
        ep=args.ep,
        order=args.order,
        gpus_per_node=args.gpus_per_node,
    )
    if args.max_groups < 1:
        raise ConfigurationError(f"--max-groups {args.max_groups} must be at least 1")
    picked = None
    if args.rank is not None:
        coords = lay.coords(args.rank)
        picked = {
            "rank": args.rank,
            "node": lay.node_of(args.rank),
            "coords": coords,
            "groups": {d: lay.group_of(args.rank, d) for d in mesh.DIMENSIONS if lay.sizes[d] > 1},
        }
    if args.json:
        data = lay.to_dict()
        if picked is not None:
            data["rank"] = picked
        print(json.dumps(data, indent=1))
        return 0
    print(lay.describe(max_groups=args.max_groups))
    if picked is not None:
        where = ", ".join(f"{d} {c}" for d, c in picked["coords"].items() if lay.sizes[d] > 1) or "one GPU"
        print(f"rank {args.rank} on node {picked['node']}: {where}")
        for d, group in picked["groups"].items():
            print(f"  {d} group: {group}")
    return 0
