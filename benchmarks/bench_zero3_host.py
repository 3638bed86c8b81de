"""Host work per rank of DeepSpeed 2021 ZeRO-3's per-tensor collectives (issue 30), measured with torch on the CPU.

DeepSpeed v0.3.13-v0.4.0 (microsoft/DeepSpeed tag v0.3.13, commit 12a53b43) gathers every parameter on its own
all_gather over the whole data-parallel group and reduce-scatters every gradient on its own reduce_scatter; each
call runs a Python loop over the world's ranks (partition_parameters.py `_allgather_param`, `_reduce_scatter_gradient`),
and PyTorch's ProcessGroupNCCL then copies the list's entries rank by rank into or out of its flat buffer (one
`copy_` on a CUDA tensor each). What this script times, per rank and per collective, on this machine's CPU:

1. `gather_loop`: one iteration of `_allgather_param`'s loop: `flat.narrow(0, p * i, p)` appended to a list and
   `i == torch.distributed.get_rank(group=...)` (a process group of one rank, gloo, this process only).
2. `reduce_scatter_loop`: one iteration of `_reduce_scatter_gradient`'s loop: the start/end arithmetic and test,
   `param.grad.view(-1).narrow(0, start, p)` appended to a list.
3. `copy_dispatch`: one `copy_` of a small view into another, dispatched from C++ over a list of world-size
   entries (`torch._foreach_copy_` on CPU tensors, whose CPU path is a C++ loop of `copy_`): ATen's dispatch and
   TensorIterator set-up of a copy, without the CUDA driver's cudaMemcpyAsync (not measurable here) and with a
   16-element CPU memcpy in place of the device copy.

Each figure is the median (and p95) over `--repeats` timings of a loop over `--ranks` ranks, divided by the ranks,
on the calling thread's CPU time (time.thread_time_ns: another process's load does not count) and on the wall
clock (time.perf_counter_ns). Nothing here is the CUDA launch itself: distlab takes that from a published figure
(step.data_parallel.DEEPSPEED_2021_HOST_PER_RANK_S).

    python benchmarks/bench_zero3_host.py [--ranks 1536] [--repeats 200]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time


def _stats(samples_ns: list[int], ranks: int) -> tuple[float, float]:
    """(median, p95) in microseconds per rank."""
    ordered = sorted(samples_ns)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    return statistics.median(ordered) / ranks / 1e3, p95 / ranks / 1e3


def _time(fn, repeats: int) -> tuple[list[int], list[int]]:
    """Thread-CPU and wall nanoseconds of `repeats` calls of fn (after 5 warm-up calls)."""
    for _ in range(5):
        fn()
    cpu, wall = [], []
    for _ in range(repeats):
        c0, w0 = time.thread_time_ns(), time.perf_counter_ns()
        fn()
        w1, c1 = time.perf_counter_ns(), time.thread_time_ns()
        cpu.append(c1 - c0)
        wall.append(w1 - w0)
    return cpu, wall


def measure(ranks: int = 1536, repeats: int = 200, partition: int = 16) -> dict[str, dict[str, float]]:
    """Per-rank microseconds of the three loops above: name -> {cpu_median, cpu_p95, wall_median, wall_p95}."""
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    if not dist.is_initialized():
        store = dist.FileStore(os.path.join(tempfile.mkdtemp(), "store"), 1)
        dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    group = dist.new_group([0])  # DeepSpeed's engine builds its data-parallel group with new_group
    flat = torch.zeros(partition * ranks, dtype=torch.float16)
    param = torch.nn.Parameter(torch.zeros(partition * ranks, dtype=torch.float16))
    param.grad = torch.zeros_like(param)
    numel = param.numel()

    def gather_loop():  # partition_parameters.py _allgather_param's loop (v0.3.13), its copy branch never taken
        partitions = []
        for i in range(ranks):
            partitions.append(flat.narrow(0, partition * i, partition))
            if i == dist.get_rank(group=group) - 1:  # the rank's own slot: never (its one copy_ is not per rank)
                pass

    def reduce_scatter_loop():  # partition_parameters.py _reduce_scatter_gradient's loop (v0.3.13)
        input_list = []
        for i in range(ranks):
            start = i * partition
            end = start + partition
            if start < numel and end <= numel:
                tensor = param.grad.view(-1).narrow(0, start, partition)
            input_list.append(tensor)

    sources = list(flat.split(partition))
    targets = [torch.empty(partition, dtype=torch.float16) for _ in range(ranks)]

    def copy_dispatch():  # ProcessGroupNCCL's per-rank copy_ of a list all_gather's output, dispatched from C++
        torch._foreach_copy_(targets, sources, non_blocking=True)

    out = {}
    for name, fn in (
        ("gather_loop", gather_loop),
        ("reduce_scatter_loop", reduce_scatter_loop),
        ("copy_dispatch", copy_dispatch),
    ):
        cpu, wall = _time(fn, repeats)
        cpu_median, cpu_p95 = _stats(cpu, ranks)
        wall_median, wall_p95 = _stats(wall, ranks)
        out[name] = dict(cpu_median=cpu_median, cpu_p95=cpu_p95, wall_median=wall_median, wall_p95=wall_p95)
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, default=1536, help="data-parallel ranks a loop runs over (1536)")
    parser.add_argument("--repeats", type=int, default=200, help="timed loops per figure (200)")
    args = parser.parse_args(argv)
    if args.ranks < 1 or args.repeats < 1:
        parser.error("--ranks and --repeats must be at least 1")
    import torch

    load = os.getloadavg()[0]
    print(
        f"machine: {platform.machine()} {platform.processor() or ''} {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, torch {torch.__version__}; load {load:.2f} before"
    )
    result = measure(args.ranks, args.repeats)
    print(
        f"per rank and collective, microseconds ({args.ranks} ranks, {args.repeats} loops; load "
        f"{os.getloadavg()[0]:.2f} after)"
    )
    print(f"{'loop':<22}{'cpu median':>12}{'cpu p95':>10}{'wall median':>13}{'wall p95':>10}")
    for name, r in result.items():
        print(f"{name:<22}{r['cpu_median']:>12.3f}{r['cpu_p95']:>10.3f}{r['wall_median']:>13.3f}{r['wall_p95']:>10.3f}")
    python = result["gather_loop"]["cpu_median"] + result["reduce_scatter_loop"]["cpu_median"]
    print(f"DeepSpeed's Python per rank, a gather and a reduce-scatter averaged: {python / 2:.3f} us (thread CPU)")


if __name__ == "__main__":
    main()
