"""Headless tests of the lesson 10 apps: set controls, assert on results, artists and messages."""

from __future__ import annotations

import numpy as np
import pytest

from distlab import moe
from distlab.errors import ConfigurationError
from distlab.widgets.mixture_of_experts import AllToAllApp, ImbalanceApp, PlacementApp


@pytest.fixture(scope="module")
def a2a():
    return AllToAllApp(ep=8, experts_per_gpu=2, top_k=2, step=7)


def test_all_to_all_app_shows_the_simulation(a2a):
    want = moe.simulate_routing(256, 16, 2, 8, hidden=4096)
    assert a2a.error is None and np.array_equal(a2a.result.bytes_matrix, want.bytes_matrix)
    shown = np.ma.getdata(a2a.matrix.image.get_array())
    assert np.allclose(shown, want.bytes_matrix / 1e6)
    assert "moe.all_to_all_bytes" in a2a.status.value and "moe.simulate_routing" in a2a.status.value


def test_step_slider_fills_the_matrix_diagonal_by_diagonal(a2a):
    a2a.step.value = 1  # own block (step 0) and the block for the next GPU
    shown = np.asarray(a2a.matrix.image.get_array(), dtype=float)
    filled = np.isfinite(shown)
    assert filled.sum() == 2 * 8 and filled[0, 0] and filled[0, 1] and not filled[0, 2] and filled[7, 0]
    a2a.step.value = 7


def test_capacity_drops_show_in_red_and_in_the_text(a2a):
    a2a.skew.value, a2a.capacity.value = 2.0, 1.0
    tr = a2a.result
    assert tr.dropped > 0 and f"{100 * tr.drop_fraction:.1f}% of copies dropped" in a2a.status.value
    drops = [bar.get_height() for bar in a2a.loads.dropped[:8]]  # in multiples of the mean load
    assert sum(drops) == pytest.approx(tr.dropped / (tr.copies / 8))
    a2a.skew.value, a2a.capacity.value = 0.0, None


def test_top_k_above_the_experts_is_our_message():
    a2a = AllToAllApp(ep=4, experts_per_gpu=1, top_k=8)  # built so: a student is never offered it (4 experts)
    try:
        assert a2a.result is None and "top_k=8" in a2a.error
        assert a2a.shown_texts() == [f"Cannot compute: {a2a.error}"]
        a2a.top_k.value = 2
        assert a2a.error is None and a2a.top_k.options == (1, 2, 4)  # left, top-k 8 is not offered here again
    finally:
        a2a.close()


def test_imbalance_app_uses_the_simulated_imbalance():
    app = ImbalanceApp(model="mixtral-8x7b", ep=8, skew=2.0)
    tr, layer = app.result["trace"], app.result["layer"]
    assert layer.expert_flops == pytest.approx(layer.balanced_expert_flops * tr.imbalance)
    balanced, busiest, _ = app.bars.bars
    assert busiest.get_width() > balanced.get_width() and app.status_kind(app.result) == "bad"
    app.skew.value = 0.0
    assert app.result["trace"].imbalance < tr.imbalance


def test_imbalance_app_model_change_keeps_a_valid_ep():
    app = ImbalanceApp()
    app.model.value = "deepseek-v3"
    assert app.error is None and app.ep.value in (1, 2, 4, 8, 16, 32, 64, 128, 256)


def test_placement_app_moves_traffic_to_the_network_past_one_node():
    app = PlacementApp(model="deepseek-v3", ep=8)
    assert app.result["inter"] == 0 and app.status_kind(app.result) == "ok"
    app.ep.value = 64
    assert app.result["inter"] > app.result["intra"] and "network sets the time" in app.status.value
    before = app.result["one"]["inter"]
    app.max_nodes.value = 4
    # bytes per token across nodes: M (n-1)/n = 4 x 7/8 copies instead of k (ep-p)/ep = 8 x 56/64
    assert app.result["one"]["inter"] == pytest.approx(before * (4 * 7 / 8) / (8 * 56 / 64))
    app.max_nodes.value = None
    app.etp.value = 2  # EP neighbours 2 ranks apart: 4 members per node
    assert app.result["p"] == 4


