"""Where the step time goes in production: overlap, the network, FP8, context parallelism, OOM, stragglers.

Lesson 8's formulas, built on the physics below them (imports point downward only):

- Gradient bucketing (Li et al. 2020, "PyTorch Distributed", VLDB 13(12): bucketing Sec. 3.2.2,
  overlapping communication with backward Sec. 3.2.3): B equal buckets of M/B bytes, each an
  all-reduce priced by distlab.collectives (alpha-beta ring, 2(N-1) alpha per bucket), overlapped
  with backward as in distlab.dataparallel. Few buckets
  leave little to overlap; many pay the per-message latency B times and run at a small share
  of the link's bandwidth. bucket_sweep finds the best count by computing every one.
- The network: a DP all-reduce's time from the real rank layout (distlab.mesh) on a tapered
  (k:1 oversubscribed) and optionally rail-optimized fabric (distlab.hardware.Cluster), for the
  hierarchical algorithm and for one flat ring through the group; the taper a transfer pays
  depends on how many transfers leave a node across the spine at once.
- FP8 (Micikevicius et al. 2022; Transformer Engine): which bytes halve and which do not, read off
  two runs of distlab.training.estimate and distlab.memory's precision recipes.
- Context parallelism (ring attention, Liu et al. 2023; Megatron-Core context parallelism):
  per ring step a GPU sends a K/V block to its neighbour while it computes attention of its
  query chunk against the block it holds; the transfer hides when it is shorter. Lesson 11b §1 adds causal load
  balancing (zig-zag chunks), the backward ring, DeepSpeed-Ulysses' all-to-alls and the memory per GPU.
- OOM triage: distlab.triage.oom_triage.
- Stragglers: synchronous data parallelism waits for the slowest GPU every step; the expected
  maximum of N GPUs' times, exactly (numerical integration) and by simulation.
"""

from .._arguments import deprecated_alias
from ..triage import OOMTriage, TriageStep, oom_triage  # noqa: F401 (re-exported)
from .buckets import (  # noqa: F401 (re-exported)
    BucketSweep,
    MAX_MICRO_BATCH,
    MAX_SEQ_LEN,
    MAX_SWEEP_BUCKETS,
    MAX_TOKENS_PER_GPU,
    backward_time,
    bucket_sweep,
)
from .network import (  # noqa: F401 (re-exported)
    ALGORITHMS,
    DPAllReduce,
    dp_all_reduce,
    network_step,
)
from .sharding import (  # noqa: F401 (re-exported)
    ShardingPlan,
    compare_sharding,
    sharding_plan,
)
from .fp8 import (  # noqa: F401 (re-exported)
    FP8Comparison,
    fp8_comparison,
)
from .context import (  # noqa: F401 (re-exported)
    CP_METHODS,
    ContextParallelLayer,
    RingAttentionStep,
    causal_work_per_rank,
    compare_context_parallel,
    context_parallel_layer,
    ring_attention_step,
    ulysses_limit,
)
from .stragglers import (  # noqa: F401 (re-exported)
    EULER_GAMMA,
    MAX_NORMALS,
    MAX_SIMULATION_DRAWS,
    StragglerStep,
    expected_max_normal,
    expected_slowest,
    gumbel_expected_max,
    leading_term_max_normal,
    simulate_slowest,
    straggler_step,
)

__all__ = [
    "BucketSweep",
    "bucket_sweep",
    "backward_time",
    "DPAllReduce",
    "dp_all_reduce",
    "network_step",
    "ShardingPlan",
    "sharding_plan",
    "compare_sharding",
    "FP8Comparison",
    "fp8_comparison",
    "RingAttentionStep",
    "ring_attention_step",
    "ContextParallelLayer",
    "causal_work_per_rank",
    "context_parallel_layer",
    "compare_context_parallel",
    "ulysses_limit",
    "OOMTriage",
    "TriageStep",
    "expected_max_normal",
    "gumbel_expected_max",
    "leading_term_max_normal",
    "expected_slowest",
    "simulate_slowest",
    "StragglerStep",
    "straggler_step",
]

#: Deprecated name of distlab.triage.oom_triage (not in __all__: an alias, not a formula).
triage_oom = deprecated_alias(oom_triage, "production.triage_oom", "triage.oom_triage")
