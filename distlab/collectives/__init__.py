"""Collective communication (Lesson 2, notebooks/02_collectives.ipynb): costs and a step-by-step simulation.

- distlab.collectives.cost: the alpha-beta closed forms (collective_cost, one formula per (op,
  algorithm) in FORMULAS), ring_all_reduce_time, and the nccl-tests bandwidth conventions
  (algorithm_bandwidth, bus_bandwidth, bus_factor).
- distlab.collectives.simulate: CollectiveTrace and the simulate_* functions, which move real
  NumPy data between simulated GPUs and record every send.

Every public name of both is importable from here: `collectives.collective_cost(...)`.
"""

from __future__ import annotations

from . import cost, simulate
from .cost import (
    ALGORITHMS,
    FORMULAS,
    OPS,
    CollectiveCost,
    CollectivePhase,
    algorithm_bandwidth,
    bus_bandwidth,
    bus_factor,
    collective_cost,
    double_binary_tree,
    latency_bandwidth_crossover,
    ring_all_reduce_time,
)
from .simulate import (
    MAX_TRACE_ENTRIES,
    CollectiveTrace,
    simulate_all_gather,
    simulate_parameter_server,
    simulate_reduce_scatter,
    simulate_ring_all_reduce,
)

__all__ = [*cost.__all__, *simulate.__all__]
