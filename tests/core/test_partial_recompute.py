"""Partial-layer activation recomputation (issue 30): estimate(recompute='full', recompute_layers=N), its memory,
time and FLOPs, its export to Megatron-LM and torchtitan, and the two torchtitan 'selective layer' runs it maps."""

from __future__ import annotations

import json
import tomllib

import pytest

from distlab import cli, export, partial_recompute, training, validation
from distlab.errors import ConfigurationError
from distlab.export.megatron_lm import parse_megatron
from distlab.flops import recomputed_forward_flops_array, step_flops

# torchtitan's 'selective layer' row of docs/performance.md: Llama 3 8B, FSDP2 on 64 A100s, local batch 1
TITAN = dict(
    nodes=8,
    fabric="ib-hdr",
    global_batch=64,
    seq_len=8192,
    dp=64,
    zero=3,
    memory_recipe="fsdp2",
    kernels="eager",
)
# a Megatron layout that reaches TP (with SP), PP with interleaving, CP, and the engine recipe
MEGATRON = dict(
    nodes=4,
    fabric="ib-ndr",
    global_batch=64,
    seq_len=4096,
    tp=2,
    pp=4,
    chunks=2,
    schedule="interleaved",
    cp=2,
    sequence_parallel=True,
    memory_recipe="megatron",
)
LAYOUTS = [("llama3.1-8b", "dgx-a100", TITAN), ("llama2-7b", "dgx-h100", MEGATRON)]


def _numbers(est):
    """Every number of an estimate that recomputation can move: the step terms, memory, FLOPs."""
    d = est.to_dict()
    return dict(step=d["step_time_s"], **d["breakdown_s"], **d["memory"], hw=est.hardware_flops, model=est.model_flops)


@pytest.mark.parametrize("model, node, layout", LAYOUTS)
def test_no_layer_prices_as_none_and_every_layer_as_full_exactly(model, node, layout):
    none = _numbers(training.estimate(model, node, recompute="none", **layout))
    full = _numbers(training.estimate(model, node, recompute="full", **layout))
    assert _numbers(training.estimate(model, node, recompute="full", recompute_layers=0, **layout)) == none
    # llama2-7b on pp 4 x v 2: chunks of 32 / 8 = 4 layers; N = 4 (or more) recomputes every one
    n_all = 32 if layout is TITAN else 4
    assert _numbers(training.estimate(model, node, recompute="full", recompute_layers=n_all, **layout)) == full
    assert _numbers(training.estimate(model, node, recompute="full", recompute_layers=32, **layout)) == full


@pytest.mark.parametrize("model, node, layout", LAYOUTS)
def test_memory_falls_and_time_grows_with_the_layers_recomputed(model, node, layout):
    top = 32 if layout is TITAN else 4
    ests = [training.estimate(model, node, recompute="full", recompute_layers=n, **layout) for n in range(top + 1)]
    acts = [e.memory.activations_bytes for e in ests]
    times = [e.step_time_s for e in ests]
    assert all(a > b for a, b in zip(acts, acts[1:]))
    assert all(a < b for a, b in zip(times, times[1:]))
    hw = [e.hardware_flops for e in ests]
    assert all(a < b for a, b in zip(hw, hw[1:]))


def test_stage_activations_are_the_recomputed_layers_inputs_plus_the_others_activations():
    # Llama 3 8B, one 8,192-token sequence, bf16: a recomputed layer keeps its input s h e = 8192 x 4096 x 2
    # = 67,108,864 B; one that keeps everything R = (activations with 'none') / 32. 16 of each (torchtitan's
    # every-2nd block): 16 x 67,108,864 + 16 x R.
    none = training.estimate("llama3.1-8b", "dgx-a100", recompute="none", **TITAN).memory.activations_bytes
    full = training.estimate("llama3.1-8b", "dgx-a100", recompute="full", **TITAN).memory.activations_bytes
    half = training.estimate("llama3.1-8b", "dgx-a100", recompute="full", recompute_layers=16, **TITAN)
    assert full == 32 * 8192 * 4096 * 2
    assert half.memory.activations_bytes == pytest.approx(16 * 8192 * 4096 * 2 + 16 * none / 32, rel=1e-12)


