"""Activation offloading (estimate's activation_offload_layers; distlab.step.offload): memory by hand, the copies'
exposed time as invariants, the refusals, the exporters and the validation row."""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distlab import export, hardware, training, validation
from distlab.errors import ConfigurationError
from distlab.step.offload import offload_exposed_seconds

GB200 = hardware.node("gb200-nvl72")
#: Llama 2 7B on one GB200 NVL72 tray (4 GPUs, dp 4): 8 sequences of 4,096 tokens, 2 microbatches per GPU.
BASE = dict(
    nodes=1,
    fabric="ib-ndr",
    global_batch=8,
    seq_len=4096,
    micro_batch_size=1,
    memory_recipe="megatron-distributed-optimizer",
    zero=1,
    efficiency=0.5,
)


def _estimate(node=GB200, **kwargs):
    return training.estimate(
        "llama2-7b",
        hardware.cluster(node, kwargs.pop("nodes", 1), "ib-ndr"),
        **{k: v for k, v in {**BASE, **kwargs}.items() if k not in ("nodes", "fabric")},
    )


def _with_link(bandwidth):
    return dataclasses.replace(GB200, host_link_bandwidth=bandwidth)


def test_memory_falls_by_the_offloaded_layers_less_the_resident_one():
    """Llama 2 7B (h 4096, 32 heads of 128, MHA kv 4096, SwiGLU ffn 11,008, no dropout), bf16 activations (2 B),
    flash attention (no scores stored), tp 1, one 4,096-token sequence per microbatch:
    per token 4 h e (two norm inputs, attention and MLP inputs) = 32,768 B, plus (h + 2 kv + h) e = 32,768 B (Q, K,
    V, output-projection input) and 3 ffn e = 66,048 B (gate, up, product): 131,584 B; x 4,096 tokens =
    538,968,064 B per layer. pp 1 under 1F1B: one microbatch in flight. Offloading 8 layers frees 8 - 1 = 7 layers
    (Transformer Engine keeps the last offloaded group resident: step.offload): 7 x 538,968,064 = 3,772,776,448 B."""
    base = _estimate()
    off = _estimate(activation_offload_layers=8)
    assert base.memory.total_bytes - off.memory.total_bytes == pytest.approx(3_772_776_448, rel=1e-12)
    assert off.memory.weights == base.memory.weights and off.memory.optimizer == base.memory.optimizer
    one = _estimate(activation_offload_layers=1)  # one offloaded layer stays resident: nothing saved, copies run
    assert one.memory.total_bytes == base.memory.total_bytes


def test_an_infinite_host_link_changes_no_step_time():
    base = _estimate(node=_with_link(math.inf))
    for n in (1, 8, 31):
        off = _estimate(node=_with_link(math.inf), activation_offload_layers=n)
        assert off.offload_s == 0.0
        assert off.step_time_s == base.step_time_s


def test_the_exposed_time_grows_as_the_link_slows_and_is_never_negative():
    times = [_estimate(node=_with_link(bw), activation_offload_layers=16).offload_s for bw in (1e12, 225e9, 1e9, 1e8)]
    assert all(t >= 0 for t in times)
    assert times == sorted(times) and times[-1] > 0
    slow = _estimate(node=_with_link(1e8), activation_offload_layers=16)
    assert slow.parts()["activation offload (exposed)"] == slow.offload_s
    assert slow.step_time_s == pytest.approx(_estimate(node=_with_link(1e8)).step_time_s + slow.offload_s, rel=1e-12)


def test_offloading_no_layer_changes_nothing():
    base, zero = _estimate(), _estimate(activation_offload_layers=0)
    assert zero.to_dict() == base.to_dict()
    assert dataclasses.astuple(zero) == dataclasses.astuple(base)
    assert zero.step_inputs[1].keys() == base.step_inputs[1].keys()
    assert "activation offload" not in zero.summary() and "offload" not in zero.breakdown()


