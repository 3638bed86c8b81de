"""Lesson 11b §3: distlab.batch's gradual warm-up (Goyal et al. 2017, Sec. 2.2) and the layer-wise trust ratios of
LARS (You, Gitman and Ginsburg 2017, Algorithm 1) and LAMB (You et al. 2019, Algorithm 2). Values derived by hand in the
comments; invariants by hypothesis."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distlab import batch
from distlab.errors import ConfigurationError, DistlabError

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_goyal_warm_up_by_hand():
    # Goyal et al.: k = 8192 / 256 = 32, from 0.1 to 3.2 over 5 epochs; at 5,000 warm-up iterations the rate rises
    # by 3.1 / 5000 = 6.2e-4 per iteration
    assert batch.warmup_learning_rate(0, 5000, 3.2, start_lr=0.1) == pytest.approx(0.1)
    assert batch.warmup_learning_rate(1, 5000, 3.2, start_lr=0.1) == pytest.approx(0.1 + 6.2e-4)
    assert batch.warmup_learning_rate(1250, 5000, 3.2, start_lr=0.1) == pytest.approx(0.1 + 3.1 / 4)  # 0.875
    assert batch.warmup_learning_rate(5000, 5000, 3.2, start_lr=0.1) == 3.2
    assert batch.warmup_learning_rate(10**6, 5000, 3.2, start_lr=0.1) == 3.2  # after warm-up: the peak
    # from zero (the default): 3 / 4 of the way to 1e-3
    assert batch.warmup_learning_rate(750, 1000, 1e-3) == pytest.approx(7.5e-4)
    # the peak is the linear scaling rule's rate
    assert batch.warmup_learning_rate(5000, 5000, batch.scaled_learning_rate(0.1, 256, 8192)) == pytest.approx(3.2)


def test_lars_trust_ratio_by_hand():
    # eta ||w|| / ||g||: 0.001 x 2 / 0.004 = 0.5
    assert batch.lars_trust_ratio(2.0, 0.004) == pytest.approx(0.5)
    # with weight decay beta = 5e-4: 0.001 x 1 / (0.01 + 5e-4 x 1) = 0.001 / 0.0105 = 0.095238...
    assert batch.lars_trust_ratio(1.0, 0.01, weight_decay=5e-4) == pytest.approx(0.001 / 0.0105)
    # a larger trust coefficient scales it linearly: 0.02 x 3 / 0.5 = 0.12
    assert batch.lars_trust_ratio(3.0, 0.5, trust_coefficient=0.02) == pytest.approx(0.12)
    # zero norms (a zero-initialised bias, a layer without gradient): no ratio, 1
    assert batch.lars_trust_ratio(0.0, 0.3) == 1.0 and batch.lars_trust_ratio(2.0, 0.0) == 1.0


def test_lamb_trust_ratio_by_hand():
    # ||x|| / ||r + lambda x||: 3 / 0.75 = 4; the step is then 4 x the update, a fixed share of the weights
    assert batch.lamb_trust_ratio(3.0, 0.75) == pytest.approx(4.0)
    assert batch.lamb_trust_ratio(0.0, 5.0) == 1.0 and batch.lamb_trust_ratio(5.0, 0.0) == 1.0


@SETTINGS
@given(st.floats(1e-6, 1e6), st.floats(1e-6, 1e6), st.floats(1e-3, 1e3), st.floats(1e-4, 1e-1))
def test_trust_ratios_do_not_depend_on_the_scale_of_the_layer(w, g, scale, eta):
    # both norms times the same factor: the same ratio (the ratio sees only the gradient relative to the weights,
    # which is why one global rate serves layers of very different scales)
    assert batch.lars_trust_ratio(w * scale, g * scale, eta) == pytest.approx(batch.lars_trust_ratio(w, g, eta))
    assert batch.lamb_trust_ratio(w * scale, g * scale) == pytest.approx(batch.lamb_trust_ratio(w, g))
    # and the layer's step, rate x ratio x ||update||, is eta x ||w|| for LARS without decay: a fixed share
    assert batch.lars_trust_ratio(w, g, eta) * g == pytest.approx(eta * w)


@SETTINGS
@given(st.floats(0, 1e6), st.integers(1, 10**6), st.floats(1e-6, 10), st.floats(0, 1))
def test_warm_up_rises_to_the_peak_and_stays(step, warm, peak, start_share):
    start = peak * start_share
    lr = batch.warmup_learning_rate(step, warm, peak, start_lr=start)
    assert start - 1e-12 <= lr <= peak + 1e-12
    assert batch.warmup_learning_rate(step + 1, warm, peak, start_lr=start) >= lr - 1e-12  # never falls
    assert batch.warmup_learning_rate(warm + step, warm, peak, start_lr=start) == peak


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: batch.warmup_learning_rate(-1, 10, 1.0), "step"),
        (lambda: batch.warmup_learning_rate(1, 0, 1.0), "warmup_steps"),
        (lambda: batch.warmup_learning_rate(1, 10, 1.0, start_lr=2.0), "start_lr"),
        (lambda: batch.lars_trust_ratio(-1.0, 1.0), "weight_norm"),
        (lambda: batch.lars_trust_ratio(1.0, 1.0, trust_coefficient=0), "trust_coefficient"),
        (lambda: batch.lars_trust_ratio(1.0, 1.0, weight_decay=-1), "weight_decay"),
        (lambda: batch.lamb_trust_ratio(1.0, float("nan")), "update_norm"),
    ],
)
def test_invalid_inputs_raise_our_errors(call, match):
    with pytest.raises(ConfigurationError, match=match):
        call()


_ANY = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True), st.integers(-(10**6), 10**9), st.text(max_size=4), st.none()
)


@SETTINGS
@given(
    st.sampled_from([batch.warmup_learning_rate, batch.lars_trust_ratio, batch.lamb_trust_ratio]),
    _ANY,
    _ANY,
    _ANY,
    _ANY,
)
def test_any_input_is_finite_or_our_error(fn, a, b, c, d):
    try:
        out = fn(a, b, c, d) if fn is not batch.lamb_trust_ratio else fn(a, b)
    except DistlabError:
        return
    assert math.isfinite(out)
