"""One rank of distlab.verify.measure_all_reduce: python -m distlab.verify._allreduce_worker CONFIG_JSON.

Joins a gloo process group on 127.0.0.1 through the parent's TCPStore, times dist.all_reduce
for every group size and message size, and (rank 0) prints the results as one JSON line.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import timedelta


def main(config: dict) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    rank, world = config["rank"], config["world"]
    store = dist.TCPStore("127.0.0.1", config["port"], world + 1, is_master=False,
                          timeout=timedelta(seconds=config["timeout"]))
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world,
                            timeout=timedelta(seconds=config["timeout"]))
    # every rank must create every group, members or not
    groups = {n: (dist.group.WORLD if n == world else dist.new_group(list(range(n))))
              for n in config["world_sizes"]}
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
    gathered = [None] * world if rank == 0 else None
    dist.gather_object(times, gathered, dst=0)
    if rank == 0:
        print(json.dumps({"times": [{str(k): v for k, v in t.items()} for t in gathered]}), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
