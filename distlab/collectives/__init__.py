"""Collective communication (Lesson 2, notebooks/02_collectives.ipynb): costs and a step-by-step simulation.

- distlab.collectives.cost: the alpha-beta closed forms (collective_cost; one formula per (op,
  algorithm) in FORMULAS and ring_all_reduce_time live in distlab.collectives.algorithms), and the nccl-tests bandwidth conventions
  (algorithm_bandwidth, bus_bandwidth, bus_factor).
- distlab.collectives.placed: a collective on a placed group (ranks on nodes, the node's links, the
  fabric): the time NCCL's algorithm takes and which algorithm (placed_collective, placed_time_array).
- distlab.collectives.simulate: CollectiveTrace and the simulate_* functions, which move real
  NumPy data between simulated GPUs and record every send.

Every public name of the three is importable from here: `collectives.collective_cost(...)`.
"""

from __future__ import annotations

from . import cost, placed, simulate
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
from .placed import (
    NCCL_NET_OVERHEAD_S,
    NCCL_SIMPLE_NET_POSTS,
    PLACED_OPS,
    PLACEMENTS,
    PlacedCollective,
    equal_local_ranks_array,
    flat_ring_strawman_time,
    hierarchical_parts,
    placed_all_to_all_time_array,
    placed_collective,
    placed_time_array,
    ring_latency_array,
    ring_step_floor,
    placement_array,
)
from .simulate import (
    MAX_TRACE_ENTRIES,
    CollectiveTrace,
    simulate_all_gather,
    simulate_parameter_server,
    simulate_reduce_scatter,
    simulate_ring_all_reduce,
)

__all__ = [*cost.__all__, *placed.__all__, *simulate.__all__]
