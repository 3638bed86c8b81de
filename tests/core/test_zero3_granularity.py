"""ZeRO-3/FSDP collective granularity (issue 30): one collective per parameter tensor (DeepSpeed ZeRO-3, 2021)
against one per layer on a flat buffer (FSDP2, Megatron), and the ring latency over all ranks that each pays."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from distlab import memory, models, training
from distlab.collectives.placed import ring_latency_array
from distlab.errors import ConfigurationError
from distlab.step.data_parallel import zero3_collectives_per_layer

ALPHA, ALPHA_X = 3.4e-6, 9.6e-6  # NVLink and fabric latency per ring step (s), set explicitly below


def _hardware(nodes_inter_lat=ALPHA_X):
    return dict(
        gpus_per_node=8,
        intra_bw=450e9,
        intra_lat=ALPHA,
        inter_bw=50e9,
        inter_lat=nodes_inter_lat,
        peak_flops=989e12,
        hbm_bandwidth=3.35e12,
        recipe=memory.precision_recipe("mixed"),
    )


def _step(dp, zero3_tensors, global_batch=16, inter_lat=ALPHA_X):
    return training.step_model_array(
        models.model("llama2-7b"),
        **_hardware(inter_lat),
        global_batch=global_batch,
        seq_len=4096,
        dp=dp,
        tp=1,
        pp=1,
        chunks=1,
        micro_batch_size=1,
        zero=3,
        recompute_code=0,
        sequence_parallel=False,
        schedule_code=1,
        efficiency=0.5,
        zero3_tensors=zero3_tensors,
    )


def test_tensor_counts_by_hand():
    # GPT-3 175B block (Megatron GPT: fused QKV, out projection, 2 MLP matrices, all with biases; 2 LayerNorms with
    # weight and bias): 4 x 2 + 2 x 2 = 12; Llama (no biases, gated MLP of 3, 2 RMSNorm weights): 5 + 2 = 7
    gpt = models.TransformerModel(
        name="gpt3", layers=96, hidden=12288, heads=96, ffn=49152, vocab=51200, biases=True, norm="layernorm"
    )
    assert zero3_collectives_per_layer(gpt, "tensor") == 12.0
    assert zero3_collectives_per_layer(models.model("llama2-7b"), "tensor") == 7.0
    assert zero3_collectives_per_layer(gpt, "layer") == 1.0
    with pytest.raises(ConfigurationError, match="zero3_collectives"):
        zero3_collectives_per_layer(gpt, "bucket")


def test_ring_latency_by_hand():
    # NCCL's ring all-gather over n ranks: n - 1 hops, nodes - 1 of them between nodes.
    # 16 ranks on 2 nodes: 14 x 3.4 + 1 x 9.6 = 57.2 us; 8 ranks in one node: 7 x 3.4 = 23.8 us;
    # 2 ranks 8 apart (one per node): 0 intra + 1 x 9.6 us
    got = ring_latency_array([16, 8, 2], [1, 1, 8], 8, ALPHA, ALPHA_X)
    assert got * 1e6 == pytest.approx([57.2, 23.8, 9.6])


def test_latency_bound_zero3_is_alpha_times_the_collectives():
    # llama2-7b (32 layers, 7 tensors a layer) over dp = 16 on 2 nodes, one microbatch (global batch 16): ZeRO-3
    # runs (3 L - 1) = 95 layer collectives (gather forward, gather backward but the last layer's, reduce-scatter);
    # per tensor each becomes 7, the 6 extra each paying the ring latency 57.2 us over the 16 ranks:
    # 95 x 6 x 57.2 us = 32.604 ms more DP traffic.
    flat, per_tensor = _step(16, 1.0), _step(16, 7.0)
    extra = float(per_tensor["dp_comm_s"] - flat["dp_comm_s"])
    assert extra == pytest.approx(95 * 6 * 57.2e-6, rel=1e-9)
    # latency-bound: with a 1 ms fabric step the per-tensor latency (95 x 6 x (14 x 3.4 us + 1 ms) = 597 ms)
    # outweighs the compute it could hide under (0.38 s of the whole model), so most of it is exposed
    slow_flat, slow_tensor = _step(16, 1.0, inter_lat=1e-3), _step(16, 7.0, inter_lat=1e-3)
    exposed_extra = float(slow_tensor["dp_exposed_s"] - slow_flat["dp_exposed_s"])
    assert float(slow_tensor["dp_comm_s"] - slow_flat["dp_comm_s"]) == pytest.approx(95 * 6 * (14 * ALPHA + 1e-3))
    assert exposed_extra > 0.5 * 95 * 6 * (14 * ALPHA + 1e-3) - float(slow_flat["compute_s"])


@settings(max_examples=40, deadline=None)
@given(
    dp=st.sampled_from([2, 4, 8, 16, 32]),
    k=st.floats(1.0, 40.0),
    batch=st.sampled_from([32, 64]),
)
def test_per_tensor_adds_exactly_the_latencies_and_never_less_exposure(dp, k, batch):
    flat, more = _step(dp, 1.0, global_batch=batch), _step(dp, k, global_batch=batch)
    m = batch / dp
    latency = float(ring_latency_array(dp, 1, 8, ALPHA, ALPHA_X))
    extra = float(more["dp_comm_s"] - flat["dp_comm_s"])
    assert extra == pytest.approx(m * 95 * (k - 1.0) * latency, rel=1e-9, abs=1e-15)
    assert float(more["dp_exposed_s"]) >= float(flat["dp_exposed_s"]) - 1e-15
    assert float(more["compute_s"]) == float(flat["compute_s"])  # only the DP term moves


def test_estimate_keyword_and_the_narayanan_table_2_rows():
    est = dict(nodes=2, global_batch=64, zero=3)
    flat = training.estimate("llama2-7b", "dgx-h100", **est)
    per_tensor = training.estimate("llama2-7b", "dgx-h100", zero3_collectives="tensor", **est)
    assert "zero3_collectives" not in flat.config and per_tensor.config["zero3_collectives"] == "tensor"
    assert per_tensor.step_time_s > flat.step_time_s
    with pytest.raises(ConfigurationError, match="zero3_collectives"):
        training.estimate("llama2-7b", "dgx-h100", zero3_collectives="per-bucket", **est)
    from distlab import validation

    rows = [r for r in validation.compare("reference").rows if r.id.startswith("narayanan2021-t2-zero3")]
    assert len(rows) == 6
    assert all(validation.run(r.id)["distlab"]["estimate"]["zero3_collectives"] == "tensor" for r in rows)
    assert np.all(np.isfinite([r.predicted_s for r in rows]))
