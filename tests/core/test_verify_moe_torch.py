"""A tiny MoE block's saved activations in PyTorch against distlab.moe.moe_activation_bytes (lesson 10 §4).

torch counts (saved_tensors_hooks over a real forward and backward); the formula predicts. Skipped without torch.
"""

import pytest

from distlab.verify import TORCH_MESSAGE, torch_available

if not torch_available():  # also skips a broken install, with the reason
    pytest.skip(TORCH_MESSAGE, allow_module_level=True)

import torch  # noqa: E402

from distlab import moe  # noqa: E402
from distlab.errors import ConfigurationError  # noqa: E402
from distlab.verify import build_moe_block, measure_moe_activations, tiny_moe_model  # noqa: E402


@pytest.mark.parametrize("b, s", [(2, 32), (1, 16), (3, 20)])
def test_saved_bytes_equal_the_formula_plus_indices_and_norm_statistics(b, s):
    m = measure_moe_activations(micro_batch_size=b, seq_len=s)
    T, h, E, k, F, S = b * s, 64, 8, 2, 96, 1  # tiny_moe_model(): h 64, 8 experts of width 96, top-2, 1 shared
    # By hand, per token in bf16 (2 B): norm input h, router input h (the norm output, also the shared expert's
    # input), router scores E, combine weights k, copies' inputs k h, W1 outputs k 2F, SwiGLU outputs k F, copies'
    # outputs k h, shared expert 2F + F: (2 x 64 + 8 + 2 + 2 x 64 + 2 x 288 + 2 x 64 + 288) x 2 = 2,516 B
    per_token = (2 * h + E + k + k * h + k * 3 * F + k * h + S * 3 * F) * 2
    assert per_token == 2516
    assert m.predicted_bytes == T * per_token
    # what the formula leaves out: three int64 index tensors of T k entries (top-k's indices, the sort order, the
    # token of each copy) and the RMSNorm's fp32 1/rms per token
    assert m.index_bytes == 3 * 8 * T * k
    assert m.norm_stats_bytes == 4 * T
    assert m.measured_bytes == T * per_token + 3 * 8 * T * k + 4 * T
    assert m.gap_bytes == 0


def test_the_experts_saved_one_w1_output_and_one_swiglu_output_per_copy():
    # per expert, W1's output (n_e x 2F) and SwiGLU's output (n_e x F); the n_e sum to T k = 128 copies
    m = measure_moe_activations()
    swiglu = [t for t in m.saved if t.op == "expert SwiGLU"]
    w2 = [t for t in m.saved if t.op == "expert W2"]
    assert sum(t.shape[0] for t in swiglu) == sum(t.shape[0] for t in w2) == 2 * 32 * 2
    assert all(t.shape[1] == 192 for t in swiglu) and all(t.shape[1] == 96 for t in w2)
    assert m.predicted_parts["expert_ffn"] == sum(t.nbytes for t in swiglu + w2)


def test_the_blocks_fused_kernels_have_autograds_gradients():
    # the hand-written backward of the fused RMSNorm and SwiGLU against finite differences (float64)
    block = build_moe_block(tiny_moe_model()).double()
    x = torch.randn(2, 1, 64, dtype=torch.float64, generator=torch.Generator().manual_seed(0), requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: block(t, lambda _name: None), (x,), fast_mode=True)


def test_a_model_too_large_for_a_cpu_is_our_error():
    with pytest.raises(ConfigurationError, match="expert weights is more than the 16,777,216"):
        measure_moe_activations(moe.model("mixtral-8x7b"), 1, 8)
