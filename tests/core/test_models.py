"""Tests for distlab.models: parameter counts from the architecture against published figures."""

from __future__ import annotations

import dataclasses
import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distlab import models
from distlab.errors import ConfigurationError, DistlabError, UnknownNameError
from distlab.models import MEGATRON_TABLE_1, MODELS, TransformerModel, megatron_parameter_count

FAST = settings(max_examples=60, deadline=None)


def tiny(**overrides) -> TransformerModel:
    fields = dict(
        name="tiny",
        layers=2,
        hidden=8,
        heads=2,
        kv_heads=1,
        ffn=16,
        vocab=10,
        gated_mlp=True,
        norm="rmsnorm",
        biases=False,
        position_embeddings=0,
        tied_embeddings=False,
        seq_len=16,
    )
    fields.update(overrides)
    return TransformerModel(**fields)


# --- hand-derived counts ------------------------------------------------------------------


def test_tiny_llama_shape_counted_by_hand():
    # l=2, h=8, a=2 heads -> head_dim 4; 1 kv head -> kv_dim 4; f=16 gated; V=10; RMSNorm; untied.
    # attention: Q 8*8=64 + K,V 2*8*4=64 + O 8*8=64                    = 192
    # MLP:       gate, up, down 3*8*16                                 = 384
    # norms:     2 RMSNorms x 8                                        =  16
    # per layer: 192 + 384 + 16 = 592;  2 layers                       = 1184
    # embedding 10*8 = 80; output 10*8 = 80; final RMSNorm 8
    # total: 1184 + 80 + 80 + 8                                        = 1352
    m = tiny()
    assert (m.head_dim, m.kv_dim) == (4, 4)
    assert m.attention_params_per_layer() == 192
    assert m.mlp_params_per_layer() == 384
    assert m.norm_params_per_layer() == 16
    assert m.params_per_layer() == 592
    assert (m.embedding_params(), m.output_params(), m.final_norm_params()) == (80, 80, 8)
    assert m.parameter_count() == 1352


def test_tiny_gpt_shape_counted_by_hand_and_matches_eq2():
    # l=1, h=4, a=2, f=16=4h, V=10, 6 learned positions, LayerNorm, biases, tied output.
    # attention: 4 * 4*4 = 64 weights + biases 4+4+4+4 = 16            =  80  (4h^2 + 4h)
    # MLP:       2 * 4*16 = 128 weights + biases 16 + 4 = 20            = 148  (8h^2 + 5h)
    # norms:     2 LayerNorms x (4 + 4)                                 =  16  (4h)
    # per layer: 80 + 148 + 16                                          = 244  (12h^2 + 13h)
    # embeddings (10 + 6) * 4 = 64; output tied 0; final LayerNorm 2*4 = 8
    # total: 244 + 64 + 0 + 8                                           = 316
    # Eq. 2: 12*1*16 + 13*1*4 + (10 + 6)*4 = 192 + 52 + 64 = 308 = 316 - 8 (final norm)
    m = TransformerModel(
        name="tiny-gpt",
        layers=1,
        hidden=4,
        heads=2,
        ffn=16,
        vocab=10,
        position_embeddings=6,
        seq_len=6,
        norm="layernorm",
        biases=True,
        tied_embeddings=True,
        dropout=True,
    )
    assert m.kv_heads == 2 and m.kv_dim == 4
    assert m.attention_params_per_layer() == 80
    assert m.mlp_params_per_layer() == 148
    assert m.params_per_layer() == 244
    assert (m.embedding_params(), m.output_params(), m.final_norm_params()) == (64, 0, 8)
    assert m.parameter_count() == 316
    assert megatron_parameter_count(1, 4, 10, 6) == 308


# --- catalog against published figures ---------------------------------------------------

# Narayanan et al. 2021, Table 1 gives parameters in billions to one decimal, so those
# figures carry +-0.05B of rounding: 1.652B prints as "1.7" (2.8 % off) and 3.562B as "3.6"
# (1.05 % off). Every other published figure is met within 1 %.
TABLE_ROUNDING = {f"megatron-gpt-{suffix}": 0.05e9 for suffix, *_ in MEGATRON_TABLE_1}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_catalog_count_matches_published(name):
    m = MODELS[name]
    assert m.published_params is not None and m.source
    tolerance = max(0.01 * m.published_params, TABLE_ROUNDING.get(name, 0.0))
    assert abs(m.parameter_count() - m.published_params) <= tolerance