def _window_map(layers: int, groups: int) -> list:
    """Transformer Engine v2.9 cpu_offload.py AsyncDoubleBufferGroupOffloadHandler.__init__, line for line."""
    window, constant = {}, 0
    for i in range(groups):
        window[i] = ((layers // groups) * (i + 1)) - 1
        if i < (layers % groups):
            window[i] += i + 1
            constant = i + 1
        else:
            window[i] += constant
    return [window[i] for i in range(groups)]


@pytest.mark.parametrize("layers, groups", [(80, 40), (80, 1), (80, 79), (32, 7), (32, 31), (5, 3)])
def test_the_windows_are_transformer_engines(layers, groups):
    """Each group's copy runs beside the layers from the previous window's end to its own (group 0: from layer 0's
    end), so its window is window_map[i] - window_map[i - 1] layers (group 0: window_map[0]); the exposed time is the
    sum over them of max(0, copy - window x layer)."""
    ends = _window_map(layers, groups)
    assert ends[-1] == layers - 1  # the last window ends at the last layer: its group is freed there
    sizes = [ends[0]] + [b - a for a, b in zip(ends, ends[1:])]
    for copy in (0.5, 1.5, 3.0, 7.0):
        want = sum(max(0.0, copy - k * 1.0) for k in sizes)
        assert float(offload_exposed_seconds(copy, 1.0, layers, groups)) == pytest.approx(want, abs=1e-12)
    assert float(offload_exposed_seconds(3.0, 1.0, layers, 0)) == 0.0


BAD = [-1, 32, 1000, 2.0, 2.5, True, False, "4", None, [4], float("nan")]


@pytest.mark.parametrize("value", BAD, ids=repr)
def test_bad_values_are_our_error_naming_the_range(value):
    with pytest.raises(ConfigurationError, match=r"activation_offload_layers=.*0 to 31"):
        _estimate(activation_offload_layers=value)


@pytest.mark.parametrize(
    "change",
    [
        dict(memory_recipe="fsdp2", zero=2),
        dict(memory_recipe="zero-paper"),
        dict(memory_recipe="deepspeed"),
        dict(node=hardware.node("dgx-h100"), nodes=1),
        dict(recompute="selective"),
        dict(recompute="full"),
        dict(nodes=2, pp=2, global_batch=16),
    ],
    ids=["fsdp2", "zero-paper", "deepspeed", "dgx-h100", "selective", "full", "pp2"],
)
def test_offloading_where_megatron_cannot_is_our_error(change):
    kwargs = dict(change)
    node = kwargs.pop("node", GB200)
    with pytest.raises(ConfigurationError, match=r"activation_offload_layers=4: .*0 to 31"):
        _estimate(node=node, activation_offload_layers=4, **kwargs)


def test_a_node_without_a_sourced_host_link_has_none():
    for name in ("dgx-a100", "dgx-h100", "dgx-h200", "hgx-b200"):
        assert hardware.node(name).host_link_bandwidth is None
    # the lowest per-GPU figure nvbandwidth measured with all 4 GPUs of a GB300 tray copying (Megatron-LM issue 6491):
    # host_to_all 168.60-175.41, all_to_host 181.94-183.85 GB/s -> 168.6 GB/s; the GB200 tray takes the same
    for name in ("gb200-nvl72", "gb300-nvl72"):
        node = hardware.node(name)
        assert node.host_link_bandwidth == 168.6e9 and "issue 6491" in node.host_link_source
        assert node.host_link_bandwidth < 450e9 / 2  # under the datasheet's C2C per direction shared by 2 GPUs
    with pytest.raises(ConfigurationError, match="host_link_source"):
        dataclasses.replace(hardware.node("dgx-h100"), host_link_bandwidth=64e9)
    with pytest.raises(ConfigurationError, match="host_link_bandwidth"):
        dataclasses.replace(GB200, host_link_bandwidth=-1.0)


def test_the_megatron_exporter_writes_the_flag_and_the_others_refuse():
    est = _estimate(activation_offload_layers=8)
    text = export.megatron(est, gpus_per_node=4)
    assert "--cpu-offloading-num-layers 8" in text
    assert export.parse_megatron(text)["activation_offload_layers"] == 8
    assert "--cpu-offloading-num-layers" not in export.megatron(_estimate(), gpus_per_node=4)
    for fmt in ("deepspeed", "torchtitan"):
        with pytest.raises(ConfigurationError, match=r"activation_offload_layers=8: .*export to megatron"):
            export.export(est, fmt)


def test_summary_says_what_was_assumed():
    text = _estimate(node=_with_link(1e9), activation_offload_layers=8).summary()
    assert "activation offload: the first 8 layers'" in text and "1 GB/s per GPU per direction" in text
    assert "exposed" in text


def test_the_gb200_llama3_70b_row_is_scored_and_fits():
    rid = "mbridge-25.11-gb200-llama3-70b-64gpu-fp8cs"
    run = validation.run(rid)
    assert run["distlab"]["role"] == "validation" and run["distlab"]["estimate"]["activation_offload_layers"] == 40
    est = validation.predict(run)
    assert est.fits and est.config["activation_offload_layers"] == 40
    row = [r for r in validation.compare("all").rows if r.id == rid][0]
    assert row.status == "predicted" and abs(row.error_percent) < 10


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(0, 31),
    bandwidth=st.sampled_from([math.inf, 1e15, 225e9, 64e9, 1e9, 1e6]),
    batch=st.sampled_from([8, 16, 32]),
    micro=st.sampled_from([1, 2]),
    seq=st.sampled_from([1024, 4096]),
)
def test_valid_offloads_give_finite_results_and_no_warnings(n, bandwidth, batch, micro, seq):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est = _estimate(
            node=_with_link(bandwidth),
            activation_offload_layers=n,
            global_batch=batch,
            micro_batch_size=micro,
            seq_len=seq,
        )
    values = [est.step_time_s, est.offload_s, est.memory.total_bytes, est.mfu, *est.parts().values()]
    assert all(np.isfinite(values)) and est.offload_s >= 0
    base = _estimate(node=_with_link(bandwidth), global_batch=batch, micro_batch_size=micro, seq_len=seq)
    assert est.memory.total_bytes <= base.memory.total_bytes
    assert est.step_time_s >= base.step_time_s
