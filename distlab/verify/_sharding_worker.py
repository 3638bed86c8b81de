"""The processes of distlab.verify.measure_sharding: python -m distlab.verify._sharding_worker CONFIG_JSON.

Spawns `world` gloo ranks (torch.multiprocessing) that meet through a FileStore; for each mode of
config["modes"] in turn, each builds the same small stack of linear layers, wraps it as DDP, FSDP2 (fully_shard per
layer) or HSDP (fully_shard on a 2-D DeviceMesh, replicate x shard), trains `steps` Adam steps on its slice of one
global batch, and writes <mode>-rank<r>.json: its local parameter and optimizer-state bytes, the collectives FSDP2
issued in the first step (counted by wrapping torch.distributed's all_gather_single, reduce_scatter_single and
all_reduce, unwrapped again after the mode) and the loss of every step. One set of ranks runs every mode, forked
from this process after it imported torch: each process start importing torch took most of the time when each mode
had its own set, and then when each rank was spawned.
"""

from __future__ import annotations

import json
import sys
from typing import Any
from pathlib import Path


def _rank(rank: int, config: dict) -> None:
    import torch.distributed as dist

    from distlab.verify._torch import join_gloo_group

    join_gloo_group(rank, config["world"], config["store"], config["timeout"], store_timeout=False)
    for mode in config["modes"]:
        originals = (dist.all_gather_single, dist.reduce_scatter_single, dist.all_reduce)
        try:
            _train(rank, mode, config)
        finally:
            dist.all_gather_single, dist.reduce_scatter_single, dist.all_reduce = originals
        dist.barrier()
    dist.destroy_process_group()


def _train(rank: int, mode: str, config: dict) -> None:
    """One mode on this rank: build, wrap, train and write <mode>-rank<rank>.json (see the module notes)."""
    import torch
    import torch.distributed as dist

    world, layers, width = config["world"], config["layers"], config["width"]
    log = []

    def counted(op, original, size_of):
        def call(*args, **kwargs):
            group = kwargs.get("group")
            log.append([op, size_of(*args, **kwargs), dist.get_world_size(group)])
            return original(*args, **kwargs)

        return call

    torch.manual_seed(0)
    model: Any = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(layers)])
    if mode == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        model = DistributedDataParallel(model)
    else:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        if mode == "hsdp":
            shard = config["per_node"]
            mesh = init_device_mesh("cpu", (world // shard, shard), mesh_dim_names=("replicate", "shard"))
        else:
            mesh = init_device_mesh("cpu", (world,))
        for i, layer in enumerate(model):  # torchtitan: the last layer is not resharded after forward
            fully_shard(layer, mesh=mesh, reshard_after_forward=i < layers - 1)
        fully_shard(model, mesh=mesh)
        dist.all_gather_single = counted(
            "all-gather", dist.all_gather_single, lambda out, inp, **kw: out.numel() * out.element_size()
        )
        dist.reduce_scatter_single = counted(
            "reduce-scatter", dist.reduce_scatter_single, lambda **kw: kw["input"].numel() * kw["input"].element_size()
        )
        dist.all_reduce = counted("all-reduce", dist.all_reduce, lambda t, *a, **kw: t.numel() * t.element_size())
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    generator = torch.Generator().manual_seed(1)
    batch = torch.randn(config["batch"], width, generator=generator)
    per_rank = config["batch"] // world
    x = batch[rank * per_rank : (rank + 1) * per_rank]
    losses, first_step = [], None
    for _ in range(config["steps"]):
        loss = model(x).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if first_step is None:
            first_step = list(log)
        total = loss.detach().clone()
        dist.all_reduce(total)  # the mean over ranks = the loss of the global batch
        losses.append(float(total) / world)

    def local(t):
        return t.to_local() if hasattr(t, "to_local") else t

    param_bytes = sum(local(p).numel() * local(p).element_size() for p in model.parameters())
    state_bytes = sum(
        local(v).numel() * local(v).element_size()
        for s in optimizer.state.values()
        for k, v in s.items()
        if k in ("exp_avg", "exp_avg_sq")
    )
    Path(config["dir"], f"{mode}-rank{rank}.json").write_text(
        json.dumps(
            dict(param_bytes=param_bytes, optimizer_bytes=state_bytes, collectives=first_step or [], losses=losses)
        )
    )


def main(config: dict) -> None:
    """Fork the `world` ranks from this process once it has imported what they use: torch is imported once, not once
    per rank (spawn), as a CPU DataLoader forks its workers after torch is imported. This process runs nothing else
    (no torch op, no thread of its own) before the fork."""
    import torch.distributed.device_mesh  # noqa: F401 - imported here for every rank
    import torch.distributed.fsdp  # noqa: F401
    import torch.multiprocessing as mp
    import torch.nn.parallel  # noqa: F401

    mp.start_processes(_rank, args=(config,), nprocs=config["world"], join=True, start_method="fork")


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