def test_llama2_7b_exact_hugging_face_count():
    # h=4096, f=11008, 32 layers, 32 heads = 32 kv heads, V=32000, untied, RMSNorm:
    # attention 4 * 4096^2 = 67,108,864; MLP 3 * 4096 * 11008 = 135,266,304; norms 2 * 4096 = 8,192
    # per layer 202,383,360; x 32 = 6,476,267,520
    # embedding + output 2 * 32000 * 4096 = 262,144,000; final norm 4,096
    # total 6,476,267,520 + 262,144,000 + 4,096 = 6,738,415,616
    # (transformers' num_parameters(); the checkpoint's safetensors total is 2,048 higher
    #  because it also stores the rotary inv_freq buffers, 64 per layer, which are not parameters.)
    m = models.model("llama2-7b")
    assert m.params_per_layer() == 202_383_360
    assert m.parameter_count() == 6_738_415_616


def test_llama31_8b_exact_hugging_face_count():
    # h=4096, 32 heads of 128, 8 kv heads -> kv_dim 1024, f=14336, V=128256, untied, RMSNorm:
    # attention 2*4096^2 + 2*4096*1024 = 33,554,432 + 8,388,608 = 41,943,040
    # MLP 3 * 4096 * 14336 = 176,160,768; norms 8,192
    # per layer 218,112,000; x 32 = 6,979,584,000
    # embedding + output 2 * 128256 * 4096 = 1,050,673,152; final norm 4,096
    # total 6,979,584,000 + 1,050,673,152 + 4,096 = 8,030,261,248
    m = models.model("llama3.1-8b")
    assert m.attention_params_per_layer() == 41_943_040
    assert m.params_per_layer() == 218_112_000
    assert m.parameter_count() == 8_030_261_248


def test_larger_llama_counts_exact():
    # Same derivation; these equal the Hugging Face counts 68.98B, 70.55B, 405.85B to the digit
    # shown (Llama 2 13B/70B safetensors totals add 40*64 and 80*64 rotary buffer entries).
    assert models.model("llama2-13b").parameter_count() == 13_015_864_320
    assert models.model("llama2-70b").parameter_count() == 68_976_648_192
    assert models.model("llama3.1-70b").parameter_count() == 70_553_706_496
    assert models.model("llama3.1-405b").parameter_count() == 405_853_388_800


def test_llama_grouped_query_attention_shapes():
    assert models.model("llama2-7b").kv_heads == 32  # MHA
    for name in ("llama2-70b", "llama3.1-8b", "llama3.1-70b", "llama3.1-405b"):
        m = models.model(name)
        assert m.kv_heads == 8 and m.head_dim == 128 and m.kv_dim == 1024


def test_gpt3_architecture():
    # Brown et al. 2020, Table 2.1: 96 layers, d_model 12288, 96 heads, d_head 128.
    m = models.model("gpt3-175b")
    assert (m.layers, m.hidden, m.heads, m.head_dim, m.ffn) == (96, 12288, 96, 128, 4 * 12288)
    # 96 * (12 h^2 + 13 h) + (50257 + 2048) h + 2h = 174,604,259,328
    assert m.parameter_count() == 174_604_259_328


# --- Narayanan et al. 2021 ----------------------------------------------------------------


@pytest.mark.parametrize("suffix, published, heads, hidden, layers", MEGATRON_TABLE_1)
def test_megatron_eq2_reproduces_table_1(suffix, published, heads, hidden, layers):
    # Narayanan et al. 2021, Table 1, "Number of parameters (billion)", one decimal.
    p = megatron_parameter_count(layers, hidden, vocab=51200, seq_len=2048)
    assert round(p / 1e9, 1) == round(published / 1e9, 1)


@pytest.mark.parametrize("suffix, published, heads, hidden, layers", MEGATRON_TABLE_1)
def test_megatron_catalog_architecture_agrees_with_eq2(suffix, published, heads, hidden, layers):
    m = models.model(f"megatron-gpt-{suffix}")
    assert (m.heads, m.hidden, m.layers, m.vocab, m.seq_len) == (heads, hidden, layers, 51200, 2048)
    eq2 = megatron_parameter_count(m.layers, m.hidden, m.vocab, m.seq_len)
    assert abs(m.parameter_count() - eq2) <= 0.01 * eq2
    assert m.parameter_count() - eq2 == 2 * m.hidden  # exactly the final LayerNorm Eq. 2 omits


def test_megatron_eq2_equals_closed_form():
    l, h, v, s = 24, 2304, 51200, 2048
    closed = 12 * l * h**2 * (1 + 13 / (12 * h) + (v + s) / (12 * l * h))
    assert megatron_parameter_count(l, h, v, s) == pytest.approx(closed, rel=1e-12)
    assert isinstance(megatron_parameter_count(l, h, v, s), int)


@pytest.mark.parametrize("bad", [0, -1, 2.5, "big", None, True])
def test_megatron_formula_rejects_invalid(bad):
    with pytest.raises(ConfigurationError, match="hidden"):
        megatron_parameter_count(2, bad, 100, 16)


