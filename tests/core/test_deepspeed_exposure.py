"""DeepSpeed's data-parallel communication as its engine runs it (memory_recipe='deepspeed'; step.data_parallel.
_deepspeed_exposure): ZeRO-0's all-reduce and any reduction under a pipeline after the last backward, ZeRO-1/2's
parameter gather after the optimizer step, the overlapped reductions in buckets of 5e8 elements. Lesson 7 §3, §7."""

from __future__ import annotations

import math

import pytest

from distlab import models, planner, training
from distlab.step.data_parallel import DEEPSPEED_REDUCE_BUCKET_ELEMENTS, deepspeed_note

EXACT = 1e-9
KW = dict(nodes=2, global_batch=64, seq_len=4096)


def _ds(**kw):
    return training.estimate("llama2-7b", "dgx-h100", memory_recipe="deepspeed", **{**KW, **kw})


@pytest.mark.parametrize("zero, pp", [(0, 1), (0, 2), (1, 2)])
def test_what_deepspeed_runs_after_the_backward_is_all_exposed(zero, pp):
    # ZeRO-0 (engine.allreduce_gradients after the backward) and ZeRO-1 under the pipeline engine (overlap_comm
    # off, _exec_reduce_grads after the last backward; the gather after the optimizer step): nothing hides
    est = _ds(zero=zero, pp=pp)
    assert est.dp_comm_s > 0
    assert est.dp_exposed_s == pytest.approx(est.dp_comm_s, rel=EXACT)


def test_zero2_by_hand_the_last_bucket_of_each_microbatch_and_the_gather():
    # ZeRO-2 without a pipeline: per microbatch a reduce-scatter of the gradients under its backward (overlap_comm),
    # in B = ceil(6,738,415,616 elements / 5e8) = 14 buckets; when a bucket's reduction c = rh / B is no longer
    # than its backward b, only the last bucket shows: rh / B per microbatch. The gather after the step: h.
    # The step model's ZeRO-2 total is (m + 1) h, so h = total / (m + 1); exposed = m h / 14 + h.
    est = _ds(zero=2)
    m = est.microbatches
    assert m == 4  # 64 sequences / dp 16
    elements = models.model("llama2-7b").parameter_count()
    buckets = math.ceil(elements / DEEPSPEED_REDUCE_BUCKET_ELEMENTS)
    assert buckets == 14
    h = est.dp_comm_s / (m + 1)
    # the premise c <= b: a microbatch's backward is 4 of the 6 FLOPs per parameter and token, more than half of
    # its compute, so rh = h <= compute / m / 2 is enough
    assert h <= est.compute_s / m / 2
    assert est.dp_exposed_s == pytest.approx(m * h / buckets + h, rel=EXACT)


def test_zero1_gather_is_exposed_only_for_deepspeed():
    # the same layout with the teaching recipe hides the gather under the first forward (Megatron's
    # --overlap-param-gather); DeepSpeed gathers after the optimizer step: the whole half all-reduce shows
    ds, paper = _ds(zero=1), training.estimate("llama2-7b", "dgx-h100", zero=1, **KW)
    assert ds.dp_comm_s == pytest.approx(paper.dp_comm_s, rel=EXACT)
    assert ds.dp_exposed_s >= ds.dp_comm_s / 2
    assert paper.dp_exposed_s < paper.dp_comm_s / 4


@pytest.mark.parametrize("zero, pp", [(0, 1), (0, 2), (1, 1), (1, 2), (2, 1)])
def test_the_planner_prices_deepspeed_as_estimate_does(zero, pp):
    p = planner.plan("llama2-7b", "dgx-h100", memory_recipe="deepspeed", **KW)
    keys = ("dp", "tp", "cp", "pp", "chunks", "micro_batch_size", "zero", "recompute", "sequence_parallel", "schedule")
    rows = [p.row(r) for r in range(len(p))]
    match = [r for r in rows if r["zero"] == zero and r["pp"] == pp]
    assert match, f"the plan has no row at zero {zero}, pp {pp}"
    for row in match[:3]:
        est = _ds(**{k: row[k] for k in keys})
        assert est.step_time_s == pytest.approx(row["step_time_s"], rel=1e-9)


def test_the_notes_say_what_deepspeed_exposes():
    assert "after the last backward, exposed (no ZeRO" in _ds(zero=0).notes()[0]
    assert "pipeline engine turns overlap_comm off" in _ds(zero=1, pp=2).notes()[0]
    one = _ds(zero=1).notes()[0]
    assert "overlaps the backward (overlap_comm) in buckets of 5e8 elements" in one
    assert "all-gather runs after the optimizer step, exposed" in one
    assert "refuses ZeRO-2 with a pipeline" in deepspeed_note(2, 4)
    assert deepspeed_note(3, 1) == ""
    assert not any("DeepSpeed" in n for n in _ds(zero=3).notes())
    # one replica: no data-parallel traffic, nothing to say
    single = training.estimate(
        "llama2-7b", "dgx-h100", nodes=1, global_batch=8, seq_len=4096, tp=8, memory_recipe="deepspeed"
    )
    assert not any("DeepSpeed" in n for n in single.notes())


@pytest.mark.parametrize("zero, pp", [(4, 1), (-1, 1), (True, 1), ("1", 1), (1.5, 1), (1, 0), (1, "x"), (1, None)])
def test_the_note_refuses_bad_input_with_our_error(zero, pp):
    from distlab.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="zero=|pp="):
        deepspeed_note(zero, pp)
