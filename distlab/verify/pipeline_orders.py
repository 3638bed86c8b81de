"""The operation order of torch.distributed.pipelining's schedules, next to distlab.pipeline's.

torch plans a schedule as a per-rank list of actions (forward, backward, weight gradient, and
communication) before it runs it; that plan is pure arithmetic over (p, m, v), so it can be
read without a process group. The planning methods are private (torch 2.x): this module
builds the schedule objects without their constructors and calls them, and raises
MissingDependencyError if they have moved.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigurationError, MissingDependencyError
from ..pipeline import Op, stage_orders
from ._torch import require_torch

#: distlab schedule name -> torch.distributed.pipelining.schedules class.
TORCH_SCHEDULES = {
    "gpipe": "ScheduleGPipe",
    "1f1b": "Schedule1F1B",
    "interleaved": "ScheduleInterleaved1F1B",
    "zb-h1": "ScheduleInterleavedZeroBubble",  # with one local stage: ZB-H1 ("ZB1P")
}
_LETTERS = {"F": "F", "B": "B", "I": "B", "W": "W"}  # torch's I (input gradient) is our B


def torch_pipeline_orders(schedule, p, m, v=1) -> tuple[tuple[Op, ...], ...]:
    """Per-rank compute operations of torch's plan for `schedule` with p ranks, m microbatches, v chunks.

    `schedule` is a distlab name ('gpipe', '1f1b', 'interleaved', 'zb-h1') or a torch class name.
    Returns distlab.pipeline.Op tuples (kind, microbatch, chunk), like stage_orders; torch's
    communication and gradient-reduction actions are left out.
    """
    require_torch()
    from torch.distributed.pipelining import schedules

    cls_name = TORCH_SCHEDULES.get(str(schedule).lower(), schedule)
    if cls_name not in TORCH_SCHEDULES.values():
        raise ConfigurationError(f"schedule={schedule!r} has no torch counterpart here; "
                                 f"valid: {', '.join(TORCH_SCHEDULES)}")
    if cls_name in ("ScheduleGPipe", "Schedule1F1B") and v != 1:
        raise ConfigurationError(f"v={v}: {schedule} has one model chunk per rank; valid: v=1")
    try:
        cls = getattr(schedules, cls_name)
        obj = object.__new__(cls)
        if cls_name in ("ScheduleGPipe", "Schedule1F1B"):
            obj._num_stages, obj._n_microbatches = p, m
            per_rank = obj._get_pipeline_order()
        else:
            obj.pp_group_size, obj.n_local_stages, obj._n_microbatches = p, v, m
            obj.number_of_rounds = max(1, m // p)
            obj.microbatches_per_round = m // obj.number_of_rounds
            per_rank = {r: obj._calculate_single_rank_operations(r) for r in range(p)}
        out = []
        for rank in range(p):
            ops = []
            for action in per_rank[rank]:
                if action is None:
                    continue
                kind = getattr(action.computation_type, "value", str(action.computation_type))
                if kind not in _LETTERS:  # REDUCE_GRAD, send/receive
                    continue
                ops.append(Op(_LETTERS[kind], action.microbatch_index, action.stage_index // p))
            out.append(tuple(ops))
    except (AttributeError, TypeError, KeyError) as exc:  # the private planning API moved
        import torch

        raise MissingDependencyError(
            f"torch {torch.__version__}'s private pipelining planning API differs from the one distlab "
            f"reads ({type(exc).__name__}: {exc}); checked with torch 2.13.0"
        ) from exc
    return tuple(out)


@dataclass(frozen=True)
class OrderComparison:
    """torch's plan against distlab's order for one schedule and (p, m, v)."""

    schedule: str
    p: int
    m: int
    v: int
    differing_ranks: tuple     # ranks whose operation lists differ
    first_difference: str      # '' when identical, else e.g. 'rank 3, op 0: torch F1, distlab F0'

    @property
    def identical(self) -> bool:
        return not self.differing_ranks


def _label(op: Op | None) -> str:
    if op is None:
        return "(nothing)"
    return f"{op.kind}{op.microbatch}" + (f"c{op.chunk}" if op.chunk else "")


def compare_pipeline_orders(schedule, p, m, v=1) -> OrderComparison:
    """Compare torch_pipeline_orders with distlab.pipeline.stage_orders, rank by rank."""
    theirs = torch_pipeline_orders(schedule, p, m, v)
    ours = stage_orders(schedule, p, m, v)
    differing, first = [], ""
    for rank, (a, b) in enumerate(zip(theirs, ours)):
        if a == b:
            continue
        differing.append(rank)
        if not first:
            i = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            first = (f"rank {rank}, op {i}: torch {_label(a[i] if i < len(a) else None)}, "
                     f"distlab {_label(b[i] if i < len(b) else None)}")
    return OrderComparison(str(schedule), p, m, v, tuple(differing), first)
