"""distlab collective: bytes and alpha-beta time of one collective (distlab.collectives)."""

from __future__ import annotations

import json

from ..errors import ConfigurationError

__all__ = ["NAME", "HELP", "add_arguments", "run"]

NAME = "collective"
HELP = "bytes per GPU and time of a collective (all-reduce, all-gather, ...) over a link"


def add_arguments(parser) -> None:
    parser.add_argument(
        "--op",
        default="all-reduce",
        help="all-reduce (default), reduce-scatter, all-gather, broadcast, reduce, scatter, gather, "
        "all-to-all, send-recv",
    )
    parser.add_argument(
        "--size", required=True, help="message size M in the nccl-tests convention, e.g. 14GB, '4 GiB', 1e9 (bytes)"
    )
    parser.add_argument("--gpus", type=int, required=True, help="number of GPUs N")
    parser.add_argument("--link", help="link name, e.g. nvlink4, ib-ndr (see distlab.hardware.LINKS)")
    parser.add_argument(
        "--bandwidth", help="per-direction bandwidth instead of (or overriding) the link's, e.g. '450 GB/s'"
    )
    parser.add_argument("--latency", help="per-step latency alpha overriding the link's, e.g. '5 us'")
    parser.add_argument(
        "--algorithm",
        default=None,
        help="ring, tree, hierarchical, parameter-server, ... (default: the op's first, ring)",
    )
    parser.add_argument("--gpus-per-node", type=int, default=None, help="for --algorithm hierarchical")
    parser.add_argument("--inter-link", default=None, help="link between nodes, for --algorithm hierarchical")
    parser.add_argument("--json", action="store_true", help="print a JSON object (bytes and seconds as plain numbers)")


def run(args) -> int:
    from .. import collectives

    if args.link is None and args.bandwidth is None:
        raise ConfigurationError("give --link NAME (e.g. nvlink4, ib-ndr) or --bandwidth, e.g. '450 GB/s'")
    cost = collectives.collective_cost(
        args.op,
        args.size,
        args.gpus,
        algorithm=args.algorithm,
        link=args.link,
        bandwidth=args.bandwidth,
        latency=args.latency,
        gpus_per_node=args.gpus_per_node,
        inter_link=args.inter_link,
    )
    if args.json:
        data = cost.to_dict()
        data["link"] = args.link
        if cost.time_s > 0:
            data["algbw_gbps"] = collectives.algorithm_bandwidth(cost.size_bytes, cost.time_s).magnitude
            data["busbw_gbps"] = collectives.bus_bandwidth(cost.op, cost.size_bytes, cost.time_s, cost.gpus).magnitude
        print(json.dumps(data, indent=2))
        return 0
    print(cost)
    if len(cost.phases) > 1:
        from ..units import format_bytes, format_seconds

        for phase in cost.phases:
            print(
                f"  {phase.name:<28}{phase.gpus:>5} GPUs  {format_bytes(phase.bytes_sent_per_gpu):>9} sent per GPU"
                f"  {format_seconds(phase.time_s):>9}"
            )
    return 0