# --- lookup ------------------------------------------------------------------------------


def test_catalog_names_are_lowercase_hyphenated_and_lookup_ignores_case():
    required = {
        "gpt3-175b",
        "llama2-7b",
        "llama2-13b",
        "llama2-70b",
        "llama3.1-8b",
        "llama3.1-70b",
        "llama3.1-405b",
        "megatron-gpt-1.7b",
        "megatron-gpt-1t",
    }
    assert required <= set(MODELS)
    for name, m in MODELS.items():
        assert name == name.lower() and " " not in name and m.name == name
    assert models.model("LLaMA3.1-70B") is MODELS["llama3.1-70b"]
    assert models.model("  GPT3-175b ") is MODELS["gpt3-175b"]
    assert models.model(MODELS["llama2-7b"]) is MODELS["llama2-7b"]


def test_unknown_name_suggests_close_names():
    with pytest.raises(UnknownNameError, match="llama3.1-8b") as info:
        models.model("llama3.1-7b")
    assert "llama3.1-7b" in str(info.value)
    with pytest.raises(UnknownNameError):
        models.model(42)


# --- validation ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "field, value, words",
    [
        ("heads", 3, "valid heads: 1, 2, 4, 8"),
        ("kv_heads", 3, "valid kv_heads"),
        ("norm", "batchnorm", "layernorm, rmsnorm"),
        ("gated_mlp", 1, "True or False"),
        ("position_embeddings", -1, ">= 0"),
        ("position_embeddings", 8, "valid seq_len: 1 to 8"),
        ("published_params", 0, "positive"),
        ("name", "", "non-empty"),
    ],
)
def test_invalid_fields_are_named_in_the_message(field, value, words):
    with pytest.raises(ConfigurationError) as info:
        tiny(**{field: value})
    assert field in str(info.value)
    assert words in str(info.value)


def test_whole_floats_are_normalised_and_frozen():
    m = tiny(layers=2.0, hidden=8.0, norm="RMSNorm")
    assert isinstance(m.layers, int) and m.hidden == 8 and m.norm == "rmsnorm"
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.layers = 3


SIZE_FIELDS = ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "seq_len")
not_a_size = st.one_of(
    st.integers(max_value=0),
    st.floats(allow_nan=True, allow_infinity=True).filter(lambda x: not (math.isfinite(x) and x >= 1 and x == int(x))),
    st.booleans(),
    st.text(max_size=3),
)


@FAST
@given(field=st.sampled_from(SIZE_FIELDS), value=not_a_size)
def test_random_invalid_sizes_raise_configuration_error(field, value):
    with pytest.raises(ConfigurationError, match=field):
        tiny(**{field: value})


@FAST
@given(head_dim=st.integers(1, 64), heads=st.integers(2, 64), shift=st.integers(0, 10**6))
def test_heads_not_dividing_hidden_is_rejected(head_dim, heads, shift):
    hidden = heads * head_dim + 1 + shift % (heads - 1)  # remainder 1 .. heads-1
    with pytest.raises(ConfigurationError, match=rf"heads={heads} does not divide hidden={hidden}"):
        tiny(hidden=hidden, heads=heads, kv_heads=1)


@FAST
@given(heads=st.integers(2, 128), kv=st.integers(2, 128))
def test_kv_heads_not_dividing_heads_is_rejected(heads, kv):
    if heads % kv == 0:
        kv = heads + 1 if heads % (heads + 1) else heads + 2
    with pytest.raises(ConfigurationError, match="kv_heads"):
        tiny(hidden=heads * 4, heads=heads, kv_heads=kv)


def test_configuration_error_is_a_distlab_error():
    with pytest.raises(DistlabError):
        tiny(layers=0)


# --- properties ----------------------------------------------------------------------------


@st.composite
def architectures(draw):
    groups = draw(st.integers(1, 8))
    kv = draw(st.integers(1, 8))
    heads = groups * kv
    return dict(
        name="random",
        layers=draw(st.integers(1, 96)),
        heads=heads,
        kv_heads=kv,
        head_dim=draw(st.integers(1, 256)),
        ffn=draw(st.integers(1, 50_000)),
        vocab=draw(st.integers(1, 200_000)),
        gated_mlp=draw(st.booleans()),
        tied_embeddings=draw(st.booleans()),
        norm=draw(st.sampled_from(sorted(models.NORMS))),
        biases=draw(st.booleans()),
        position_embeddings=draw(st.sampled_from([0, 2048])),
        seq_len=2048,
    )


def build(arch, **changes):
    fields = {**arch, **changes}
    head_dim = fields.pop("head_dim")
    fields["hidden"] = fields["heads"] * head_dim
    return TransformerModel(**fields)


