"""distlab.training: FLOPs, MFU and training-time formulas against hand derivations and Narayanan et al. 2021."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from distlab import models, training
from distlab.errors import ConfigurationError, DistlabError

# Narayanan et al. 2021, Table 1 (A100, peak 312 TFLOP/s bf16): model, batch size, GPUs,
# achieved teraFLOP/s per GPU, percentage of theoretical peak, aggregate petaFLOP/s (None where
# not checked against a copy of the table). Only rows confirmed against a copy are listed.
TABLE_1 = [
    ("megatron-gpt-1.7b", 512, 32, 137, 44, None),
    ("megatron-gpt-18.4b", 1024, 256, 135, 43, None),
    ("megatron-gpt-145.6b", 2304, 1536, 148, 47, None),
    ("megatron-gpt-529.6b", 2520, 2520, 163, 52, None),
    ("megatron-gpt-1t", 3072, 3072, 163, 52, 502.0),
]


def test_six_p_t_by_hand():
    # 7e9 params x 1e6 tokens x 6 = 4.2e16 FLOPs; full recomputation: x 8 = 5.6e16
    assert training.model_flops(7e9, 1e6) == 4.2e16
    assert training.hardware_flops(7e9, 1e6, "full") == 5.6e16
    assert training.hardware_flops(7e9, 1e6, "selective") == 4.2e16


@pytest.mark.parametrize("name, batch, gpus, tflops, percent, aggregate", TABLE_1)
def test_table_1_percent_of_peak_and_aggregate(name, batch, gpus, tflops, percent, aggregate):
    model = models.model(name)
    flops = training.megatron_flops_per_iteration(batch, 2048, model.layers, model.hidden, 51200)
    # The iteration time implied by Table 1's per-GPU throughput; MFU computed from it must
    # give back the table's percentage of the 312 TFLOP/s peak (to its rounding).
    step_time = flops / (tflops * 1e12 * gpus)
    assert 100 * training.mfu(flops, step_time, gpus, 312e12) == pytest.approx(percent, abs=0.5)
    if aggregate is not None:  # aggregate = per-GPU x GPUs; the per-GPU figure is rounded to 1 TFLOP/s
        assert tflops * gpus / 1000 == pytest.approx(aggregate, abs=0.5 * gpus / 1000 + 0.05)


@pytest.mark.parametrize("name, batch, gpus, tflops, percent, aggregate", TABLE_1)
def test_eq_3_is_8PT_plus_attention_and_logits(name, batch, gpus, tflops, percent, aggregate):
    # Eq. 3 / (8 P B s) with P from Eq. 2: 96 B s l h^2 (1 + s/6h + V/16lh) / (96 B s l h^2 (1 + 13/12h + (V+s)/12lh))
    m = models.model(name)
    eq3 = training.megatron_flops_per_iteration(batch, 2048, m.layers, m.hidden, 51200)
    eq2 = models.megatron_parameter_count(m.layers, m.hidden, 51200, 2048)
    h, l = m.hidden, m.layers
    ratio = (1 + 2048 / (6 * h) + 51200 / (16 * l * h)) / (1 + 13 / (12 * h) + (51200 + 2048) / (12 * l * h))
    assert eq3 / (8 * eq2 * batch * 2048) == pytest.approx(ratio, rel=1e-12)
    assert 1.0 < ratio < 1.15  # attention scores add a few percent at s = 2048


def test_eq_4_training_time_published_examples():
    # Narayanan et al. 2021, Sec. 5.1: GPT-3 (175B) on 300B tokens, 1024 A100s at 140 TFLOP/s: ~34 days;
    # 1T parameters on 450B tokens, 3072 A100s at 163 TFLOP/s: ~84 days. 8 T P / (n X):
    assert training.training_days(175e9, 300e9, 1024, 140e12) == pytest.approx(34, abs=0.5)
    assert training.training_days(1e12, 450e9, 3072, 163e12) == pytest.approx(84, abs=1.0)


def test_mfu_by_hand():
    # 4.2e16 FLOPs in 1 s on 100 GPUs of 1e15 FLOP/s: 4.2e16 / 1e17 = 0.42
    assert training.mfu(4.2e16, 1.0, 100, 1e15) == pytest.approx(0.42)
    assert training.mfu(4.2e16, "1 s", 100, "1 PFLOP/s") == pytest.approx(0.42)


@pytest.mark.parametrize("bad", [dict(step_time=0), dict(gpus=0), dict(gpus=2.5), dict(peak_flops="1 GB")])
def test_invalid_mfu_inputs(bad):
    kwargs = dict(model_flops_per_step=1e15, step_time=1.0, gpus=8, peak_flops=1e15) | bad
    with pytest.raises(DistlabError):
        training.mfu(**kwargs)


def test_fraction():
    assert training.check_fraction(0.5, "efficiency") == 0.5
    for bad in (0, 1.5, -0.1):
        with pytest.raises(ConfigurationError, match="efficiency"):
            training.check_fraction(bad, "efficiency")


@given(st.floats(1e6, 1e13), st.floats(1e3, 1e13), st.sampled_from(["none", "selective", "full"]))
def test_hardware_flops_at_least_model_flops(params, tokens, mode):
    assert training.hardware_flops(params, tokens, mode) >= training.model_flops(params, tokens)


@pytest.mark.parametrize(
    "field, value, words",
    [
        ("seq_len", 2**30 + 1, "more than 1,073,741,824 tokens"),
        ("seq_len", 8.4e152, "more than 1,073,741,824 tokens"),  # once gave an infinite step time
        ("global_batch", 2**41, "more than 1,099,511,627,776 sequences"),
        ("micro_batch_size", 2**21, "more than 1,048,576 sequences"),
    ],
)
def test_sizes_beyond_the_step_models_bounds_are_refused(field, value, words):
    # the bounds keep 6 x P x B x s and b x s x h finite floats: 6 x 1e12 x 2**40 x 2**30 ~ 7e36
    from distlab import hardware, planner

    config = dict(global_batch=2**20, seq_len=4096, micro_batch_size=1) | {field: value}
    cluster = hardware.cluster("dgx-h100", 2)
    with pytest.raises(ConfigurationError, match=words):
        training.estimate("llama2-7b", cluster, **config)
    if field != "micro_batch_size":
        with pytest.raises(ConfigurationError, match=words):
            planner.plan("llama2-7b", cluster, global_batch=config["global_batch"], seq_len=config["seq_len"])


def test_explain_without_a_gpu_capacity_gives_our_error():
    # a breakdown without capacity has fits None, so the estimate does not fit; explain() used to format
    # -None (TypeError) and now says why it cannot give the overflow
    import dataclasses

    est = training.estimate("llama2-7b", "dgx-h100", dp=8, tp=1, pp=1, global_batch=64, seq_len=4096)
    blind = dataclasses.replace(est, memory=dataclasses.replace(est.memory, capacity_bytes=None))
    assert not blind.fits
    with pytest.raises(ConfigurationError, match="no GPU capacity"):
        blind.explain()


def test_estimate_config_knows_estimates_keywords():
    """_arguments.ESTIMATE_KEYWORDS (what estimate_config accepts, below the step model) is estimate()'s signature."""
    import inspect

    from distlab._arguments import ESTIMATE_KEYWORDS

    assert ESTIMATE_KEYWORDS == tuple(inspect.signature(training.estimate).parameters)[2:]