def test_placement_app_node_limit_beyond_the_group_is_our_message():
    app = PlacementApp(model="deepseek-v3", ep=8)  # one node: the app offers no limit above 1 (its tooltip says why)
    try:
        with pytest.raises(ConfigurationError, match="node limit 2 is more than the 1 node"):
            app.compute_for({**app.values(), "max_nodes": 2})
    finally:
        app.close()


def test_continuous_controls_never_force_a_full_redraw(a2a):
    # the load axis is fixed (multiples of the mean): skew, capacity and step only move animated artists
    for control, value in ((a2a.skew, 1.5), (a2a.capacity, 1.25), (a2a.step, 3), (a2a.skew, 0.0)):
        control.value = value
        assert a2a.render(a2a.result) is False
    a2a.capacity.value, a2a.step.value = None, 7


from hypothesis import given, settings, strategies as st  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402

from distlab.plots.mixture_of_experts import byte_matrix_figure, total_vs_active_figure  # noqa: E402


@pytest.mark.slow  # fuzzing: outside the fast tier (README)
@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 16), scale=st.floats(0, 1e12), seed=st.integers(0, 99))
def test_fuzz_static_figures_draw_any_valid_data(n, scale, seed):
    rng = np.random.default_rng(seed)
    matrix = rng.random((n, n)) * scale
    fig = byte_matrix_figure(matrix, "t")
    FigureCanvasAgg(fig).draw()  # renders for real (NaN or inf data would fail here)
    total = rng.random(n) * 1e12 + 1e9
    fig2 = total_vs_active_figure([f"m{i}" for i in range(n)], total, total * rng.random(n).clip(0.01, 1))
    FigureCanvasAgg(fig2).draw()
    assert len(fig2.axes) == 1 and len(fig.axes) == 2


def test_a_part_that_takes_no_time_says_so_in_its_row():
    # an EP group of 8 inside one DGX H100 node sends nothing over the network: its row on the log time axis has no
    # bar, and said nothing (a blank row, review v17); it now says "none", and a part that takes time says its time
    from distlab.plots.mixture_of_experts import NO_TIME
    from distlab.widgets.mixture_of_experts import PlacementApp

    app = PlacementApp(model="deepseek-v3", ep=8)
    try:
        network, nvlink = app.bars.labels[1], app.bars.labels[0]
        assert app.result["inter"] == 0 and network.get_text() == NO_TIME and network.get_visible()
        assert nvlink.get_text() not in ("", NO_TIME)
        app.ep.value = 64  # across nodes: the network part takes time and the note goes
        assert app.result["inter"] > 0 and network.get_text() not in ("", NO_TIME)
    finally:
        app.close()


def test_imbalance_app_names_the_samples_own_noise_where_experts_get_few_copies():
    """The app samples 2**15 router scores: deepseek-v3 (256 experts, top-8) on 8 GPUs gets 16 tokens per GPU, so
    16 x 8 x 8 / 256 = 4 copies an expert. Without skew the busiest expert then reads x2.5 from the sample alone,
    where 1,024 tokens per GPU read x1.16 (moe.simulate_routing, seed 0): the app says so beside the factor. Mixtral
    (8 experts, top-2) gets 512 tokens per GPU, 1,024 copies an expert, and no note."""
    app = ImbalanceApp(model="deepseek-v3", ep=8, skew=0.5)
    floor = moe.simulate_routing(16, 256, 8, 8, hidden=7168, skew=0.0).expert_imbalance
    big = moe.simulate_routing(1024, 256, 8, 8, hidden=7168, skew=0.0).expert_imbalance
    assert floor > 2.0 > 1.2 > big  # the 16-token sample's factor without skew is its own noise
    assert f"x{floor:.2f} at skew 0: 4 copies an expert" in app.status.value
    skewed = moe.simulate_routing(1024, 256, 8, 8, hidden=7168, skew=0.5).expert_imbalance
    assert abs(app.result["trace"].expert_imbalance - skewed) / skewed < 0.1  # the skew's factor is not noise
    mixtral = ImbalanceApp(model="mixtral-8x7b", ep=8, skew=0.5)
    assert "at skew 0" not in mixtral.status.value
