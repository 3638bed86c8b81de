"""The MoE catalog: parameter counts derived by hand from the published configurations and checked against
the published totals and active counts (Lesson 10 §1)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distlab import moe
from distlab.errors import ConfigurationError, DistlabError, UnknownNameError

# Hand derivations (every number from the model's config.json, see each entry's source):
#
# Mixtral-8x7B: h 4096, 32 layers, 32 heads of 128, 8 KV heads, 8 experts of f 14336, V 32000, untied.
#   attention 2*4096*4096 + 2*4096*1024 = 41,943,040; one expert 3*4096*14336 = 176,160,768;
#   router 4096*8 = 32,768; norms 8,192 -> layer 41,943,040 + 8*176,160,768 + 32,768 + 8,192 = 1,451,270,144
#   total 32*1,451,270,144 + 2*32000*4096 + 4096 = 46,702,792,704 (Mistral: 46.7B)
#   active: layer with 2 experts 394,305,536; 32 x that + 262,148,096 = 12,879,925,248 (Mistral: 12.9B)
MIXTRAL_TOTAL, MIXTRAL_ACTIVE = 46_702_792_704, 12_879_925_248
#
# DeepSeek-V3: h 7168, 128 heads, MLA q_lora 1536, kv_lora 512, nope 128, rope 64, v 128.
#   attention 7168*1536 + 1536 + 1536*128*192 + 7168*(512+64) + 512 + 512*128*256 + 128*128*7168
#           = 11,010,048 + 1,536 + 37,748,736 + 4,128,768 + 512 + 16,777,216 + 117,440,512 = 187,107,328
#   dense layer (3 of them): 187,107,328 + 3*7168*18432 + 2*7168 = 583,483,392
#   expert 3*7168*2048 = 44,040,192; MoE layer 187,107,328 + 14,336 + (256 + 1)*44,040,192 + 256*7168 + 256
#           = 11,507,286,272 (58 of them)
#   total 3*583,483,392 + 58*11,507,286,272 + 2*129280*7168 + 7168 = 671,026,419,200 (report: 671B)
#   active without the input embedding: 3*583,483,392 + 58*(187,121,664 + 9*44,040,192 + 1,835,264)
#           + 926,679,040 + 7168 = 36,625,618,432 (report: 37B)
DEEPSEEK_TOTAL, DEEPSEEK_ACTIVE_NO_EMBEDDING = 671_026_419_200, 36_625_618_432
#
# Qwen3-235B-A22B: h 4096, 94 layers, 64 heads of 128, 4 KV heads, QK norms, 128 experts of 1536, V 151936.
#   attention 2*4096*8192 + 2*4096*512 + 2*128 = 71,303,424; expert 3*4096*1536 = 18,874,368;
#   router 4096*128 = 524,288; layer 71,303,424 + 8,192 + 524,288 + 128*18,874,368 = 2,487,755,008
#   total 94*2,487,755,008 + 2*151936*4096 + 4096 = 235,093,634,560 (235B)
#   active: 94*(71,303,424 + 8,192 + 524,288 + 8*18,874,368) + 1,244,663,808 = 22,190,763,520 (22B)
#   non-embedding (model card 234B): 235,093,634,560 - 1,244,659,712 = 233,848,974,848
QWEN_TOTAL, QWEN_ACTIVE = 235_093_634_560, 22_190_763_520
#
# gpt-oss-120b: h 2880, 36 layers, 64 heads of 64, 8 KV heads, biases, sinks, 128 experts of 2880, top-4.
#   attention 2*2880*4096 + 2*2880*512 + (4096 + 1024 + 2880) + 64 = 26,550,144
#   expert 3*2880*2880 + 2*2880 + 2880 = 24,891,840; router 2880*128 + 128 = 368,768
#   layer 26,550,144 + 5,760 + 368,768 + 128*24,891,840 = 3,213,080,192
#   total 36*3,213,080,192 + 2*201088*2880 + 2880 = 116,829,156,672 (card: 116.83B)
#   active without the embedding: 36*(26,924,672 + 4*24,891,840) + 579,133,440 + 2880 = 5,132,849,472 (5.13B)
GPT_OSS_TOTAL, GPT_OSS_ACTIVE_NO_EMBEDDING = 116_829_156_672, 5_132_849_472


@pytest.mark.parametrize(
    "name, total",
    [
        ("mixtral-8x7b", MIXTRAL_TOTAL),
        ("deepseek-v3", DEEPSEEK_TOTAL),
        ("qwen3-235b-a22b", QWEN_TOTAL),
        ("gpt-oss-120b", GPT_OSS_TOTAL),
    ],
)
def test_total_counts_equal_the_hand_derivation(name, total):
    assert moe.model(name).parameter_count() == total


@pytest.mark.parametrize(
    "name, embedding, active",
    [
        ("mixtral-8x7b", True, MIXTRAL_ACTIVE),
        ("deepseek-v3", False, DEEPSEEK_ACTIVE_NO_EMBEDDING),
        ("qwen3-235b-a22b", True, QWEN_ACTIVE),
        ("gpt-oss-120b", False, GPT_OSS_ACTIVE_NO_EMBEDDING),
    ],
)
def test_active_counts_equal_the_hand_derivation(name, embedding, active):
    assert moe.model(name).active_parameter_count(embedding=embedding) == active


@pytest.mark.parametrize("name", sorted(moe.MOE_MODELS))
def test_counts_round_to_the_published_figures(name):
    m = moe.model(name)
    # the publishers round to the digits they print: 46.7B / 12.9B, 671B / 37B, 235B / 22B, 116.83B / 5.13B
    digits = {"mixtral-8x7b": 1, "deepseek-v3": 0, "qwen3-235b-a22b": 0, "gpt-oss-120b": 2}[name]
    assert round(m.parameter_count() / 1e9, digits) == m.published_params / 1e9
    active = m.active_parameter_count(embedding=m.published_active_embedding)
    assert round(active / 1e9, digits) == m.published_active / 1e9


def test_qwen3_non_embedding_count_matches_the_model_card():
    m = moe.model("qwen3-235b-a22b")
    assert round((m.parameter_count() - 2 * m.embedding_params()) / 1e9) == 234


def test_deepseek_mla_attention_by_hand():
    assert moe.model("deepseek-v3").attention_params_per_layer() == 187_107_328


def test_routed_experts_are_almost_all_of_deepseek():
    m = moe.model("deepseek-v3")
    # 58 layers x 256 experts x 44,040,192 = 653,894,770,688 of 671B
    assert m.routed_expert_parameter_count() == 58 * 256 * 44_040_192
    assert m.non_expert_parameter_count() == DEEPSEEK_TOTAL - 58 * 256 * 44_040_192


def test_dense_equivalent_has_active_equal_to_total():
    # one expert, top-1: the MoE layer is a dense SwiGLU layer plus a 1-column router
    m = moe.MoEModel(name="dense-like", layers=2, hidden=8, heads=2, vocab=10, experts=1, expert_ffn=16, top_k=1)
    assert m.active_parameter_count() == m.parameter_count()


def test_unknown_name_lists_close_names():
    with pytest.raises(UnknownNameError, match="deepseek-v3"):
        moe.model("deepseek-v2")


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(top_k=9), "top_k=9 is more than the 8 experts"),
        (dict(dense_layers=33), "dense_layers=33"),
        (dict(dense_layers=1), "needs dense_ffn"),
        (dict(attention="mha"), "attention='mha'"),
        (dict(attention="mla"), "must be >= 1 for attention='mla'"),
        (dict(kv_heads=3), "kv_heads=3"),
        (dict(window_layers=2), "sliding_window"),
        (dict(expert_ffn=0), "expert_ffn"),
        (dict(shared_experts=-1), "shared_experts"),
        (dict(published_params=float("nan")), "published_params"),
    ],
)
def test_invalid_shapes_raise_our_error(kwargs, words):
    base = dict(
        name="m", layers=32, hidden=4096, heads=32, kv_heads=8, vocab=32000, experts=8, expert_ffn=14336, top_k=2
    )
    with pytest.raises(ConfigurationError, match=words):
        moe.MoEModel(**{**base, **kwargs})


@settings(max_examples=60, deadline=None)
@given(
    layers=st.integers(1, 8),
    dense=st.integers(0, 8),
    hidden=st.sampled_from([8, 16, 64]),
    experts=st.integers(1, 64),
    k=st.integers(1, 64),
    shared=st.integers(0, 2),
    mla=st.booleans(),
    value=st.one_of(st.integers(-3, 3), st.floats(allow_nan=True), st.text(max_size=3)),
)
def test_fuzz_shapes_count_or_refuse(layers, dense, hidden, experts, k, shared, mla, value):
    extra = dict(attention="mla", kv_lora_rank=4, qk_nope_head_dim=4, qk_rope_head_dim=2, v_head_dim=4) if mla else {}
    try:
        m = moe.MoEModel(
            name="x",
            layers=layers,
            hidden=hidden,
            heads=2,
            vocab=50,
            experts=experts,
            expert_ffn=hidden * 2,
            top_k=k,
            shared_experts=shared,
            dense_layers=dense,
            dense_ffn=hidden * 4,
            **extra,
        )
    except DistlabError:
        assert k > experts or dense > layers
        return
    assert 0 < m.active_parameter_count(embedding=False) < m.active_parameter_count() <= m.parameter_count()
    assert m.non_expert_parameter_count() + m.routed_expert_parameter_count() == m.parameter_count()
    for field in ("experts", "top_k", "expert_ffn", "layers"):
        try:
            moe.MoEModel(**{**m.__dict__, field: value})
        except DistlabError:
            pass


def test_dense_lookup_points_moe_models_to_distlab_moe():
    from distlab import models

    with pytest.raises(UnknownNameError, match="mixture-of-experts model: its experts are counted by distlab.moe"):
        models.model("DeepSeek-V3")
