"""distlab.flops: the one FLOP counter, checked against the papers' closed forms and by invariants."""

import pytest
from hypothesis import given, settings, strategies as st

from distlab import flops, models, training
from distlab.errors import DistlabError

MEGATRON_GPT = [name for name in models.MODELS if name.startswith("megatron-gpt")] + ["gpt3-175b"]


@pytest.mark.parametrize("name", MEGATRON_GPT)
@pytest.mark.parametrize("batch, seq_len", [(1, 2048), (1536, 2048), (8, 8192)])
def test_full_recomputation_is_narayanan_eq3(name, batch, seq_len):
    # Narayanan et al. 2021, Eq. 3 (full recomputation, attention and logits): 96 B s l h^2 (1 + s/6h + V/16lh).
    # Eq. 3 counts the 12h^2 weights of a GPT block; distlab also counts its 13h norm and bias weights, executed
    # 4 times (forward, recomputed forward, 2 x backward) at 2 FLOPs each per token: subtract 8 x 13h x l x tokens.
    m = models.model(name)
    assert m.ffn == 4 * m.hidden and m.kv_heads == m.heads and m.params_per_layer() == 12 * m.hidden**2 + 13 * m.hidden
    eq3 = training.megatron_flops_per_iteration(batch, seq_len, m.layers, m.hidden, m.vocab)
    counted = flops.step_flops(m, batch, seq_len, recompute="full").hardware_flops
    assert counted - 8 * 13 * m.hidden * m.layers * batch * seq_len == pytest.approx(eq3, rel=1e-12)


@pytest.mark.parametrize("name", ["llama2-7b", "llama3.1-70b", "gpt3-175b"])
def test_model_flops_are_palm_appendix_b(name):
    # Chowdhery et al. 2022 (PaLM), App. B: 6N + 12 L H Q T per token, N the parameters that multiply a token
    # (every layer, and the output layer; not the input-embedding lookup nor the learned positions; the final
    # norm, h weights, is left out by both), H heads, Q head size, T the sequence length.
    m = models.model(name)
    s = 4096
    n = m.layers * m.params_per_layer() + m.vocab * m.hidden
    palm = 6 * n + 12 * m.layers * m.heads * m.head_dim * s
    assert flops.model_flops_per_token(m, s) == pytest.approx(palm, rel=1e-12)


def test_llama2_7b_attention_share_by_hand():
    # Llama-2-7B at s = 4,096, per token and layer, forward: weights 2 x 202,383,360 = 404.77 MFLOP; attention
    # 4 x 4096 x 4096 = 67.11 MFLOP; logits 2 x 4096 x 32000 = 262.1 MFLOP once, 8.19 MFLOP per layer.
    # attention share = 67.11 / (404.77 + 67.11 + 8.19) = 0.1398
    m = models.model("llama2-7b")
    assert m.params_per_layer() == 202_383_360
    assert flops.step_flops(m, 1, 4096).attention_share == pytest.approx(
        67.108864 / (404.76672 + 67.108864 + 8.192), rel=1e-6
    )


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(sorted(models.MODELS)), st.integers(1, 4096), st.integers(1, 2**17))
def test_invariants(name, batch, seq_len):
    none, sel, full = (flops.step_flops(name, batch, seq_len, mode) for mode in ("none", "selective", "full"))
    assert none.model_flops == sel.model_flops == full.model_flops  # the model needs the same work
    assert none.hardware_flops == none.model_flops < sel.hardware_flops < full.hardware_flops
    # full recomputation repeats one forward of every layer: at most a third of training's 3 passes more
    assert full.hardware_flops < none.model_flops * (1 + 1 / 3)
    double = flops.step_flops(name, 2 * batch, seq_len)
    assert double.model_flops == pytest.approx(2 * none.model_flops, rel=1e-12)  # linear in the batch
    longer = flops.step_flops(name, batch, 2 * seq_len)
    assert longer.attention_share > none.attention_share  # attention grows with s, weights do not


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(global_batch=0),
        dict(global_batch=1.5),
        dict(global_batch=1, seq_len=0),
        dict(global_batch=1, recompute="some"),
    ],
)
def test_bad_inputs_raise_our_error(kwargs):
    with pytest.raises(DistlabError):
        flops.step_flops("llama2-7b", **kwargs)
