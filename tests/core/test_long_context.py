"""Lesson 11b §1: context parallelism by ring attention (with causal load balancing) and by DeepSpeed-Ulysses
(distlab.production.context). Values derived by hand in the comments."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distlab import collectives, memory, models
from distlab.errors import ConfigurationError, DistlabError
from distlab.production import (
    causal_work_per_rank,
    compare_context_parallel,
    context_parallel_layer,
    ring_attention_step,
    ulysses_limit,
)

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("cp", [1, 2, 3, 4, 8, 16, 64])
def test_causal_load_balancing(cp):
    # 2cp chunks; chunk q does q + 1/2 blocks of work (q whole earlier blocks, half its own diagonal);
    # total = sum (q + 1/2) = (2cp)^2 / 2. Contiguous: the last rank holds chunks 2cp-2, 2cp-1:
    # (2cp - 1.5) + (2cp - 0.5) = 4cp - 2, a share (4cp - 2) / (2cp^2) = (2cp - 1)/cp^2, i.e. (2 - 1/cp) x 1/cp.
    # Zig-zag: rank r holds r and 2cp-1-r: (r + 1/2) + (2cp - 1 - r + 1/2) = 2cp for every rank.
    contiguous = causal_work_per_rank(cp, load_balanced=False)
    assert contiguous.sum() == pytest.approx(1.0)
    assert contiguous.max() == pytest.approx((2 * cp - 1) / cp**2)
    assert np.all(np.diff(contiguous) > 0) or cp == 1
    assert causal_work_per_rank(cp) == pytest.approx(np.full(cp, 1 / cp))


def test_ring_bytes_and_buffers_by_hand():
    # Llama 3.1 70B: 8 K/V heads x 128 = 1,024 wide (GQA: 8x narrower than h = 8,192). 128K tokens over cp = 16:
    # chunks of 8,192 tokens; a K/V block 2 x 8192 x 1024 x 2 B = 32 MiB. Forward: 15 sends; backward: K, V and
    # dK, dV, twice that: 3 x 15 x 32 MiB per layer. Buffer: current + incoming block, 64 MiB.
    r = context_parallel_layer("llama3.1-70b", 131072, 16)
    block = 2 * 8192 * 1024 * 2
    assert r.kv_width == 1024 and r.sent_bytes == 3 * 15 * block and r.buffer_bytes == 2 * block
    assert r.comm_s == pytest.approx(3 * 15 * ring_attention_step("llama3.1-70b", 131072, 16).comm_s)
    assert r.imbalance == 1.0 and r.exposed_s == 0.0
    unbalanced = context_parallel_layer("llama3.1-70b", 131072, 16, load_balanced=False)
    assert unbalanced.imbalance == pytest.approx(2 - 1 / 16)
    assert unbalanced.compute_s == pytest.approx(r.compute_s * (2 - 1 / 16))


def test_ulysses_bytes_by_hand():
    # Llama 3.1 8B (h = 4,096, 8 K/V heads of 128), 128K over cp = 8: 16,384 tokens per GPU. Forward all-to-alls
    # of Q and O (16384 x 4096 x 2 B = 134 MB each) and K, V (16384 x 1024 x 2 B = 33.6 MB each); each sends
    # 7/8 of its buffer; the backward as much again.
    u = context_parallel_layer("llama3.1-8b", 131072, 8, method="ulysses")
    q, kv = 16384 * 4096 * 2, 16384 * 1024 * 2
    assert u.sent_bytes == pytest.approx(2 * 7 / 8 * (2 * q + 2 * kv))
    a2a = [collectives.collective_cost("all-to-all", x, 8, link="nvlink4").time_s for x in (q, kv, kv, q)]
    assert u.comm_s == pytest.approx(2 * sum(a2a)) and u.exposed_s == u.comm_s  # nothing overlaps it
    # cp = 16 > 8 K/V heads: each K/V head goes to 2 GPUs, as if 16 heads wide
    assert context_parallel_layer("llama3.1-8b", 131072, 16, method="ulysses").kv_width == 16 * 128


def test_ulysses_limits():
    # Jacobs et al. 2023: whole heads per GPU. Llama 3.1 70B has 64 heads: cp = 128 is impossible for Ulysses,
    # while the ring only needs the sequence to split
    out = compare_context_parallel("llama3.1-70b", 131072, 128)
    assert "does not divide the 64 query heads" in out["ulysses"]
    assert out["ring"].cp == 128
    # tensor parallelism takes heads first: 64 / 8 = 8 per TP rank, so cp = 16 no longer fits
    assert "64 / 8" in ulysses_limit("llama3.1-70b", 16, tp=8)
    # heads divisible but K/V heads not replicable evenly: 24 heads, 8 K/V heads, cp = 12
    odd = models.TransformerModel(
        name="odd", layers=2, hidden=3072, heads=24, kv_heads=8, ffn=8192, vocab=1000, seq_len=4096
    )
    assert "not a multiple of the 8 K/V heads" in ulysses_limit(odd, 12)


def test_activation_memory_per_gpu_at_128k():
    # Llama 3.1 70B, 128K tokens, cp = 8, tp = 8 (with SP), selective recomputation, all 80 layers on the GPU:
    # distlab.memory at the local sequence of 16,384 tokens
    r = context_parallel_layer("llama3.1-70b", 131072, 8, tp=8)
    per_layer = memory.activation_bytes_per_layer("llama3.1-70b", 1, 16384, 8, True, "selective")
    assert r.activation_bytes == pytest.approx(80 * per_layer)
    assert 40e9 < r.activation_bytes < 50e9  # does not fit next to the weights without pp or recompute
    full = context_parallel_layer("llama3.1-70b", 131072, 8, tp=8, recompute="full", pp=4)
    # full recomputation keeps the layer input, 2 b s h / t bytes: 16384 x 8192 x 2 / 8 per layer, 20 layers
    assert full.activation_bytes == pytest.approx(20 * 16384 * 8192 * 2 / 8)


def test_when_each_wins():
    # on NVLink at 128K the ring hides under attention and Ulysses' all-to-alls show; at 8K over cp = 8 on
    # InfiniBand the ring's transfers outlast the (quadratically smaller) attention
    long = compare_context_parallel("llama3.1-8b", 131072, 8)
    assert long["ring"].exposed_s == 0 < long["ulysses"].exposed_s
    short = compare_context_parallel("llama3.1-8b", 8192, 8, link="ib-ndr")
    assert short["ring"].exposed_s > short["ulysses"].exposed_s


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: context_parallel_layer("llama3.1-8b", 131072, 8, method="tree"), "method='tree'"),
        (lambda: context_parallel_layer("llama3.1-8b", 1000, 8), "equal chunks"),
        (lambda: context_parallel_layer("llama3.1-8b", 131072, 1), "cp=1"),
        (lambda: context_parallel_layer("llama3.1-8b", 131072, 64, method="ulysses"), "does not divide the 32"),
        (lambda: context_parallel_layer("llama3.1-8b", 131072, 8, pp=64), "pp=64"),
        (lambda: causal_work_per_rank(0), "cp"),
    ],
)
def test_invalid_inputs_raise_our_errors(call, match):
    with pytest.raises(ConfigurationError, match=match):
        call()


@SETTINGS
@given(
    st.sampled_from(["llama3.1-8b", "llama3.1-70b", "llama2-7b"]),
    st.sampled_from([1024, 8192, 131072, 1000]),
    st.integers(-1, 130),
    st.sampled_from(["ring", "ulysses"]),
    st.booleans(),
    st.integers(-1, 4),
    st.sampled_from([1, 2, 3, 8]),
    st.sampled_from(["nvlink4", "ib-ndr"]),
    st.floats(-0.1, 1.2),
)
def test_any_input_is_finite_or_our_error(model, s, cp, method, balanced, b, tp, link, eff):
    try:
        r = context_parallel_layer(
            model, s, cp, method=method, load_balanced=balanced, micro_batch_size=b, tp=tp, link=link, efficiency=eff
        )
    except DistlabError:
        return
    values = (r.sent_bytes, r.comm_s, r.compute_s, r.exposed_s, r.buffer_bytes, r.activation_bytes, r.imbalance)
    assert all(math.isfinite(v) and v >= 0 for v in values)
    assert r.exposed_s <= r.comm_s + 1e-12 and r.imbalance >= 1 - 1e-12
    assert r.summary()


@SETTINGS
@given(st.integers(-3, 5000), st.booleans())
def test_work_shares_sum_to_one_or_our_error(cp, balanced):
    try:
        shares = causal_work_per_rank(cp, balanced)
    except DistlabError:
        return
    assert shares.sum() == pytest.approx(1.0) and shares.min() > 0
