"""What-if (issue 30, not wired in): sequence parallelism's backward all-gathers priced as exposed TP traffic.

Megatron-LM's column-parallel linear with sequence parallelism saves only its s/tp share of the input and gathers
it again in the backward for the weight gradient (NVIDIA/Megatron-LM@877f6a1bd5 megatron/mpu/layers.py,
LinearWithGradAccumulationAndAsyncCommunication.backward: `_all_gather_base(..., async_op=True)`, launched beside the
input-gradient GEMM). Two per layer (QKV, MLP up), each half an all-reduce's ring time: one more all-reduce equivalent
on top of the 4 (6 with full recomputation) that distlab.tensor prices. distlab.tensor says SP moves what TP moves
(Korthikanti 2022 Sec. 4.2.2; lesson 5 Q4 asks exactly that), so wiring this in moves lesson 5's answer: here it is
a what-if only. It wraps the step model's tp_term (the rest untouched) and prints `distlab validate` with it.

    .venv/bin/python benchmarks/whatif_sp_backward_allgather.py [--role validation|reference|calibration]
    .venv/bin/python benchmarks/whatif_sp_backward_allgather.py --layers   # Table 4's one layer with it
"""

from __future__ import annotations

import sys

import numpy as np

from distlab import cli, tensor
from distlab.step import communication, terms
from distlab.tp_overlap import hidden_share_array

_tp_term = communication.tp_term


def tp_term_with_backward_gathers(c, r):
    """tp_term plus, under sequence parallelism, one all-reduce equivalent (the backward's two all-gathers of b s h)
    per layer and microbatch on the ring; the TP overlap method's share hides the total as in tp_term."""
    out = _tp_term(c, r)
    sp = np.asarray(c.sequence_parallel, dtype=bool)
    msg = tensor.tp_message_bytes(c.b, c.s, float(c.model.hidden), c.e_msg) / c.cp
    extra = np.where(sp, c.layers_stage * tensor.tp_comm_time(msg, c.tp, c.intra_bw, c.intra_lat, 1), 0.0)
    total = out["tp_mb"] + out["tp_hidden_mb"] + extra
    hidden = np.where(sp, hidden_share_array(c.tp_overlap, c.tp), 0.0) * np.minimum(total, r["matmul_mb"])
    return dict(tp_comm_s=c.m * (total - hidden), tp_mb=total - hidden, tp_hidden_mb=hidden)


def main(argv) -> int:
    terms.ORDER = tuple(tp_term_with_backward_gathers if f is _tp_term else f for f in terms.ORDER)
    if argv == ["--layers"]:
        import korthikanti_layer_times  # benchmarks/, beside this script

        communication.tp_term = tp_term_with_backward_gathers  # the layer table calls communication.tp_term
        korthikanti_layer_times.main()
        return 0
    return cli.main(["validate", *argv])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
