"""Attention kernels on Blackwell (issue 30): the B200's rates by sequence length and direction from Zadouri et al.
2026 (FlashAttention-4, arXiv 2603.05451) Figs. 4 and 6, causal panels; GB200 at the B200's shares; GB300 faster by
its measured speed-up over GB200 (NVIDIA's cuDNN 9.19 harness). Each figure is checked against the data file, the
shares by hand, the GB200 assumption against an independent measurement, and the step model's use of them."""

from __future__ import annotations

import pytest

from distlab import attention_kernels, training, validation


def _bench() -> dict:
    return {m["id"]: m for m in validation.microbenchmarks("calibration")}


@pytest.mark.parametrize("kernel", ["fa2", "cudnn", "fa4"])
def test_b200_figures_are_the_papers_bars(kernel):
    """The stored TFLOP/s are the data file's (the paper's printed bar labels), read back as shares of the B200's
    2,250 dense BF16 TFLOP/s at each measured length, both directions with the causal mask (no H200 ratio applied):
    cuDNN 9.13.0 at 8k forward 1168 / 2250 = 0.5191, backward 1008 / 2250 = 0.4480."""
    measured = _bench()[f"zadouri2026-fa4-fig4-6-b200-hd128-{kernel}"]["measured"]
    table, note = attention_kernels.kernel_rate_table("b200", kernel)
    assert note == "" and list(table[0]) == measured["seq_len"] == [1024, 2048, 4096, 8192, 16384, 32768]
    for s, fw, bw in zip(measured["seq_len"], measured["forward_causal_tflops"], measured["backward_causal_tflops"]):
        forward, backward = attention_kernels.kernel_rates(table, s)
        assert (float(forward), float(backward)) == pytest.approx((fw / 2250, bw / 2250), rel=1e-12)
    cudnn, _ = attention_kernels.kernel_rate_table("b200", "cudnn")
    assert [round(float(x), 4) for x in attention_kernels.kernel_rates(cudnn, 8192)] == [0.5191, 0.448]


def test_sdpa_runs_cudnn_on_blackwell_and_fa2_on_hopper():
    # torchtitan puts PyTorch's cuDNN backend first on sm100 (pytorch/torchtitan PR #1196, "Use cudnn backend on B200");
    # on the H100 its SDPA runs the flash backend, FlashAttention-2's kernels
    for gpu in ("b200", "gb200", "gb300"):
        assert attention_kernels.kernel_rate_table(gpu, "sdpa") == attention_kernels.kernel_rate_table(gpu, "cudnn")
    assert attention_kernels.kernel_rate_table("h100-sxm", "sdpa") == attention_kernels.kernel_rate_table(
        "h100-sxm", "fa2"
    )
    # FlashAttention-3 is Hopper only: on Blackwell the fallback, said so; FlashAttention-4 has no Hopper figure
    assert attention_kernels.kernel_rate_table("b200", "fa3")[1].startswith("no published fa3 rate on b200")
    assert attention_kernels.kernel_rate_table("h100-sxm", "fa4")[1].startswith("no published fa4 rate on h100-sxm")


def test_gb200_takes_the_b200s_shares_which_an_independent_harness_confirms():
    """GB200 (the B200's dies, 2,500 TFLOP/s) is given the B200's shares of its peak, an assumption. Checked against
    NVIDIA's cudnn-frontend harness on a GB200 and the paper's cuDNN 9.19.1.2 bars on a B200 (the same cuDNN): at 8k,
    16k, 32k the paper's forward 1430, 1509, 1540 / 2250 = 0.636, 0.671, 0.684 and backward 1218, 1293, 1337 / 2250 =
    0.541, 0.575, 0.594 (Fig. 4 and Fig. 6, the cuDNN 9.19.1 series) against the GB200's within 3.5%."""
    assert attention_kernels.kernel_rate_table("gb200", "cudnn") == attention_kernels.kernel_rate_table("b200", "cudnn")
    cfe = _bench()["nvidia-cudnn-frontend-sdpa-gb200-gb300-cudnn919"]["measured"]
    b200_919 = {8192: (1430, 1218), 16384: (1509, 1293), 32768: (1540, 1337)}
    for s, (fw, bw) in b200_919.items():
        i = cfe["seq_len"].index(s)
        gb200 = (cfe["gb200_forward_causal_tflops"][i] / 2500, cfe["gb200_backward_causal_tflops"][i] / 2500)
        assert gb200 == pytest.approx((fw / 2250, bw / 2250), rel=0.035), s


def test_gb300_is_gb200_times_its_measured_speedup():
    """GB300 / GB200 in the same harness and cuDNN version, per direction and length (1k taken as 2k): at 8k forward
    1887 / 1598 = 1.1809, backward 1385 / 1311 = 1.0564. GB300's cuDNN share at 8k forward 1168 / 2250 x 1.1809 =
    0.6130. FlashAttention-2 keeps GB200's rate."""
    cfe = _bench()["nvidia-cudnn-frontend-sdpa-gb200-gb300-cudnn919"]["measured"]
    forward, backward = attention_kernels.GB300_ATTENTION_SPEEDUP
    ratios = [
        [u / g for u, g in zip(cfe[f"gb300_{d}_causal_tflops"], cfe[f"gb200_{d}_causal_tflops"])]
        for d in ("forward", "backward")
    ]
    assert list(forward) == pytest.approx([ratios[0][0], *ratios[0]]) and list(backward) == pytest.approx(
        [ratios[1][0], *ratios[1]]
    )
    assert round(forward[3], 4) == 1.1809 and round(backward[3], 4) == 1.0564
    table, _ = attention_kernels.kernel_rate_table("gb300", "cudnn")
    assert float(attention_kernels.kernel_rates(table, 8192)[0]) == pytest.approx(1168 / 2250 * 1887 / 1598, rel=1e-12)
    assert 1.15 < min(forward) and max(forward) < 1.3 and 1.0 < min(backward) and max(backward) < 1.1  # not 2x
    assert attention_kernels.kernel_rate_table("gb300", "fa2") == attention_kernels.kernel_rate_table("gb200", "fa2")


def test_the_step_model_prices_blackwell_attention_at_the_kernels_rate():
    """On an HGX B200, Llama 3.1 8B at 8,192 tokens: the step is faster under cuDNN (0.52 of peak forward at 8k) than
    under FA2 (0.18), Megatron's default kernel (cuDNN) is what estimate() uses, and the compute model names it."""
    from distlab import efficiency

    kw = dict(global_batch=8, seq_len=8192, dp=8, nodes=1, fabric="ib-ndr")
    cluster = "hgx-b200"
    runs = {k: training.estimate("llama3.1-8b", cluster, attention_kernel=k, **kw) for k in ("fa2", "cudnn")}
    default = training.estimate("llama3.1-8b", cluster, memory_recipe="megatron", **kw)
    assert runs["cudnn"].compute_s < runs["fa2"].compute_s
    assert default.compute_s == pytest.approx(
        training.estimate("llama3.1-8b", cluster, memory_recipe="megatron", attention_kernel="cudnn", **kw).compute_s
    )
    assert "the cudnn kernel's measured rate" in efficiency.compute_model("b200", attention_kernel="cudnn").describe()
