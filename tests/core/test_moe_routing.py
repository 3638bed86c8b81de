"""The token-routing simulation (Lesson 10 §2-§3): conservation, bytes against the closed forms, seeding, bounds."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distlab import moe
from distlab.errors import ConfigurationError, DistlabError


@pytest.mark.parametrize(
    "kwargs", [dict(), dict(skew=2.0), dict(capacity_factor=1.0, skew=1.5), dict(ep_per_node=2, max_nodes=1)]
)
def test_tokens_are_conserved(kwargs):
    tr = moe.simulate_routing(128, 16, 4, 8, hidden=8, **kwargs)
    assert tr.demand.sum() == tr.copies == 128 * 8 * 4
    assert tr.load.sum() + tr.dropped == tr.copies
    assert np.all(np.sort(tr.choices, axis=1)[:, 1:] != np.sort(tr.choices, axis=1)[:, :-1])  # k distinct experts
    assert np.array_equal(tr.gpu_load, tr.load.reshape(8, 2).sum(axis=1))


def test_dropless_byte_matrix_counts_every_copy():
    tr = moe.simulate_routing(32, 8, 2, 4, hidden=4, element_bytes=2, seed=3)
    expected = np.zeros((4, 4))
    for token in range(tr.tokens):  # an independent count, one copy at a time
        for expert in tr.choices[token]:
            expected[token // 32, expert // 2] += 4 * 2
    assert np.array_equal(tr.bytes_matrix, expected)
    # each GPU's send buffer is exactly T k h B, as the closed form's send_buffer
    assert np.all(tr.bytes_matrix.sum(axis=1) == moe.all_to_all_bytes(32, 4, 2, 4)["send_buffer"])


def test_padded_bytes_equal_the_closed_form_exactly():
    tr = moe.simulate_routing(200, 16, 2, 8, hidden=32, capacity_factor=1.25, ep_per_node=4, skew=1.0)
    closed = moe.all_to_all_bytes(200, 32, 2, 8, ep_per_node=4, experts=16, capacity_factor=1.25)
    intra, inter = tr.intra_inter_bytes()
    assert np.all(intra == closed["intra"]) and np.all(inter == closed["inter"])
    # no (source GPU, expert) pair accepts more than the capacity
    pairs = np.zeros((8, 16), dtype=int)
    np.add.at(pairs, (np.repeat(tr.source, 2)[tr.kept.ravel()], tr.choices.ravel()[tr.kept.ravel()]), 1)
    assert pairs.max() <= tr.capacity == moe.expert_capacity(200, 16, 2, 1.25)


def test_capacity_of_all_tokens_drops_nothing():
    # capacity_factor = E / k gives C = T: an expert can take every token of a GPU
    assert moe.simulate_routing(64, 8, 2, 4, capacity_factor=4.0, skew=5.0).dropped == 0


def test_uniform_routing_matches_the_expected_bytes():
    # 1024 tokens x 2 copies per GPU; the share leaving a node (ep-p)/ep = 1/2 is a binomial mean over
    # 32 GPUs x 2048 copies: its standard error is ~0.4 %, we allow 2 %
    tr = moe.simulate_routing(1024, 32, 2, 32, hidden=1, element_bytes=1, ep_per_node=16, seed=7)
    closed = moe.all_to_all_bytes(1024, 1, 2, 32, ep_per_node=16, element_bytes=1)
    intra, inter = tr.intra_inter_bytes()
    assert intra.mean() == pytest.approx(closed["intra"], rel=0.02)
    assert inter.mean() == pytest.approx(closed["inter"], rel=0.02)


def test_remote_nodes_without_limit_match_the_closed_form():
    # dedup by node (node_bytes) with max_nodes = all nodes: the uniform expectation n(1 - C(E-E/n,k)/C(E,k))(n-1)/n
    tr = moe.simulate_routing(256, 64, 6, 16, hidden=1, element_bytes=1, ep_per_node=4, max_nodes=4, seed=2)
    _, inter = tr.intra_inter_bytes()
    assert inter.mean() / 256 == pytest.approx(moe.expected_remote_nodes(64, 6, 4), rel=0.02)


def test_node_limited_routing_stays_within_m_nodes():
    tr = moe.simulate_routing(64, 256, 8, 64, hidden=1, element_bytes=1, ep_per_node=8, max_nodes=4)
    nodes = (tr.choices // 4) // 8
    assert max(len(set(row)) for row in nodes.tolist()) <= 4
    _, inter = tr.intra_inter_bytes()
    bound = moe.expected_remote_nodes(256, 8, 8, max_nodes=4)  # 3.5 remote nodes per token
    assert 0.95 * bound <= inter.mean() / 64 <= bound


def test_seeded_and_read_only():
    a, b = moe.simulate_routing(64, 8, 2, 4, seed=5), moe.simulate_routing(64, 8, 2, 4, seed=5)
    assert np.array_equal(a.choices, b.choices) and np.array_equal(a.bytes_matrix, b.bytes_matrix)
    assert not np.array_equal(a.choices, moe.simulate_routing(64, 8, 2, 4, seed=6).choices)
    with pytest.raises(ValueError):
        a.load[0] = 1


def test_skew_concentrates_the_load():
    balanced = moe.simulate_routing(512, 16, 2, 16, skew=0.0)
    skewed = moe.simulate_routing(512, 16, 2, 16, skew=3.0)
    assert balanced.imbalance < 1.2 < 2.0 < skewed.imbalance


def test_pairwise_steps_cover_every_off_diagonal_entry():
    tr = moe.simulate_routing(16, 8, 2, 4)
    sent = sum(tr.pairwise_step(s)[2].sum() for s in range(1, 4))
    assert sent == tr.bytes_sent().sum()
    with pytest.raises(ConfigurationError, match="step"):
        tr.pairwise_step(4)


def test_sizes_are_limited_up_front():
    with pytest.raises(ConfigurationError, match="router scores is more than"):
        moe.simulate_routing(2**20, 256, 8, 64)


@settings(max_examples=60, deadline=None)
@given(
    t=st.one_of(st.integers(-2, 300), st.floats(allow_nan=True)),
    e=st.integers(-1, 64),
    k=st.integers(-1, 9),
    ep=st.integers(-1, 64),
    skew=st.one_of(st.floats(-1, 12), st.just(float("nan"))),
    cf=st.one_of(st.none(), st.floats(-1, 5)),
    p=st.one_of(st.none(), st.integers(0, 8)),
    m=st.one_of(st.none(), st.integers(0, 8)),
)
def test_fuzz_returns_a_consistent_trace_or_our_error(t, e, k, ep, skew, cf, p, m):
    try:
        tr = moe.simulate_routing(t, e, k, ep, hidden=4, skew=skew, capacity_factor=cf, ep_per_node=p, max_nodes=m)
    except DistlabError:
        return
    assert tr.load.sum() + tr.dropped == tr.copies
    assert math.isfinite(tr.imbalance) and np.all(np.isfinite(tr.bytes_matrix))
