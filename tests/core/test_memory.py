"""distlab.memory against hand derivations, the ZeRO paper and Korthikanti et al. 2022."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
from hypothesis import given, settings, strategies as st

from distlab import memory
from distlab.errors import ConfigurationError, DistlabError, OutOfMemoryError, UnitError, UnknownNameError
from distlab.units import Q_


@dataclass(frozen=True)
class GPTShape:
    """A stand-in with GPT geometry (MHA, 4h ungated MLP, dropout): the case Korthikanti's formulas describe."""

    layers: int
    hidden: int
    heads: int
    seq_len: int
    vocab: int = 51200
    name: str = "gpt-shape"

    @property
    def kv_heads(self):
        return self.heads

    @property
    def ffn(self):
        return 4 * self.hidden

    gated_mlp: bool = False
    dropout: bool = True

    def parameter_count(self):
        # Narayanan et al. 2021, Eq. 2 (only used for model-state tests here)
        l, h = self.layers, self.hidden
        return 12 * l * h * h * (1 + 13 / (12 * h) + (self.vocab + self.seq_len) / (12 * l * h))


GPT3 = GPTShape(layers=96, hidden=12288, heads=96, seq_len=2048)


# --- model states: hand-derived ---------------------------------------------------------


def test_sixteen_bytes_per_parameter_mixed_precision():
    # 2 (bf16 weights) + 2 (bf16 grads) + 4 + 4 + 4 (fp32 master, momentum, variance) = 16
    assert memory.precision_recipe("mixed").bytes_per_param == 16
    assert memory.precision_recipe("BF16").bytes_per_param == 16


def test_7b_needs_112_gb_and_70b_1120_gb():
    # 7e9 x 16 B = 112e9 B = 112 GB;  70e9 x 16 B = 1,120e9 B = 1,120 GB (MIT 6.5940 lecture, ch. 0)
    seven = memory.training_memory(7e9)
    assert seven.total_bytes == 112e9
    assert (seven.weights_bytes, seven.gradients_bytes, seven.optimizer_bytes) == (14e9, 14e9, 84e9)
    assert memory.training_memory(70e9).total_bytes == 1120e9


def test_largest_trainable_model_on_80_gb_is_5b():
    # 80e9 B / 16 B per parameter = 5e9 parameters
    assert memory.max_trainable_params("80 GB") == pytest.approx(5e9)
    assert memory.max_trainable_params(Q_(80, "GB")) == pytest.approx(5e9)


def test_naive_data_parallelism_does_not_reduce_memory():
    one = memory.training_memory(7e9, dp=1).total_bytes
    many = memory.training_memory(7e9, dp=1024).total_bytes
    assert one == many == 112e9


# --- ZeRO paper, Rajbhandari et al. 2020, Figure 1 / Sec. 5 -------------------------------
# Psi = 7.5e9, K = 12, Nd = 64:
#   baseline (2 + 2 + K) Psi            = 120 GB
#   P_os     2 Psi + 2 Psi + K Psi / Nd = 30 + 1.40625  = 31.4 GB
#   P_os+g   2 Psi + (2 + K) Psi / Nd   = 15 + 1.640625 = 16.6 GB
#   P_os+g+p (2 + 2 + K) Psi / Nd       = 1.875 GB (printed 1.9)
@pytest.mark.parametrize(
    "stage, printed_gb, exact_gb",
    [(0, 120, 120.0), (1, 31.4, 31.40625), (2, 16.6, 16.640625), (3, 1.9, 1.875)],
)
def test_zero_paper_figure_1(stage, printed_gb, exact_gb):
    got = memory.training_memory(7.5e9, zero=stage, dp=64).total_bytes / 1e9
    assert got == pytest.approx(exact_gb, rel=1e-12)
    assert round(got, 1) == pytest.approx(printed_gb, abs=0.051)


def test_zero_3_example_from_lecture():
    # 70e9 params, ZeRO-3 on 128 GPUs: 16 x 70e9 / 128 = 8.75e9 B
    assert memory.training_memory(70e9, zero=3, dp=128).total_bytes == pytest.approx(8.75e9)


