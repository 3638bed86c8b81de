"""FSDP's gradient path and llm-foundry's unpadding priced as the engines run them (issue 30): the memory recipes
'fsdp1' (Composer / llm-foundry), 'fsdp1-pure' and 'fsdp2' (torchtitan), the attention kernel 'fa2-unpad'.

Expected values are derived by hand below from the byte counts of benchmarks/RESULTS.md's 2026-11-29 section (read
from torch's FSDP1 _runtime_utils.py, FSDP2 _fsdp_collectives.py and llm-foundry's flash_attn_fn)."""

from __future__ import annotations

import pytest

from distlab import hardware, models, production, training
from distlab.attention_kernels import unpad_copy_bytes_per_token
from distlab.efficiency import MEMORY_TRAFFIC
from distlab.errors import ConfigurationError
from distlab.memory import precision_recipe
from distlab.memory_recipes import gradient_copy_bytes_per_param, gradient_reduce_bytes, memory_recipe

# Llama 2 7B on 2 DGX H100 nodes (16 GPUs), ZeRO-3, 2 microbatches of 1 x 4096 tokens per GPU
P = 6_738_415_616  # models.model('llama2-7b').parameter_count()
H, L, HBM = 4096, 32, 3.35e12  # hidden (32 heads x 128, MHA), layers, H100 SXM HBM3 B/s
KW = dict(global_batch=32, seq_len=4096, zero=3, recompute="none")


def _cluster():
    return hardware.cluster("dgx-h100", 2, "ib-ndr")


def _estimate(recipe, kernel, **kw):
    return training.estimate("llama2-7b", _cluster(), memory_recipe=recipe, attention_kernel=kernel, **{**KW, **kw})


def test_recipe_attributes_are_the_counted_bytes():
    # FSDP1 _reduce_grad: cast bf16 -> fp32 (read 2 + write 4) and divide in place (read 4 + write 4) = 14 B;
    # Composer PURE (reduce in bf16): the in-place divide only, read 2 + write 2 = 4 B; FSDP2: the copy into the
    # fp32 reduce-scatter buffer, read 2 + write 4 = 6 B. Reduce dtype fp32 (4 B) but for PURE (bf16, 2 B)
    mixed = precision_recipe("mixed")
    for name, copy, reduce in (("fsdp1", 14.0, 4.0), ("fsdp1-pure", 4.0, 2.0), ("fsdp2", 6.0, 4.0)):
        recipe = memory_recipe(name)
        assert gradient_copy_bytes_per_param(recipe, [0, 2, 3]).tolist() == [0.0, 0.0, copy]
        assert gradient_reduce_bytes(mixed, recipe, [0, 2, 3]).tolist() == [2.0, 2.0, reduce]
    # the teaching count and the other engines reduce at the precision's 2 B and copy nothing
    for name in ("zero-paper", "deepspeed", "megatron-fsdp"):
        assert gradient_reduce_bytes(mixed, memory_recipe(name), 3).tolist() == 2.0
        assert gradient_copy_bytes_per_param(memory_recipe(name), 3).tolist() == 0.0


def test_fsdp1_minus_fsdp2_is_eight_bytes_per_parameter_and_microbatch():
    # same kernel (fa2) and no recompute: the two engines differ only in the gradient processing, 14 - 6 = 8 B per
    # parameter and microbatch on every GPU (tp = pp = 1), at the element-wise traffic factor and the HBM bandwidth:
    # m = 32 / 16 = 2 microbatches; 2 x 8 x 6,738,415,616 x 1.4 / 3.35e12 = 45.06 ms
    one, two = _estimate("fsdp1", "fa2"), _estimate("fsdp2", "fa2")
    assert one.microbatches == 2
    want = 2 * 8 * P * MEMORY_TRAFFIC / HBM
    assert want == pytest.approx(0.04506, rel=1e-3)
    assert one.compute_s - two.compute_s == pytest.approx(want, rel=1e-9)
    # the data-parallel traffic is the same (both reduce-scatter in fp32)
    assert one.dp_comm_s == pytest.approx(two.dp_comm_s, rel=1e-12)


def test_fsdp2_gradient_copy_by_hand():
    # FSDP2 against the teaching count at the same kernel: + 2 microbatches x 6 B x P x 1.4 / HBM = 33.80 ms compute
    two, paper = _estimate("fsdp2", "fa2"), _estimate("zero-paper", "fa2")
    assert two.compute_s - paper.compute_s == pytest.approx(2 * 6 * P * MEMORY_TRAFFIC / HBM, rel=1e-9)