def test_interleaved_stage_recomputes_n_layers_of_each_chunk():
    # pp 4 x v 2 over 32 layers: each stage holds 2 chunks of 4 layers; N = 1 recomputes 2 of its 8 layers
    # (Megatron-LM's block method per TransformerBlock, a chunk), so the stage's activations and recomputed
    # FLOPs are 2/8 of 'full''s plus 6/8 of 'none''s
    none = training.estimate("llama2-7b", "dgx-h100", recompute="none", **MEGATRON)
    full = training.estimate("llama2-7b", "dgx-h100", recompute="full", **MEGATRON)
    one = training.estimate("llama2-7b", "dgx-h100", recompute="full", recompute_layers=1, **MEGATRON)
    expected = 0.25 * full.memory.activations_bytes + 0.75 * none.memory.activations_bytes
    assert one.memory.activations_bytes == pytest.approx(expected, rel=1e-12)
    # the model's FLOPs: 4 stages x 2 chunks x 1 = 8 of 32 layers recomputed -> a quarter of 'full''s extra forward
    assert one.hardware_flops - one.model_flops == pytest.approx(0.25 * (full.hardware_flops - full.model_flops))


def test_recomputed_flops_count_only_the_recomputed_layers():
    # one token of a 4096-wide layer of 12 h^2 weights at s = 2048: forward 2 x 12 h^2 + 4 s h = 402,653,184 +
    # 33,554,432 = 436,207,616; over a stage half recomputed: 218,103,808 per layer on average
    per_layer = 2 * 12 * 4096**2 + 4 * 2048 * 4096
    assert float(recomputed_forward_flops_array(12 * 4096**2, 4096, 1, 2048, 2, 0.5)) == per_layer / 2
    assert float(recomputed_forward_flops_array(12 * 4096**2, 4096, 1, 2048, 2)) == per_layer
    full = step_flops("llama2-7b", 8, 4096, "full")
    quarter = step_flops("llama2-7b", 8, 4096, "full", recomputed_layers=8)
    assert quarter.recomputation == pytest.approx(full.recomputation / 4, rel=1e-12)
    assert step_flops("llama2-7b", 8, 4096, "full", recomputed_layers=32).recomputation == full.recomputation
    with pytest.raises(ConfigurationError, match="full_share"):
        recomputed_forward_flops_array(1.0, 1.0, 1.0, 1.0, 2, 1.5)


@pytest.mark.parametrize("bad", [-1, 33, 2.5, "16", True, float("nan"), None])
def test_bad_recompute_layers_names_the_range(bad):
    if bad is None:
        training.estimate("llama3.1-8b", "dgx-a100", recompute="full", recompute_layers=bad, **TITAN)
        return
    with pytest.raises(ConfigurationError, match=r"recompute_layers=.* from 0 to 32"):
        training.estimate("llama3.1-8b", "dgx-a100", recompute="full", recompute_layers=bad, **TITAN)


def test_recompute_layers_needs_full_recomputation_and_a_dense_model():
    with pytest.raises(ConfigurationError, match="recompute='full'"):
        training.estimate("llama3.1-8b", "dgx-a100", recompute="selective", recompute_layers=4, **TITAN)
    with pytest.raises(ConfigurationError, match="dense models only"):
        training.estimate(
            "mixtral-8x7b", "dgx-h100", nodes=1, global_batch=8, recompute="full", recompute_layers=4, ep=8, dp=8
        )


def test_the_record_names_recompute_layers_only_when_given():
    assert "recompute_layers" not in training.estimate("llama3.1-8b", "dgx-a100", recompute="full", **TITAN).config
    est = training.estimate("llama3.1-8b", "dgx-a100", recompute="full", recompute_layers=16.0, **TITAN)
    assert est.config["recompute_layers"] == 16 and isinstance(est.config["recompute_layers"], int)


def test_torchtitan_counts_every_kth_block():
    # torchtitan@3faaa1a0d parallelize_llama.py: _count += 1 per block; checkpointed iff _count % ac_freq == 0, and
    # every block when ac_freq is 0: blocks 2, 4, ..., 32 of 32 for "2"; 3, 6, ..., 39 of 40 for "3"
    assert partial_recompute.torchtitan_checkpointed_layers(32, 2) == 16
    assert partial_recompute.torchtitan_checkpointed_layers(40, 3) == 13
    assert partial_recompute.torchtitan_checkpointed_layers(40, 0) == 40
    for layers in (32, 40, 80):
        for k in range(2, layers + 1):
            n = partial_recompute.torchtitan_checkpointed_layers(layers, k)
            found = partial_recompute.torchtitan_ac_frequency(layers, n)
            assert found is not None and partial_recompute.torchtitan_checkpointed_layers(layers, found) == n
    assert partial_recompute.torchtitan_ac_frequency(32, 11) is None  # floor(32/2) = 16, floor(32/3) = 10