def test_tp_and_pp_shard_model_states():
    # 70e9 over tp=8 x pp=8 = 64 shards: 16 x 70e9 / 64 = 17.5 GB
    assert memory.training_memory(70e9, tp=8, pp=8).total_bytes == pytest.approx(17.5e9)


# --- activations: Korthikanti et al. 2022, Table 2 -------------------------------------


def korthikanti_table2(s, b, h, a, t, sp, mode):
    """The paper's closed forms (Table 2), written out independently of distlab's per-tensor sum."""
    if mode == "full":
        return 2 * s * b * h / (t if sp else 1)
    if mode == "none":
        if sp:
            return s * b * h / t * (34 + 5 * a * s / h)
        return s * b * h * (10 + 24 / t + 5 * a * s / (h * t))
    # selective
    if sp:
        return s * b * h / t * 34
    return s * b * h * (10 + 24 / t)


@pytest.mark.parametrize("t", [1, 2, 4, 8])
@pytest.mark.parametrize("sp", [False, True])
@pytest.mark.parametrize("mode", ["none", "selective", "full"])
def test_activation_per_layer_matches_korthikanti_table_2(t, sp, mode):
    got = memory.activation_bytes_per_layer(GPT3, micro_batch_size=1, tp=t, sequence_parallel=sp, recompute=mode)
    want = korthikanti_table2(2048, 1, 12288, 96, t, sp, mode)
    assert got == pytest.approx(want, rel=1e-12)


def test_gpt3_activation_hand_value():
    # s=2048, b=1, h=12288, a=96, no parallelism: s b h (34 + 5 a s / h)
    # = 2048 * 12288 * (34 + 5*96*2048/12288) = 25,165,824 * 114 = 2,868,903,936 B per layer
    got = memory.activation_bytes_per_layer(GPT3, 1, 2048)
    assert got == 2048 * 12288 * 114 == 2_868_903_936


def test_activations_scale_with_stage_layers_and_in_flight():
    per_layer = memory.activation_bytes_per_layer(GPT3, 1, tp=8, sequence_parallel=True, recompute="selective")
    bd = memory.training_memory(GPT3, tp=8, pp=8, sequence_parallel=True, recompute="selective")
    # 96 layers / 8 stages = 12 layers; first 1F1B stage holds pp = 8 microbatches
    assert bd.activations_bytes == pytest.approx(per_layer * 12 * 8)


def test_bare_parameter_count_flags_uncounted_activations():
    bd = memory.training_memory(7e9)
    assert bd.activations_bytes == 0 and not bd.activations_counted
    assert "not counted" in bd.summary()


# --- fits, headroom and JSON -----------------------------------------------------------


def test_fits_and_headroom_against_a_capacity():
    bd = memory.training_memory(7e9, gpu="80 GB")
    assert bd.fits is False
    assert bd.headroom_bytes == pytest.approx(80e9 - 112e9)
    assert "32 GB over" in bd.verdict()
    with pytest.raises(OutOfMemoryError) as err:
        bd.check()
    assert err.value.overflow_bytes == pytest.approx(32e9)
    ok = memory.training_memory(7e9, zero=3, dp=8, gpu="80 GB")
    assert ok.fits and ok.check() is ok
    assert ok.headroom_bytes == pytest.approx(80e9 - 14e9)


def test_to_dict_has_plain_byte_numbers():
    d = memory.training_memory(7e9, gpu="80 GB").to_dict()
    for key in ("weights_bytes", "gradients_bytes", "optimizer_bytes", "activations_bytes", "total_bytes"):
        assert isinstance(d[key], float)
    assert d["total_bytes"] == 112e9 and d["fits"] is False


# --- invalid inputs raise our errors ---------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        (dict(zero=4), ConfigurationError, "valid: 0, 1, 2, 3"),
        (dict(dp=0), ConfigurationError, "dp"),
        (dict(dp=2.5), ConfigurationError, "dp"),
        (dict(dp=True), ConfigurationError, "dp"),
        (dict(precision="fp12"), UnknownNameError, "precision"),
        (dict(recompute="some"), ConfigurationError, "selective"),
        (dict(gpu="80 GB/s"), UnitError, "wrong dimension"),
        (dict(gpu="-80 GB"), ConfigurationError, "positive"),
    ],
)
def test_invalid_inputs(kwargs, error, words):
    with pytest.raises(error, match=words):
        memory.training_memory(7e9, **kwargs)