@FAST
@given(arch=architectures(), extra=st.integers(1, 10))
def test_more_layers_more_parameters(arch, extra):
    base = build(arch)
    deeper = build(arch, layers=arch["layers"] + extra)
    assert deeper.parameter_count() - base.parameter_count() == extra * base.params_per_layer() > 0


@FAST
@given(arch=architectures(), extra=st.integers(1, 64))
def test_wider_more_parameters(arch, extra):
    wider = build(arch, head_dim=arch["head_dim"] + extra)
    assert wider.parameter_count() > build(arch).parameter_count()


@FAST
@given(arch=architectures())
def test_gated_mlp_has_more_parameters_than_plain_at_same_ffn(arch):
    gated, plain = build(arch, gated_mlp=True), build(arch, gated_mlp=False)
    # one more h x f matrix (and f biases) per layer
    h, f = gated.hidden, gated.ffn
    extra_per_layer = h * f + (f if arch["biases"] else 0)
    assert gated.parameter_count() - plain.parameter_count() == gated.layers * extra_per_layer > 0


@FAST
@given(arch=architectures())
def test_count_is_the_sum_of_its_parts(arch):
    m = build(arch)
    assert m.parameter_count() == (
        m.layers * m.params_per_layer() + m.embedding_params() + m.output_params() + m.final_norm_params()
    )
    if (
        m.kv_heads == m.heads
        and m.ffn == 4 * m.hidden
        and not m.gated_mlp
        and m.biases
        and m.norm == "layernorm"
        and m.tied_embeddings
        and m.position_embeddings
    ):
        eq2 = megatron_parameter_count(m.layers, m.hidden, m.vocab, m.position_embeddings)
        assert m.parameter_count() == eq2 + 2 * m.hidden


def test_catalog_rope_is_the_config_json():
    # Hugging Face config.json: Llama 2 "rope_theta": 10000.0, "rope_scaling": null; Llama 3.1 "rope_theta":
    # 500000.0, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
    # "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}; GPT-3 and Megatron GPT: learned positions
    llama3 = models.RopeScaling(
        kind="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_position_embeddings=8192
    )
    for name, m in models.MODELS.items():
        if name.startswith("llama2-"):
            assert (m.rope_theta, m.rope_scaling) == (10000.0, None)
        elif name.startswith("llama3.1-"):
            assert (m.rope_theta, m.rope_scaling) == (500000.0, llama3)
        else:
            assert m.position_embeddings > 0 and (m.rope_theta, m.rope_scaling) == (None, None)
    # the rotary settings change no parameter
    assert dataclasses.replace(models.model("llama3.1-8b"), rope_scaling=None).parameter_count() == 8_030_261_248


@pytest.mark.parametrize(
    "change, words",
    [
        (dict(rope_theta=0), "rope_theta=0 must be a positive finite number"),
        (dict(rope_theta=float("inf")), "rope_theta=inf must be a positive finite number"),
        (dict(rope_theta=True), "rope_theta=True"),
        (dict(rope_scaling={"factor": 8.0}), "must be a distlab.models.RopeScaling or None"),
        (dict(rope_theta=None), "rope_scaling needs the rotary base rope_theta"),
        (dict(position_embeddings=8192), "learned positions or rotary ones"),
    ],
)
def test_invalid_rope_fields_raise_our_error(change, words):
    with pytest.raises(ConfigurationError, match=re.escape(words)):
        dataclasses.replace(models.model("llama3.1-8b"), **change)


@pytest.mark.parametrize(
    "change, words",
    [
        (dict(kind="yarn"), "kind='yarn'; valid: llama3"),
        (dict(factor=-1.0), "factor=-1.0 must be a positive finite number"),
        (dict(low_freq_factor=4.0, high_freq_factor=1.0), "high_freq_factor=1 must exceed low_freq_factor=4"),
        (dict(original_max_position_embeddings=0.5), "original_max_position_embeddings=0.5"),
    ],
)
def test_invalid_rope_scaling_raises_our_error(change, words):
    with pytest.raises(ConfigurationError, match=re.escape(words)):
        models.RopeScaling(**change)


@settings(max_examples=50, deadline=None)
@given(
    theta=st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True), st.integers(-5, 10**7)),
    factor=st.floats(allow_nan=True, allow_infinity=True),
)
def test_random_rope_fields_build_or_raise_our_error(theta, factor):
    try:
        m = dataclasses.replace(
            models.model("llama3.1-8b"), rope_theta=theta, rope_scaling=models.RopeScaling(factor=factor)
        )
    except ConfigurationError:
        return
    assert m.rope_theta > 0 and math.isfinite(m.rope_theta) and m.rope_scaling.factor > 0
