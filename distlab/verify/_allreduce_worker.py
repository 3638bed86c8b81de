"""One rank of distlab.verify.measure_all_reduce: main(config), forked by distlab.verify._forked.

Joins a gloo process group through the parent's FileStore (a file in its temporary directory),
touches ``ready<rank>`` there once the groups exist, times dist.all_reduce for every group size
and message size, and (rank 0) writes the results to ``result.json``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any
from pathlib import Path


def main(config: dict) -> None:
    import torch

    from distlab.verify._torch import join_gloo_group
    from distlab.verify.allreduce import FAIL_RANK_ENV

    rank, world, work = config["rank"], config["world"], Path(config["dir"])
    dist = join_gloo_group(rank, world, config["store"], config["timeout"])
    # every rank must create every group, members or not
    groups = {n: (dist.group.WORLD if n == world else dist.new_group(list(range(n)))) for n in config["world_sizes"]}
    (work / f"ready{rank}").touch()
    if os.environ.get(FAIL_RANK_ENV) == str(rank):  # test hook: fail once the group is joined
        raise RuntimeError(f"rank {rank} fails on purpose ({FAIL_RANK_ENV})")
    times: dict = {}
    for n in config["world_sizes"]:
        if rank < n:
            group = groups[n]
            per_size = []
            for size, repeats in zip(config["sizes"], config["repeats"]):
                tensor = torch.zeros(size // 4, dtype=torch.float32)  # zeros: the sums stay finite
                samples = []
                for i in range(config["warmup"] + repeats):
                    dist.barrier(group=group)
                    start = time.perf_counter()
                    dist.all_reduce(tensor, group=group)
                    elapsed = time.perf_counter() - start
                    if i >= config["warmup"]:
                        samples.append(elapsed)
                per_size.append(samples)
            times[n] = per_size
        dist.barrier()
    gathered: list[Any] | None = [None] * world if rank == 0 else None
    dist.gather_object(times, gathered, dst=0)
    if gathered is not None:  # rank 0
        partial = work / "result.json.partial"
        partial.write_text(json.dumps({"times": [{str(k): v for k, v in t.items()} for t in gathered]}))
        partial.replace(work / "result.json")  # appears whole or not at all
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
