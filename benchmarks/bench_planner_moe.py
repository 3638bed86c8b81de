"""Planner on mixture-of-experts models (issue 16): every valid configuration of DeepSeek-V3 on 2,048 H100s
(256 DGX nodes, NDR) with expert parallelism ep (every divisor of its 256 experts) and expert TP etp in {1, tp}
searched, and Mixtral-8x7B on 64 GPUs; median of repeats, and configurations per second.

Target (issue 16): the DeepSeek-V3 search in under 1 s. The dense planner's speed is benchmarks/bench_planner.py.
"""

from __future__ import annotations

from _timing import repeat, report, summarize


def main(n: int = 7) -> None:
    from distlab import hardware, planner

    cases = [("deepseek-v3", hardware.cluster("dgx-h100", 256, "ib-ndr"), 4096, 4096, "2,048 GPUs"),
             ("mixtral-8x7b", hardware.cluster("dgx-h100", 8, "ib-ndr"), 512, 4096, "64 GPUs")]
    for name, cluster, batch, seq, where in cases:
        def run(i, name=name, cluster=cluster, batch=batch, seq=seq):
            return planner.plan(name, cluster, global_batch=batch, seq_len=seq)

        count = len(run(0))  # warm-up
        stats = summarize(repeat(run, n))
        print(report(f"planner, {name}, {where}, {count:,} configurations", stats, 1000))
        print(f"{'':<48} {count / (stats['median_ms'] / 1e3):,.0f} configurations per second")


if __name__ == "__main__":
    from _timing import no_arguments

    no_arguments(__doc__)
    main()