@pytest.mark.parametrize("params", [0, -1, float("nan"), float("inf"), "7 GB", "lots", None])
def test_invalid_parameter_counts(params):
    with pytest.raises(DistlabError):
        memory.training_memory(params)


def test_tp_must_divide_heads_and_pp_fit_layers():
    with pytest.raises(ConfigurationError, match="tp=5 does not divide the 96 attention heads; valid: 1, 2, 3, 4"):
        memory.training_memory(GPT3, tp=5)
    with pytest.raises(ConfigurationError, match="pp=97"):
        memory.training_memory(GPT3, pp=97)


# --- properties -----------------------------------------------------------------------

sizes = st.floats(min_value=1e6, max_value=2e12, allow_nan=False)
dps = st.integers(min_value=1, max_value=4096)
stages = st.sampled_from([0, 1, 2, 3])
precisions = st.sampled_from(sorted(memory.PRECISION_RECIPES))


@settings(max_examples=200, deadline=None)
@given(sizes, precisions, stages, dps, st.sampled_from([1, 2, 4, 8]), st.integers(1, 16))
def test_memory_is_positive_and_finite(params, precision, zero, dp, tp, pp):
    bd = memory.training_memory(params, precision=precision, zero=zero, dp=dp, tp=tp, pp=pp)
    for value in bd.parts().values():
        assert value >= 0 and math.isfinite(value)
    assert bd.total_bytes > 0


@settings(max_examples=200, deadline=None)
@given(sizes, precisions, st.sampled_from([1, 2, 3]), dps, dps)
def test_more_dp_never_increases_memory_under_zero(params, precision, zero, dp_a, dp_b):
    small, large = sorted((dp_a, dp_b))
    a = memory.training_memory(params, precision=precision, zero=zero, dp=small).total_bytes
    b = memory.training_memory(params, precision=precision, zero=zero, dp=large).total_bytes
    assert b <= a * (1 + 1e-12)


@settings(max_examples=200, deadline=None)
@given(sizes, precisions, dps)
def test_higher_zero_stage_never_uses_more(params, precision, dp):
    totals = [memory.training_memory(params, precision=precision, zero=z, dp=dp).total_bytes for z in range(4)]
    assert all(later <= earlier * (1 + 1e-12) for earlier, later in zip(totals, totals[1:]))
    # ZeRO-3 divides everything: total = bytes/param x P / dp
    assert totals[3] == pytest.approx(memory.precision_recipe(precision).bytes_per_param * params / dp)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 8), st.sampled_from([1, 2, 4, 8]), st.booleans(), st.integers(128, 8192))
def test_recomputation_order(b, t, sp, s):
    kw = dict(micro_batch_size=b, seq_len=s, tp=t, sequence_parallel=sp)
    none = memory.activation_bytes_per_layer(GPT3, recompute="none", **kw)
    sel = memory.activation_bytes_per_layer(GPT3, recompute="selective", **kw)
    full = memory.activation_bytes_per_layer(GPT3, recompute="full", **kw)
    assert 0 < full < sel < none


@settings(max_examples=100, deadline=None)
@given(st.one_of(st.integers(max_value=0), st.floats(max_value=0.99), st.just(float("nan")), st.text(max_size=3)))
def test_invalid_dp_raises_our_error(dp):
    with pytest.raises(DistlabError):
        memory.training_memory(7e9, dp=dp)


def test_activation_per_layer_takes_a_catalog_name():
    by_name = memory.activation_bytes_per_layer("GPT3-175B", 1)
    assert by_name == memory.activation_bytes_per_layer(__import__("distlab").models.model("gpt3-175b"), 1)
    with pytest.raises(UnknownNameError):
        memory.activation_bytes_per_layer("gpt-4", 1)