def test_torchtitan_export_writes_the_every_kth_option_or_refuses():
    def checkpoint(n):
        est = training.estimate("llama3.1-8b", "dgx-a100", recompute="full", recompute_layers=n, **TITAN)
        return tomllib.loads(export.export(est, "torchtitan", 8))["activation_checkpoint"]

    assert checkpoint(16) == {"mode": "selective", "selective_ac_option": "2"}
    assert checkpoint(10) == {"mode": "selective", "selective_ac_option": "3"}
    assert checkpoint(32) == {"mode": "full"}
    assert checkpoint(0) == {"mode": "none"}
    with pytest.raises(ConfigurationError, match="no k gives 11"):
        checkpoint(11)


def test_megatron_export_writes_the_block_method_and_reads_it_back():
    est = training.estimate("llama2-7b", "dgx-h100", recompute="full", recompute_layers=3, **MEGATRON)
    text = export.export(est, "megatron", 8)
    words = text.replace("\\\n", " ").split()
    i = words.index("--recompute-method")
    assert words[i - 2 : i + 4] == [
        "--recompute-granularity",
        "full",
        "--recompute-method",
        "block",
        "--recompute-num-layers",
        "3",
    ]
    back = parse_megatron(text)
    assert (back["recompute"], back["recompute_layers"]) == ("full", 3)
    every = training.estimate("llama2-7b", "dgx-h100", recompute="full", recompute_layers=4, **MEGATRON)
    assert "--recompute-method uniform --recompute-num-layers 1" in " ".join(
        export.export(every, "megatron", 8).replace("\\\n", " ").split()
    )
    with pytest.raises(ConfigurationError, match="between 1 and"):
        export.export(
            training.estimate("llama2-7b", "dgx-h100", recompute="full", recompute_layers=0, **MEGATRON),
            "megatron",
            8,
        )


def test_cli_estimate_takes_recompute_layers(capsys):
    args = ["estimate", "--model", "llama3.1-8b", "--gpus", "64", "--node", "dgx-a100", "--fabric", "ib-hdr"]
    args += ["--global-batch", "64", "--seq", "8192", "--zero", "3", "--memory-recipe", "fsdp2"]
    args += ["--recompute", "full", "--recompute-layers", "16"]
    assert cli.main(args) == 0
    assert "recompute full (16 layers per stage chunk)" in capsys.readouterr().out
    assert cli.main([*args, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    est = training.estimate(
        "llama3.1-8b", "dgx-a100", recompute="full", recompute_layers=16, **{**TITAN, "kernels": "fused"}
    )
    assert data["recompute_layers"] == 16
    assert data["step_time_s"] == pytest.approx(est.step_time_s)
    assert cli.main([*args[:-1], "40"]) == 2
    assert "recompute_layers=40" in capsys.readouterr().err


def test_the_torchtitan_selective_layer_runs_are_priced_as_reference_runs():
    for rid, n in (
        ("torchtitan-a100-64gpu-llama3-8b-sel-layer", 16),
        ("torchtitan-a100-64gpu-llama2-13b-sel-layer", 20),
    ):
        run = validation.run(rid)
        block = run["distlab"]
        assert block["role"] == "reference" and block["expressible"]
        assert (block["estimate"]["recompute"], block["estimate"]["recompute_layers"]) == ("full", n)
        assert validation.predict(run).config["recompute_layers"] == n


def test_per_layer_time_is_linear_in_the_layers_recomputed():
    # pp 1, 32 layers, tp 2 (no SP): half the layers recomputed pay half the extra forward (FLOPs, attention core,
    # element-wise passes) and half the extra TP all-reduces (4 + 2 x 16/32 = 5 per layer): compute and TP time are
    # the mean of 'none''s and 'full''s
    layout = dict(nodes=2, fabric="ib-ndr", global_batch=32, seq_len=4096, tp=2, memory_recipe="megatron")
    est = {
        n: training.estimate("llama2-7b", "dgx-h100", recompute="full", recompute_layers=n, **layout)
        for n in (0, 16, 32)
    }
    for term in ("compute_s", "tp_comm_s"):
        assert getattr(est[16], term) == pytest.approx((getattr(est[0], term) + getattr(est[32], term)) / 2, rel=1e-12)
