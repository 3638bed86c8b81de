"""One transformer layer of Korthikanti et al. 2022's 22B model (A100, TP 8, micro-batch 4, s 2048) as the step model
prices it, term by term, forward / backward / combined, against the paper's Table 4 (role 'reference' in
distlab/data/published_runs.json: for diagnosis only, never fitted). Issue 30.

Per layer and microbatch: the weight matmuls, the attention core, the element-wise traffic and the TP collectives,
each from the step model's own term (distlab.step.compute, distlab.step.communication) on the
korthikanti2022-t5-22b run's configuration with recompute / sequence_parallel varied, the stage cut to one layer
without the logits and loss (Table 4 times one layer). Forward = one forward pass of each term and the forward's
two all-reduces (or their reduce-scatter/all-gather pairs); backward = the rest (the backward's passes, the
recomputed forward, the backward's collectives less what the run's TP overlap method hides, and the overlap slowdown
of the compute beside it), as the paper times it. The runs use 'megatron-async-backward' (distlab.tp_overlap): the
paper's Megatron-LM overlaps the backward all-reduces with the weight-gradient GEMMs (Sec. 6.2).

    .venv/bin/python benchmarks/korthikanti_layer_times.py
"""

from __future__ import annotations

import dataclasses

import numpy as np

from distlab import tensor, training, validation
from distlab.elementwise import elementwise_bytes_array
from distlab.flops import TRAINING_PASSES
from distlab.step import communication, compute
from distlab.step.config import step_config

RUN = "korthikanti2022-t5-22b-full-recompute"
ROWS = (  # Table 4 row, recompute, sequence_parallel, measured forward / backward / combined (ms)
    ("baseline no recompute", "none", False, (7.7, 11.9, 19.6)),
    ("sequence parallelism", "none", True, (7.2, 11.8, 19.0)),
    ("baseline with recompute", "full", False, (7.7, 19.5, 27.2)),
    ("selective recompute", "selective", False, (7.7, 13.2, 20.9)),
    ("selective + sequence", "selective", True, (7.2, 13.1, 20.3)),
)


def one_layer(recompute: str, sequence_parallel: bool) -> dict:
    """The step model's terms of one layer and microbatch in ms: {term: (forward, backward)}."""
    r = validation.run(RUN)
    kw = dict(r["distlab"]["estimate"], recompute=recompute, sequence_parallel=sequence_parallel)
    est = training.estimate(validation.run_model(r), validation.run_cluster(r), **kw)
    core_model, keywords = est.step_inputs
    c = step_config(core_model, **keywords)
    again = bool(np.all(c.core_again))
    layer = TRAINING_PASSES * c.layer_fwd + c.layer_again
    core = (TRAINING_PASSES + (1.0 if again else 0.0)) * c.core_fwd
    c = dataclasses.replace(c, layers_stage=1.0, logit_share=0.0, stage_flops=layer, core_stage=core)
    matmul = float(compute.matmul_seconds(c))
    gemm_fwd = matmul * float((c.layer_fwd - c.core_fwd) / (layer - core))
    attention = float(compute.attention_core_seconds(c))
    core_fwd = attention / (TRAINING_PASSES + (1.0 if again else 0.0))
    elementwise = float(compute.elementwise_seconds(c))
    per_token = elementwise_bytes_array(
        c.model, c.s, c.tp, c.sequence_parallel, c.flash, c.kernels_code, c.e_elementwise
    )
    elementwise_fwd = float(c.memory_traffic * c.b * c.s * per_token / c.cp / c.hbm)
    tp_terms = communication.tp_term(c, {"matmul_mb": matmul})
    tp = float(tp_terms["tp_mb"])
    overlap = float(c.overlap_slowdown * tp_terms["tp_hidden_mb"])  # the backward's GEMMs beside hidden TP traffic
    msg = tensor.tp_message_bytes(c.b, c.s, float(c.model.hidden), c.e_msg) / c.cp
    tp_fwd = float(tensor.tp_comm_time(msg, c.tp, c.intra_bw, c.intra_lat, 2))
    ms = 1e3
    return {
        "matmul": (ms * gemm_fwd, ms * (matmul - gemm_fwd)),
        "attention core": (ms * core_fwd, ms * (attention - core_fwd)),
        "element-wise": (ms * elementwise_fwd, ms * (elementwise - elementwise_fwd)),
        "TP comm": (ms * tp_fwd, ms * (tp - tp_fwd)),
        "overlap slowdown": (0.0, ms * overlap),
    }


def main() -> None:
    base = None
    print(f"{'Table 4 row':26s} {'term':15s} {'fwd':>6s} {'bwd':>6s} {'sum':>6s}   paper fwd/bwd/sum   model/paper")
    for name, recompute, sp, paper in ROWS:
        terms = one_layer(recompute, sp)
        for term, (f, b) in terms.items():
            print(f"{name:26s} {term:15s} {f:6.2f} {b:6.2f} {f + b:6.2f}")
        fwd = sum(f for f, _ in terms.values())
        bwd = sum(b for _, b in terms.values())
        total = fwd + bwd
        base = base or (total, paper[2])
        print(
            f"{name:26s} {'= layer':15s} {fwd:6.2f} {bwd:6.2f} {total:6.2f}   {paper[0]:4.1f} {paper[1]:4.1f} {paper[2]:4.1f}"
            f"     {fwd / paper[0]:.2f} {bwd / paper[1]:.2f} {total / paper[2]:.2f};"
            f" vs baseline: model {total / base[0]:.3f}, paper {paper[2] / base[1]:.3f}"
        )


if __name__ == "__main__":
    from _timing import no_arguments

    no_arguments(__doc__)
    main()
