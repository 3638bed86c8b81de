"""Korthikanti et al. 2022 Table 4 (one layer of the 22B model) against the step model's counted terms (issue 30):
what selective recomputation and sequence parallelism add, counted from Megatron-LM's code of the paper's era
(NVIDIA/Megatron-LM@877f6a1bd5, 2022-05-24, the sequence-parallel merge)."""

from __future__ import annotations

import numpy as np
import pytest

from distlab import training, validation
from distlab.elementwise import core_attention_bytes_array
from distlab.step import compute
from distlab.step.config import step_config

RUN = "korthikanti2022-t5-22b-full-recompute"  # GPT 22B: 48 layers, h 6144, a 64, TP 8, micro-batch 4, s 2048


def _config(**changes):
    r = validation.run(RUN)
    kw = dict(r["distlab"]["estimate"], **changes)
    est = training.estimate(validation.run_model(r), validation.run_cluster(r), **kw)
    core_model, keywords = est.step_inputs
    return step_config(core_model, **keywords)


def test_core_attention_bytes_by_hand():
    # per token and GPU: a s scores x (softmax 2e + dropout 2e + 1-byte mask) + the context permute 2e q, over tp:
    # (64 x 2048 x (4 + 5) + 4 x 6144) / 8 = (1,179,648 + 24,576) / 8 = 150,528 B; flash attention stores none
    model = validation.run_model(validation.run(RUN))
    assert float(core_attention_bytes_array(model, 2048, 8, False, 2.0)) == 150528.0
    assert float(core_attention_bytes_array(model, 2048, 8, True, 2.0)) == 0.0


@pytest.mark.parametrize("sequence_parallel", [False, True])
def test_selective_recomputation_runs_the_unfused_cores_elementwise_kernels_again(sequence_parallel):
    # Megatron-LM checkpoints CoreAttention whole (QK^T, scale-mask-softmax, attention dropout, AV, the permute):
    # the backward re-runs its element-wise kernels once, b s x 150,528 B per layer = 8192 x 150,528 B, x 48 layers
    none = _config(recompute="none", sequence_parallel=sequence_parallel)
    selective = _config(recompute="selective", sequence_parallel=sequence_parallel)
    extra = (compute.elementwise_seconds(selective) - compute.elementwise_seconds(none)) * none.hbm
    assert float(extra / none.memory_traffic) == pytest.approx(48 * 8192 * 150528, rel=1e-12)


def test_selective_recomputation_adds_no_elementwise_bytes_with_flash_attention():
    none = _config(recompute="none", attention="flash")
    selective = _config(recompute="selective", attention="flash")
    assert np.array_equal(compute.elementwise_seconds(selective), compute.elementwise_seconds(none))
