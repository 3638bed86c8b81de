"""One rank of distlab.verify.measure_all_to_all: main(config), forked by distlab.verify._forked.

Joins a gloo process group through the parent's FileStore, routes its tokens with distlab.moe.simulate_routing
(the same seed on every rank, so every rank knows every split), sends each token copy to the rank holding its
expert with dist.all_to_all_single, checks what arrived, times the exchange for every hidden size, and (rank 0)
writes the results to ``result.json``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def main(config: dict) -> None:
    import numpy as np
    import torch

    from distlab import moe
    from distlab.verify._torch import join_gloo_group

    rank, world, work = config["rank"], config["world"], Path(config["dir"])
    dist = join_gloo_group(rank, world, config["store"], config["timeout"])
    (work / f"ready{rank}").touch()
    t, e, k = config["tokens_per_rank"], config["experts"], config["top_k"]
    trace = moe.simulate_routing(t, e, k, world, hidden=1, element_bytes=4, skew=config["skew"], seed=config["seed"])
    gpu_of_expert = np.arange(e) // (e // world)
    mine = trace.source == rank
    token_ids = np.repeat(np.nonzero(mine)[0], k)
    destinations = gpu_of_expert[trace.choices[mine]].ravel()
    order = np.argsort(destinations, kind="stable")  # rows grouped by destination rank, token order inside
    send_counts = np.bincount(destinations, minlength=world)
    # what every rank sends this one: rows of (source rank, token id), known from the shared routing
    all_dest = gpu_of_expert[trace.choices].ravel()
    all_src = np.repeat(trace.source, k)
    recv_counts = np.bincount(all_src[all_dest == rank], minlength=world)
    sent_bytes, received_ok, times = [], True, []
    for hidden in config["hiddens"]:
        payload = torch.zeros(len(order), hidden, dtype=torch.float32)
        payload[:, 0] = float(rank)
        payload[:, 1 % hidden] = torch.from_numpy(token_ids[order].astype(np.float32)) if hidden > 1 else payload[:, 0]
        out = torch.empty(int(recv_counts.sum()), hidden, dtype=torch.float32)
        samples = []
        for i in range(config["warmup"] + config["repeats"]):
            dist.barrier()
            start = time.perf_counter()
            dist.all_to_all_single(
                out, payload, output_split_sizes=recv_counts.tolist(), input_split_sizes=send_counts.tolist()
            )
            elapsed = time.perf_counter() - start
            if i >= config["warmup"]:
                samples.append(elapsed)
        sources = out[:, 0].numpy()
        received_ok &= bool(np.array_equal(sources, np.repeat(np.arange(world), recv_counts)))
        sent_bytes.append((send_counts * hidden * payload.element_size()).tolist())
        times.append(samples)
    gathered = [None] * world if rank == 0 else None
    dist.gather_object(dict(sent=sent_bytes, ok=received_ok, times=times), gathered, dst=0)
    if rank == 0:
        partial = work / "result.json.partial"
        partial.write_text(json.dumps({"ranks": gathered}))
        partial.replace(work / "result.json")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
