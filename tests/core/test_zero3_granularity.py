"""ZeRO-3/FSDP collective granularity (issue 30): one collective per parameter tensor (DeepSpeed ZeRO-3, 2021)
against one per layer on a flat buffer (FSDP2, Megatron), and the ring latency over all ranks that each pays."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from distlab import memory, models, training
from distlab import hardware
from distlab.collectives import placed
from distlab.collectives.placed import NCCL_NET_OVERHEAD_S, NCCL_SIMPLE_NET_POSTS, ring_latency_array, ring_step_floor
from distlab.errors import ConfigurationError
from distlab.step import data_parallel
from distlab.step.data_parallel import (
    DEEPSPEED_2021_HOST_PER_RANK_S,
    DEEPSPEED_2021_PYTHON_PER_RANK_S,
    SMALL_GPU_OPERATION_S,
    zero3_collectives_per_layer,
    zero3_gathered_per_layer,
)

ALPHA, ALPHA_X = 3.4e-6, 9.6e-6  # NVLink and fabric latency per ring step (s), set explicitly below
FLOOR = 6.0e-6  # a per-tensor ring's step inside a node over several nodes, AMD hosts: 3 posts x 2.0 us (NCCL 2.18+)


def _hardware(nodes_inter_lat=ALPHA_X, floor=0.0):
    return dict(
        ring_step_floor=floor,
        gpus_per_node=8,
        intra_bw=450e9,
        intra_lat=ALPHA,
        inter_bw=50e9,
        inter_lat=nodes_inter_lat,
        peak_flops=989e12,
        hbm_bandwidth=3.35e12,
        recipe=memory.precision_recipe("mixed"),
    )


def _step(dp, zero3_tensors, global_batch=16, inter_lat=ALPHA_X, recompute_code=0, micro_batch_size=1, floor=0.0):
    return training.step_model_array(
        models.model("llama2-7b"),
        **_hardware(inter_lat, floor),
        global_batch=global_batch,
        seq_len=4096,
        dp=dp,
        tp=1,
        pp=1,
        chunks=1,
        micro_batch_size=micro_batch_size,
        zero=3,
        recompute_code=recompute_code,
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
    # gathered per layer by DeepSpeed 2021 (tensors of >= 100,000 elements; smaller ones persist gathered): GPT-3's
    # QKV 36,864 x 12,288, projection 12,288^2, MLP 2 x 12,288 x 49,152 = 4; its biases (36,864, 12,288, 49,152,
    # 12,288) and LayerNorms (12,288) stay under it. Llama 2 7B: QKV, projection and 3 MLP matrices = 5; at a
    # threshold of 2e7 its projection (4,096^2 = 16.8M) drops out: 4; a 529.6B block (h = 20,480, f = 81,920): 4
    assert zero3_gathered_per_layer(gpt) == 4.0
    assert zero3_gathered_per_layer(models.model("llama2-7b")) == 5.0
    assert zero3_gathered_per_layer(models.model("llama2-7b"), 2e7) == 4.0
    big = models.TransformerModel(
        name="530b", layers=105, hidden=20480, heads=128, ffn=81920, vocab=51200, biases=True, norm="layernorm"
    )
    assert zero3_gathered_per_layer(big) == 4.0
    with pytest.raises(ConfigurationError, match="zero3_collectives"):
        zero3_collectives_per_layer(gpt, "bucket")


def test_ring_latency_by_hand():
    # NCCL's ring all-gather over n ranks: n - 1 hops, nodes - 1 of them between nodes.
    # 16 ranks on 2 nodes: 14 x 3.4 + 1 x 9.6 = 57.2 us; 8 ranks in one node: 7 x 3.4 = 23.8 us;
    # 2 ranks 8 apart (one per node): 0 intra + 1 x 9.6 us
    got = ring_latency_array([16, 8, 2], [1, 1, 8], 8, ALPHA, ALPHA_X)
    assert got * 1e6 == pytest.approx([57.2, 23.8, 9.6])
    # with NCCL 2.18's floor on the steps inside a node of a ring over several nodes (6.0 us on AMD hosts):
    # 16 ranks on 2 nodes: 14 x 6.0 + 9.6 = 93.6 us; 8 ranks in one node keep 7 x 3.4 = 23.8 us (no network step,
    # no floor); one member per node has no step inside a node: 9.6 us; a floor under the NVLink latency changes
    # nothing (Intel hosts: 3 x 1.0 = 3.0 us < 3.4 us)
    got = ring_latency_array([16, 8, 2], [1, 1, 8], 8, ALPHA, ALPHA_X, step_floor=FLOOR)
    assert got * 1e6 == pytest.approx([93.6, 23.8, 9.6])
    intel = NCCL_SIMPLE_NET_POSTS * NCCL_NET_OVERHEAD_S["intel"]
    assert ring_latency_array(16, 1, 8, ALPHA, ALPHA_X, step_floor=intel) * 1e6 == pytest.approx(57.2)


def test_the_ring_step_floor_provenance():
    # NVIDIA/nccl src/graph/tuning.cc (v2.18.1-1 to v2.30.7-1): getNetOverhead returns 1.0 (x86 Intel), 2.0 (x86 AMD),
    # 1.0 (else) microseconds, and "if (p == NCCL_PROTO_SIMPLE) netOverhead *= 3"; Selene's DGX A100 hosts are AMD
    # EPYC 7742 (MLPerf Training v1.0's NVIDIA system description), so its floor is 3 x 2.0 = 6.0 us
    from pathlib import Path

    assert NCCL_NET_OVERHEAD_S == {"intel": 1.0e-6, "amd": 2.0e-6, "other": 1.0e-6}
    assert set(NCCL_NET_OVERHEAD_S) == set(hardware.HOST_CPUS) and NCCL_SIMPLE_NET_POSTS == 3
    assert ring_step_floor("amd") == pytest.approx(FLOOR, rel=1e-12)
    assert ring_step_floor("intel") == ring_step_floor("other") == pytest.approx(3.0e-6, rel=1e-12)
    assert hardware.node("dgx-a100").host_cpu == "amd" and "AMD EPYC 7742" in hardware.node("dgx-a100").source
    assert hardware.node("dgx-h100").host_cpu == "other"  # not stated in the catalog: NCCL's default, 1.0 us
    hw = training.hardware_arguments(hardware.cluster("dgx-a100", 2), memory.precision_recipe("mixed"))
    assert hw["ring_step_floor"] == pytest.approx(FLOOR, rel=1e-12)
    with pytest.raises(ConfigurationError, match="host_cpu"):
        hardware.Node("x", "h100-sxm", 8, "nvlink4", "ib-ndr", 8, host_cpu="arm")
    with pytest.raises(ConfigurationError, match="host_cpu"):
        ring_step_floor("sparc")
    # a value of another type gets our error too (a list raised TypeError, an array ValueError, before 660ab0f)
    for odd in (["amd"], np.array(["amd", "intel"]), None, 2.0):
        with pytest.raises(ConfigurationError, match="host_cpu"):
            ring_step_floor(odd)
        with pytest.raises(ConfigurationError, match="host_cpu"):
            hardware.Node("x", "h100-sxm", 8, "nvlink4", "ib-ndr", 8, host_cpu=odd)
    root = Path(__file__).resolve().parents[2]
    source = (root / "distlab" / "collectives" / "placed.py").read_text(encoding="utf-8")
    block = source.split("NCCL_NET_OVERHEAD_S = ", 1)[0].rsplit("\n\n", 1)[1]
    assert "getNetOverhead" in block and "v2.18.1-1" in block and "issue 535" in block


def test_deepspeed_2021_per_tensor_zero3_by_hand():
    # llama2-7b (32 layers; 7 tensors a layer, 5 of them gathered: zero3_gathered_per_layer) over dp = 16 on 2 nodes,
    # one microbatch (global batch 16), no recomputation. The flat buffer runs (3 L - 1) = 95 layer collectives of
    # t seconds each. DeepSpeed 2021 (data_parallel._zero3_per_tensor) runs 2 L - 1 = 63 layer gathers of 5 tensors
    # and L = 32 reduce-scatters of 7, each tensor one ring latency a = 14 x 3.4 + 1 x 9.6 = 57.2 us (the layer's
    # first is in t): 63 (t + 4 a) + 32 (t + 6 a) = 95 t + 444 a; and each of the 63 x 5 + 32 x 7 = 539 tensors
    # pays h = 2.2 + 3.8 = 6.0 us of host work per rank over n = 16 ranks (DeepSpeed's Python loop, one copy_ per
    # rank): 539 x 16 x 6.0 us = 51.744 ms. So 444 x 57.2 us + 51.744 ms = 25.3968 + 51.744 = 77.1408 ms more than
    # the flat buffer, all of it exposed (a device-wide torch.cuda.synchronize() before each gather: DeepSpeed
    # v0.3.13 _allgather_param)
    assert DEEPSPEED_2021_HOST_PER_RANK_S == pytest.approx(6.0e-6, rel=1e-12)
    flat, per_tensor = _step(16, 1.0), _step(16, 7.0)
    a = 14 * ALPHA + ALPHA_X
    extra = float(per_tensor["dp_comm_s"] - flat["dp_comm_s"])
    assert extra == pytest.approx(444 * a + 539 * 16 * 6.0e-6, rel=1e-9)
    assert extra == pytest.approx(77.1408e-3, rel=1e-9)
    # on AMD hosts (floor 3 x 2.0 = 6.0 us: ring_step_floor) the 14 steps inside a node cost 6.0 us each:
    # a = 14 x 6.0 + 9.6 = 93.6 us, 444 x 93.6 us + 51.744 ms = 41.5584 + 51.744 = 93.3024 ms; the flat buffer's
    # hierarchical time does not move (the floor is priced only where a ring's latency over every rank is)
    assert float(_step(16, 1.0, floor=FLOOR)["dp_comm_s"]) == float(flat["dp_comm_s"])
    extra_amd = float(_step(16, 7.0, floor=FLOOR)["dp_comm_s"] - flat["dp_comm_s"])
    assert extra_amd == pytest.approx(444 * (14 * FLOOR + ALPHA_X) + 539 * 16 * 6.0e-6, rel=1e-9)
    assert extra_amd == pytest.approx(93.3024e-3, rel=1e-9)
    assert float(per_tensor["dp_exposed_s"]) == pytest.approx(float(per_tensor["dp_comm_s"]), rel=1e-12)
    t = float(flat["dp_comm_s"]) / 95
    assert float(per_tensor["dp_comm_s"]) == pytest.approx(95 * t + 444 * a + 539 * 16 * 6.0e-6, rel=1e-9)
    # full recomputation: the recomputed forward's module hooks gather again, L - 1 = 31 more layer gathers of 5
    # tensors: 31 (t + 4 a + 5 x 16 h) more than without it (the flat count does not move with recomputation)
    flat_full, full = _step(16, 1.0, recompute_code=2), _step(16, 7.0, recompute_code=2)
    assert float(flat_full["dp_comm_s"]) == pytest.approx(float(flat["dp_comm_s"]), rel=1e-12)
    more = float(full["dp_comm_s"] - per_tensor["dp_comm_s"])
    assert more == pytest.approx(31 * (t + 4 * a + 5 * 16 * 6.0e-6), rel=1e-9)


def test_the_host_term_grows_linearly_with_the_dp_size(monkeypatch):
    # invariant: the host work is n ranks x h per tensor collective, so at a fixed number of microbatches (m = 1:
    # global batch = dp, one sequence a GPU) the seconds it adds are proportional to dp: (63 x 5 + 32 x 7) = 539
    # collectives x dp x h (test above). Measured as the difference with the term switched off (h = 0).
    dps = (8, 16, 32, 64, 128)
    with_host = [float(_step(dp, 7.0, global_batch=dp)["dp_comm_s"]) for dp in dps]
    monkeypatch.setattr(data_parallel, "DEEPSPEED_2021_HOST_PER_RANK_S", 0.0)
    without = [float(_step(dp, 7.0, global_batch=dp)["dp_comm_s"]) for dp in dps]
    host = [w - wo for w, wo in zip(with_host, without)]
    for dp, seconds in zip(dps, host):
        assert seconds == pytest.approx(539 * dp * DEEPSPEED_2021_HOST_PER_RANK_S, rel=1e-9)
    assert [h / host[0] for h in host] == pytest.approx([dp / dps[0] for dp in dps], rel=1e-9)
    # and the flat buffer ('layer') pays none of it: its step does not depend on the constant
    flat_without = float(_step(64, 1.0, global_batch=64)["dp_comm_s"])
    monkeypatch.undo()
    assert float(_step(64, 1.0, global_batch=64)["dp_comm_s"]) == flat_without


def test_the_host_constants_provenance():
    # DEEPSPEED_2021_PYTHON_PER_RANK_S is the mean of the two thread-CPU medians that benchmarks/bench_zero3_host.py
    # measured and benchmarks/RESULTS.md records (gather loop, reduce-scatter loop; microseconds per rank), rounded
    # to 0.1 us; SMALL_GPU_OPERATION_S is the published 3.8 us of NVIDIA's CUDA Graphs blog, cited where it is set
    from pathlib import Path
    import re

    root = Path(__file__).resolve().parents[2]
    results = (root / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8")
    section = results.split("issue 30: DeepSpeed ZeRO-3's per-rank host work", 1)[1].split("\n## ", 1)[0]
    medians = {}
    for name in ("gather_loop", "reduce_scatter_loop"):
        row = re.search(rf"\| `{name}` \| ([0-9.]+) \|", section)
        assert row, f"RESULTS.md records no {name} median"
        medians[name] = float(row.group(1))
    mean_us = (medians["gather_loop"] + medians["reduce_scatter_loop"]) / 2
    assert round(mean_us, 1) * 1e-6 == pytest.approx(DEEPSPEED_2021_PYTHON_PER_RANK_S, rel=1e-12)
    source = (root / "distlab" / "step" / "data_parallel.py").read_text(encoding="utf-8")
    block = source.split("SMALL_GPU_OPERATION_S = ", 1)[0].rsplit("\n\n", 1)[1]
    assert "3.8 us" in block and "https://developer.nvidia.com/blog/cuda-graphs/" in block
    assert SMALL_GPU_OPERATION_S == 3.8e-6
    assert DEEPSPEED_2021_HOST_PER_RANK_S == DEEPSPEED_2021_PYTHON_PER_RANK_S + SMALL_GPU_OPERATION_S


@settings(max_examples=40, deadline=None)
@given(
    dp=st.sampled_from([2, 4, 8, 16, 32]),
    k=st.floats(1.0, 40.0, exclude_min=True),
    batch=st.sampled_from([32, 64]),
    recompute=st.sampled_from([0, 2]),
)
def test_per_tensor_is_never_faster_than_the_flat_buffer(dp, k, batch, recompute):
    # invariant: per tensor every flat collective becomes the same bytes plus latencies, none hidden, so the DP time
    # exposed is never less than the flat buffer's (exposed <= total <= per-tensor total), and only the DP term moves
    flat = _step(dp, 1.0, global_batch=batch, recompute_code=recompute)
    more = _step(dp, k, global_batch=batch, recompute_code=recompute)
    assert float(more["dp_exposed_s"]) >= float(flat["dp_comm_s"]) >= float(flat["dp_exposed_s"]) - 1e-15
    assert float(more["step_time_s"]) >= float(flat["step_time_s"])
    assert float(more["compute_s"]) == float(flat["compute_s"])
    # and its extra time is exactly the latencies and the host work when nothing is recomputed:
    # m ((63 x 4 + 32 (k - 1)) a + (63 x 5 + 32 k) dp h), h = DEEPSPEED_2021_HOST_PER_RANK_S per rank and tensor
    if recompute == 0:
        a = float(ring_latency_array(dp, 1, 8, ALPHA, ALPHA_X))
        extra = float(more["dp_comm_s"] - flat["dp_comm_s"])
        host = (63 * 5 + 32 * k) * dp * DEEPSPEED_2021_HOST_PER_RANK_S
        assert extra == pytest.approx(batch / dp * ((63 * 4 + 32 * (k - 1.0)) * a + host), rel=1e-9, abs=1e-15)


def test_the_per_tensor_floor_does_not_fall_with_dp():
    # Table 2's shape: a fixed global batch of one sequence per GPU per step (m = 1, b = 1), more GPUs. Per GPU the
    # ring moves about the whole layer either way ((n-1)/n of it) and each tensor's ring latency grows with n, so
    # the exposed DP time never falls as dp doubles, while the compute halves with the batch per GPU
    dps = (16, 32, 64, 128, 256)
    exposed = [float(_step(dp, 7.0, global_batch=dp)["dp_exposed_s"]) for dp in dps]
    assert all(b >= a for a, b in zip(exposed, exposed[1:]))
    # and that floor is at least the flat buffer's whole traffic (its bytes), none of it hidden under the compute
    assert all(e >= float(_step(dp, 1.0, global_batch=dp)["dp_comm_s"]) for e, dp in zip(exposed, dps))
    compute = [float(_step(dp, 7.0, global_batch=dp, micro_batch_size=1)["compute_s"]) for dp in (16, 256)]
    assert compute[1] == pytest.approx(compute[0])  # b = 1 on every GPU: the floor is communication, not compute


def test_the_ring_step_floor_on_narayanan_table_2_at_2240_gpus(monkeypatch):
    # Narayanan 2021 Table 2, ZeRO-3 529.6 B on 2,240 GPUs (280 DGX A100 nodes, dp = 2,240, one microbatch; 105
    # layers, full recomputation): per step 2 L - 1 + L - 1 = 313 layer gathers of k_g = 4 tensors and L = 105
    # reduce-scatters of k = 12, the layer's first tensor priced in its bytes, so 313 x 3 + 105 x 11 = 2,094 tensors
    # pay the ring latency of ring_latency_array. Each has n - nodes = 2,240 - 280 = 1,960 steps inside a node,
    # each at max(3.4, 6.0) = 6.0 us instead of 3.4 us (Selene's AMD hosts: hardware.node('dgx-a100').host_cpu):
    # 2,094 x 1,960 x 2.6 us = 10.671 s more DP time, all exposed
    from distlab import validation

    run = validation.run("narayanan2021-t2-zero3-529b-2240gpu")
    with_floor = validation.predict(run).breakdown()
    monkeypatch.setitem(placed.NCCL_NET_OVERHEAD_S, "amd", 0.0)  # no floor: NCCL 2.8-2.17's model
    without = validation.predict(run).breakdown()
    more = with_floor["dp_comm_exposed"] - without["dp_comm_exposed"]
    assert more == pytest.approx(2094 * 1960 * (FLOOR - ALPHA), rel=1e-9)
    assert more == pytest.approx(10.671, abs=5e-4)
    assert with_floor["compute"] == without["compute"]


def test_estimate_keyword_and_the_narayanan_table_2_rows():
    est = dict(nodes=2, global_batch=64, zero=3)
    flat = training.estimate("llama2-7b", "dgx-h100", **est)
    per_tensor = training.estimate("llama2-7b", "dgx-h100", zero3_collectives="tensor", **est)
    assert "zero3_collectives" not in flat.config and per_tensor.config["zero3_collectives"] == "tensor"
    assert per_tensor.step_time_s > flat.step_time_s
    with pytest.raises(ConfigurationError, match="zero3_collectives"):
        training.estimate("llama2-7b", "dgx-h100", zero3_collectives="per-bucket", **est)
    # an MoE model (its step model has no `biases` field) is priced per tensor too, all of it exposed
    moe = dict(nodes=2, fabric="ib-ndr", ep=8, zero=3, global_batch=64)
    moe_flat = training.estimate("mixtral-8x7b", "dgx-h100", **moe)
    moe_tensor = training.estimate("mixtral-8x7b", "dgx-h100", zero3_collectives="tensor", **moe)
    assert (
        moe_tensor.dp_exposed_s == pytest.approx(moe_tensor.dp_comm_s) and moe_tensor.step_time_s > moe_flat.step_time_s
    )
    from distlab import validation

    rows = [r for r in validation.compare("reference").rows if r.id.startswith("narayanan2021-t2-zero3")]
    assert len(rows) == 6
    assert all(validation.run(r.id)["distlab"]["estimate"]["zero3_collectives"] == "tensor" for r in rows)
    assert np.all(np.isfinite([r.predicted_s for r in rows]))
