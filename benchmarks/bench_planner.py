"""Planner: every valid configuration of Llama-3.1-70B on 1,024 H100s (128 DGX nodes, NDR), median of repeats.

Target (issue 6): at least 10,000 configurations in <= 100 ms (>= 100,000 configurations/s). Also timed, with no
target: the same plan with partial_recompute=True (each fitting full-recompute row priced at the fewest recomputed
layers that fit, a bisection over N: distlab/planner_recompute.py).
"""

from __future__ import annotations

from _timing import repeat, report, summarize


def main(n: int = 15) -> None:
    from distlab import hardware, planner

    cluster = hardware.cluster("dgx-h100", 128, "ib-ndr")
    result = planner.plan("llama3.1-70b", cluster, global_batch=1024, seq_len=8192)  # warm-up
    count = len(result)
    stats = summarize(repeat(lambda i: planner.plan("llama3.1-70b", cluster, global_batch=1024, seq_len=8192), n))
    print(report(f"planner, {count} configurations, 1024 GPUs", stats, 100))
    print(f"{'':<48} {count / (stats['median_ms'] / 1e3):,.0f} configurations per second (target >= 100,000)")
    partial = summarize(
        repeat(lambda i: planner.plan("llama3.1-70b", cluster, global_batch=1024, seq_len=8192, partial_recompute=True), n)
    )
    print(f"planner, partial_recompute=True: median {partial['median_ms']:.2f} ms, p95 {partial['p95_ms']:.2f} ms, "
          f"{count / (partial['median_ms'] / 1e3):,.0f} configurations per second")


if __name__ == "__main__":
    from _timing import no_arguments

    no_arguments(__doc__)
    main()