def test_fp32_reduce_doubles_the_reduce_scatter_bytes():
    # lesson 11's plan and the step model share memory_recipes.gradient_reduce_bytes: with fsdp2 each layer's
    # reduce-scatter carries 4 B per parameter (fp32), twice the 2 B of the bf16 all-gather. At line rate
    # (efficiency 0.5) on one DGX H100: ring over 8 GPUs, 7 steps of (3.4 us + bytes / 8 / 450 GB/s)
    layer = 2.0 * P / L  # the step model's layer in bf16
    one_node = hardware.cluster("dgx-h100", 1, "ib-ndr")
    plan = production.sharding_plan("llama2-7b", one_node, efficiency=0.5, memory_recipe="fsdp2")
    paper = production.sharding_plan("llama2-7b", one_node, efficiency=0.5)
    nv_bw, nv_lat = 450e9, hardware.link("nvlink4").latency
    assert plan.gather_s == pytest.approx(7 * (nv_lat + layer / (8 * nv_bw)), rel=1e-12)
    assert plan.reduce_s == pytest.approx(7 * (nv_lat + 2 * layer / (8 * nv_bw)), rel=1e-12)
    assert paper.reduce_s == pytest.approx(paper.gather_s, rel=1e-12)
    # NVLink bytes per microbatch: (2L - 1) gathers of 7/8 x layer and L reduce-scatters of 7/8 x 2 layer
    assert plan.nvlink_sent_bytes == pytest.approx(((2 * L - 1) + 2 * L) * 7 / 8 * layer, rel=1e-12)
    assert paper.nvlink_sent_bytes == pytest.approx((3 * L - 1) * 7 / 8 * layer, rel=1e-12)
    # the summary says what the reduction moves where it is not the gather's 16 bits
    assert plan.reduce_bytes == pytest.approx(2 * layer) and paper.reduce_bytes == pytest.approx(layer)
    assert "gradients reduced as 842 MB" in plan.summary() and "reduced as" not in paper.summary()


@pytest.mark.parametrize("nodes", [1, 2, 4])
def test_fsdp_app_and_step_model_agree_with_an_fp32_reduce(nodes):
    # one function, one number: sharding_plan(memory_recipe='fsdp2') exposes and moves what estimate() does
    cl = hardware.cluster("dgx-h100", nodes, "ib-ndr")
    plan = production.sharding_plan("llama2-7b", cl, seq_len=4096, memory_recipe="fsdp2")
    est = training.estimate(
        "llama2-7b", cl, global_batch=cl.gpus, seq_len=4096, zero=3, memory_recipe="fsdp2", attention_kernel="sdpa"
    )
    assert plan.exposed_s == pytest.approx(est.dp_exposed_s, rel=1e-12)
    assert (2 * L - 1) * plan.gather_s + L * plan.reduce_s == pytest.approx(est.dp_comm_s, rel=1e-12)
    assert L * (plan.timeline.forward_s + plan.timeline.backward_s) == pytest.approx(est.compute_s, rel=1e-12)


def test_unpad_copies_by_hand():
    # llm-foundry's flash_attn_fn per token and layer, MHA at 2 B: forward gathers q, k, v (read + write: 6 h
    # elements) and pads the output (zero fill, read, write: 3 h): 9 h x 2 = 18 h B; backward scatters dq, dk, dv
    # into zeros (9 h) and gathers d_out (2 h): 11 h x 2 = 22 h B; 40 h in all
    assert unpad_copy_bytes_per_token("fa2-unpad", H, H) == (18.0 * H, 22.0 * H)
    assert unpad_copy_bytes_per_token("fa2", H, H) == (0.0, 0.0)
    # in the step: 2 microbatches x 32 layers x 4096 tokens x 40 h B x 1.4 / HBM = 17.95 ms
    unpad, plain = _estimate("fsdp1", "fa2-unpad"), _estimate("fsdp1", "fa2")
    want = 2 * L * 4096 * 40 * H * MEMORY_TRAFFIC / HBM
    assert want == pytest.approx(0.017949, rel=1e-3)
    assert unpad.compute_s - plain.compute_s == pytest.approx(want, rel=1e-9)
    # full recomputation runs the wrapper's forward again: 58 h B per token and layer
    unpad, plain = _estimate("fsdp1", "fa2-unpad", recompute="full"), _estimate("fsdp1", "fa2", recompute="full")
    assert unpad.compute_s - plain.compute_s == pytest.approx(want * 58 / 40, rel=1e-9)


def test_llm_foundry_defaults_to_its_unpadding_wrapper():
    assert _estimate("fsdp1", None).config["attention_kernel"] == "fa2-unpad"
    assert _estimate("fsdp2", None).config["attention_kernel"] == "sdpa"


def test_a_bad_engine_name_lists_the_new_ones():
    with pytest.raises(ConfigurationError, match="fsdp2, fsdp2-sp-regather, fsdp1, fsdp1-pure"):
        memory_recipe("fsdp3")
    with pytest.raises(ConfigurationError, match="fsdp1-pure"):
        production.sharding_plan("llama2-7b", _cluster(), memory_recipe="fsdp3")
    assert models.model("llama2-7b").parameter_count() == P


def test_composer_fsdp1_has_no_tp_overlap_method():
    # tp_overlap=True means the engine's method: torchtitan's async TP for FSDP2; Composer / llm-foundry's FSDP1
    # has none (before, an unknown recipe fell back to Megatron's userbuffers)
    from distlab.tp_overlap import tp_overlap_method

    assert tp_overlap_method(True, "fsdp2") == "async-tp"
    assert tp_overlap_method(True, "fsdp1") == tp_overlap_method(True, "fsdp1-pure") == "none"
