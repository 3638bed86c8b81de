"""The operation order of torch.distributed.pipelining's schedules, next to distlab.pipeline's.

Each torch schedule is built through its own constructor, once per rank, on stand-in stages
that record which microbatch each forward and backward call is for; no process group and no
model are needed. So torch's own validity checks apply (a (p, m, v) torch refuses raises
ConfigurationError with torch's reason), and two orders can be read:

    executed   the calls the schedule's step makes on each rank: torch's ``_step_microbatches``
               driven with the recording stages (GPipe and 1F1B run a hand-written loop;
               interleaved 1F1B and ZB-H1 run their action list, lowered with communication)
    plan       torch's ``pipeline_order``, the per-rank action list it builds in the
               constructor (for GPipe and 1F1B only a description: their loop never reads it)

All of this is private torch API (checked with torch 2.13.0); if it has moved, the functions
raise MissingDependencyError.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

from ..errors import ConfigurationError, MissingDependencyError
from ..pipeline import Op, stage_orders
from ..units import wrap_text
from ._torch import require_torch

#: distlab schedule name -> torch.distributed.pipelining.schedules class.
TORCH_SCHEDULES = {
    "gpipe": "ScheduleGPipe",
    "1f1b": "Schedule1F1B",
    "interleaved": "ScheduleInterleaved1F1B",
    "zb-h1": "ScheduleInterleavedZeroBubble",  # with one local stage: ZB-H1 ("ZB1P")
    "zb-v": "ScheduleZBVZeroBubble",
    "dualpipe-v": "ScheduleDualPipeV",
}
#: Schedules with two stages per rank placed in a V: rank r runs stage r and stage 2p-1-r.
_V_SHAPED = ("ScheduleZBVZeroBubble", "ScheduleDualPipeV")
_SINGLE = ("ScheduleGPipe", "Schedule1F1B")  # one stage per rank: PipelineScheduleSingle
_LETTERS = {"F": "F", "B": "B", "I": "B", "W": "W"}  # torch's I (input gradient) is our B
_FUSED = "OVERLAP_F_B"  # DualPipe-V's overlapped forward + backward pair: its sub-actions, in order
SOURCES = ("executed", "plan")


class _RecordingStage:
    """Stands in for a torch PipelineStage: no model, no communication; logs each compute call as an Op."""

    def __init__(self, index, p, v, log, v_shape=False):
        self.stage_index, self.num_stages = index, p * v
        self.group_size, self.group_rank = p, (2 * p - 1 - index if v_shape and index >= p else index % p)
        self._split_full = v_shape  # V schedules mix full and split backwards: a full one is our B then W
        self.is_first, self.is_last = index == 0, index == p * v - 1
        self.device, self.submod, self.has_backward = "cpu", None, True
        self.args_recv_info, self.act_send_info = {0: ()}, {}
        self._log, self._chunk = log, index // p

    def forward_one_chunk(self, mb, *args, **kwargs):
        self._log.append(Op("F", mb, self._chunk))

    def backward_one_chunk(self, mb, loss=None, full_backward=True, last_backward=False):
        self._log.append(Op("B", mb, self._chunk))  # full or input-only backward: both are our B
        if full_backward and self._split_full:
            self._log.append(Op("W", mb, self._chunk))

    def backward_weight_one_chunk(self, mb, last_backward=False):
        self._log.append(Op("W", mb, self._chunk))

    def _none(self, *args, **kwargs):
        return None

    def _no_ops(self, *args, **kwargs):
        return []

    _prepare_forward_infra = _prepare_backward_infra = perform_reduce_grad = clear_runtime_states = _none
    set_local_fwd_input = set_local_bwd_input = get_local_bwd_output = _none
    get_fwd_recv_ops = get_fwd_send_ops = get_bwd_recv_ops = get_bwd_send_ops = _no_ops
    _get_init_p2p_neighbors_ops = _no_ops


def _loss(output, target):
    return None


def _compute_ops(actions, p, split_full=False) -> tuple:
    """torch _Actions -> Ops, leaving out idle slots (None), REDUCE_GRAD and send/receive. A fused
    pair (OVERLAP_F_B) gives its sub-actions; with split_full a full backward gives B then W."""
    ops: list = []
    for action in actions:
        if action is None:
            continue
        kind = getattr(action.computation_type, "value", str(action.computation_type))
        if kind == _FUSED:
            ops.extend(_compute_ops(action.sub_actions, p, split_full))
        elif kind in _LETTERS:
            ops.append(Op(_LETTERS[kind], action.microbatch_index, action.stage_index // p))
            if kind == "B" and split_full:
                ops.append(Op("W", action.microbatch_index, action.stage_index // p))
    return tuple(ops)


def torch_pipeline_orders(schedule, p, m, v=1, source="executed") -> tuple[tuple[Op, ...], ...]:
    """Per-rank compute operations of torch's `schedule` with p ranks, m microbatches, v chunks per rank.

    `schedule` is a distlab name ('gpipe', '1f1b', 'interleaved', 'zb-h1', 'zb-v', 'dualpipe-v') or a
    torch class name. For the V schedules (zb-v, dualpipe-v) rank r runs stages r and 2p-1-r (chunks 0
    and 1), and a full backward is written B then W, as distlab.pipeline writes it.
    source: 'executed' (the forward/backward calls torch's step makes) or 'plan' (torch's
    pipeline_order). Returns distlab.pipeline.Op tuples (kind, microbatch, chunk), like
    stage_orders; communication and gradient-reduction actions are left out.
    """
    require_torch()
    cls_name = TORCH_SCHEDULES.get(str(schedule).lower(), schedule)
    if cls_name not in TORCH_SCHEDULES.values():
        raise ConfigurationError(
            f"schedule={schedule!r} has no torch counterpart here; valid: {', '.join(TORCH_SCHEDULES)}"
        )
    if source not in SOURCES:
        raise ConfigurationError(f"source={source!r}; valid: {', '.join(SOURCES)}")
    for name, value in (("p", p), ("m", m), ("v", v)):
        if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
            raise ConfigurationError(f"{name}={value!r} must be a whole number >= 1")
    if cls_name in _SINGLE and v != 1:
        raise ConfigurationError(f"v={v}: {schedule} has one model chunk per rank; valid: v=1")
    v_shape = cls_name in _V_SHAPED
    if v_shape:
        if v not in (1, 2):
            raise ConfigurationError(f"v={v}: {schedule} runs two model chunks per rank; valid: v=2 (or 1)")
        v = 2
    try:
        from torch.distributed.pipelining import schedules

        cls = getattr(schedules, cls_name)
    except (ImportError, AttributeError) as exc:  # an older torch, or a build without torch.distributed
        import torch

        raise MissingDependencyError(
            f"torch {torch.__version__} has no torch.distributed.pipelining.{cls_name} "
            f"({type(exc).__name__}: {exc}); install a torch with it, e.g. pip install torch==2.13.0 "
            "(the version this was checked with)"
        ) from exc
    try:
        out = []
        for rank in range(p):
            log: list = []
            indices = [rank, 2 * p - 1 - rank] if v_shape else [rank + k * p for k in range(v)]
            stages = [_RecordingStage(index, p, v, log, v_shape) for index in indices]
            try:
                sched = cls(stages[0] if cls_name in _SINGLE else stages, m, loss_fn=_loss)
            except (ValueError, AssertionError) as exc:  # torch's own checks of (p, m, v)
                reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                # torch's reason on lines of its own, so that no printed line is wider than a notebook's output
                raise ConfigurationError(
                    f"torch's {cls_name} refuses p={p}, m={m}, v={v}:\n"
                    + wrap_text("    " + " ".join(reason.split()), indent="    ")
                ) from exc
            if source == "plan":
                out.append(_compute_ops(sched.pipeline_order[rank], p, v_shape))
            else:
                sched._step_microbatches(target_mbs=[None] * m)
                out.append(tuple(log))
    except (AttributeError, TypeError, KeyError) as exc:  # the private API moved
        import torch

        raise MissingDependencyError(
            f"torch {torch.__version__}'s private pipelining API differs from the one distlab "
            f"reads ({type(exc).__name__}: {exc}); checked with torch 2.13.0"
        ) from exc
    return tuple(out)


@dataclass(frozen=True)
class OrderComparison:
    """torch's order against distlab's for one schedule and (p, m, v)."""

    schedule: str
    p: int
    m: int
    v: int
    source: str  # 'executed' or 'plan' (see torch_pipeline_orders)
    differing_ranks: tuple  # ranks whose operation lists differ
    first_difference: str  # '' when identical, else e.g. 'rank 3, op 0: torch F1, distlab F0'

    @property
    def identical(self) -> bool:
        return not self.differing_ranks


def _label(op: Op | None) -> str:
    if op is None:
        return "(nothing)"
    return f"{op.kind}{op.microbatch}" + (f"c{op.chunk}" if op.chunk else "")


def compare_pipeline_orders(schedule, p, m, v=1, source="executed") -> OrderComparison:
    """Compare torch_pipeline_orders with distlab.pipeline.stage_orders, rank by rank."""
    theirs = torch_pipeline_orders(schedule, p, m, v, source)
    ours = stage_orders(schedule, p, m, v)
    differing, first = [], ""
    for rank, (a, b) in enumerate(zip(theirs, ours)):
        if a == b:
            continue
        differing.append(rank)
        if not first:
            i = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            first = (
                f"rank {rank}, op {i}: torch {_label(a[i] if i < len(a) else None)}, "
                f"distlab {_label(b[i] if i < len(b) else None)}"
            )
    return OrderComparison(str(schedule), p, m, v, source, tuple(differing), first)
