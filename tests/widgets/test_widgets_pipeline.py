"""Headless tests of the lesson-4 apps: the bubble grid and the stage-analysis panel."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distlab import hardware, models, pipeline
from matplotlib.colors import to_rgba

from distlab.plots.pipeline import IDEAL_COLOUR, PALETTE, STEP_COLOUR, timeline_codes
from distlab.widgets.pipeline import APPS, NO_LINK, PENDING, STAGE_ANALYSIS_KINDS, BubbleGridApp, StageAnalysisApp


@pytest.fixture(scope="module")
def app():
    return BubbleGridApp(kind="1f1b", stages=4, microbatches=8, model="llama2-7b", recompute="selective")


def _finite_text(text: str) -> bool:
    lowered = text.lower()
    return "nan" not in lowered and "inf " not in lowered and "inf%" not in lowered


def test_initial_state_matches_distlab(app):
    r = app.result
    assert app.error is None
    want = pipeline.schedule("1f1b", 4, 8, t_f=1.0, t_b=1.0, t_w=1.0)
    assert r.timeline.step_time == want.step_time == 33.0
    # the lecture's example: 3/11 idle, 3/8 added, both on the grid and in the closed form
    assert r.timeline.bubble_fraction == pytest.approx(3 / 11)
    assert r.closed_form.bubble_fraction == pytest.approx(3 / 11)
    text = app.picture.summary  # the text the browser shows under the grid
    assert text == app.summary() and app.status.value == ""
    assert "bubble: 27.3% of the step idle" in text and "(closed form 27.3%)" in text
    assert "time added over ideal: 37.5%" in text
    act = pipeline.activation_memory(want, "llama2-7b", recompute="selective")
    assert r.memory.peak_bytes == pytest.approx(act.peak_bytes)
    assert "peak microbatches in flight per stage: 4, 3, 2, 1" in text
    # the picture at m = 8 is this timeline: step 33, ideal 24 (each stage computes 8 F + 8 B)
    first, count, step, ideal = app.picture.frames["positions"][8 - 1]
    assert (count, step, ideal) == (4 * 8 * 2, 33.0, 24.0)
    assert _sent_ops(app.picture, 8) == _ops(want)


def _sent_ops(picture, m) -> list:
    """(stage, kind, microbatch parity, start, end) of every op the browser is sent for m microbatches, decoded
    here from the float32 (start, end) and uint8 (stage, 2 x kind + parity) pairs, independently of distlab."""
    first, count, _, _ = picture.frames["positions"][m - picture.min]
    times = np.frombuffer(picture.times, dtype=np.float32).reshape(-1, 2)[first : first + count]
    codes = np.frombuffer(picture.codes, dtype=np.uint8).reshape(-1, 2)[first : first + count]
    return sorted((int(s), "FBW"[c // 2], int(c % 2), float(a), float(b)) for (s, c), (a, b) in zip(codes, times))


def _ops(timeline) -> list:
    return sorted(
        (int(s), str(k), int(mb % 2), float(np.float32(a)), float(np.float32(b)))
        for s, k, mb, a, b in zip(timeline.stage, timeline.kind, timeline.microbatch, timeline.start, timeline.end)
    )


def test_timeline_codes_by_hand():
    # 1F1B, p = 2, m = 2, t_F = t_B = 1, t_W = 0 (the grid test of test_pipeline.py):
    # stage 0 | F0 F1 .  B0 .  B1      stage 1 | .  F0 B0 F1 B1 .
    # one column per time unit; even microbatches dark, odd light; columns 6-7 after the step
    tl = pipeline.schedule("1f1b", 2, 2, t_b=1.0, t_w=0.0)
    codes = timeline_codes(tl, 8, 8.0)
    f0, f1, b0, b1, idle, after = 0, 1, 2, 3, 6, 7
    assert codes[0].tolist() == [f0, f1, idle, b0, idle, b1, after, after]
    assert codes[1].tolist() == [idle, f0, b0, f1, b1, idle, after, after]
    # at 8 columns per unit an op is 8 columns wide: its first column is a white gap
    wide = timeline_codes(tl, 64, 8.0)
    assert wide[0, 0] == 8 and wide[0, 1] == f0 and wide[0, 8] == 8 and wide[0, 9] == f1
    assert PALETTE.shape == (9, 4) and PALETTE[after, 3] == 0


def test_pixels_follow_the_box_and_put_stage_0_on_top():
    tl = pipeline.schedule("gpipe", 2, 1, t_b=1.0, t_w=0.0)  # stage 0: F0 . . B0; stage 1: . F0 B0 .
    from matplotlib.figure import Figure

    from distlab.plots.pipeline import timeline_grid

    grid = timeline_grid(Figure().add_subplot())  # the matplotlib grid (Lesson 4's stage-analysis panel)
    grid.update(tl)
    rgba = grid.pixels.pixels(40, 20)  # x range [0, 5): 8 columns per unit
    assert rgba.shape == (20, 40, 4) and rgba.dtype == np.uint8
    # Agg fills from the bottom row: the LAST array rows are the top stage (stage 0)
    top, bottom = rgba[-3], rgba[2]
    assert (top[4] == PALETTE[0]).all() and (bottom[4] == PALETTE[6]).all()  # t = 0.5: F0 on stage 0 only
    assert (bottom[12] == PALETTE[0]).all()  # t = 1.5: F0 on stage 1
    assert (top[36] == PALETTE[7]).all()  # t = 4.5: after the step of 4
    assert tl.step_time == 4.0
    # 20 pixel rows, 10 per stage; counted from the top, row 10 (the first of stage 1) turns white:
    # that is array row 20 - 1 - 10 = 9 (away from the two painted lines)
    assert (rgba[9, :16] == PALETTE[8]).all() and not (rgba[10, :16] == PALETTE[8]).all()
    # the step ends at 4 = column 4/5 x 40 = 32: a solid line over columns 31-32, every row;
    # the ideal end, 2 (each stage computes F + B), is dashed at column 16: 3 rows on, 2 off
    step_colour, ideal_colour = (np.round(np.array(to_rgba(c)) * 255) for c in (STEP_COLOUR, IDEAL_COLOUR))
    assert (rgba[:, 31:33] == step_colour).all()
    assert [bool((px == ideal_colour).all()) for px in rgba[::-1, 16][:10]] == [True] * 3 + [False] * 2 + [True] * 3 + [
        False
    ] * 2


def test_microbatch_moves_need_no_new_data_and_other_controls_send_it_once():
    app = BubbleGridApp(kind="1f1b", stages=8, microbatches=30)
    sent = []
    app.picture.observe(lambda change: sent.append(change["name"]), names=["frames", "times", "codes", "summaries"])
    # 1F1B, uniform: step = 3 (m + p - 1) x t_F, for every m the browser holds
    for m in (31, 26, 42, 35, 1, 64):
        app.microbatches.value = m
        assert app.result.timeline.step_time == 3 * (m + 7)  # p = 8
        assert app.picture.frames["positions"][m - 1][2] == 3 * (m + 7)
        assert app.picture.summary == app.summary()
    assert sent == []
    app.stages.value = 4  # new physics, outside a kernel's event loop: every timeline, in one message
    assert sorted(sent) == ["codes", "frames", "summaries", "times"]
    assert all(s != PENDING for s in app.picture.summaries)
    assert app.result.timeline.step_time == 3 * (64 + 3)
    assert all(app.picture.frames["positions"][m - 1][2] == 3 * (m + 3) for m in range(1, 65))


def test_a_change_of_only_the_model_or_the_recomputation_simulates_nothing_again(monkeypatch):
    # the model and the recomputation move only the memory (pipeline._physics): the 64 timelines of the state before
    # are the ones shown after, counted by the simulations pipeline.schedule runs
    from distlab.widgets import pipeline as grid

    grid._timeline.cache_clear()
    runs = []
    schedule = pipeline.schedule
    monkeypatch.setattr(grid.pipeline, "schedule", lambda *a, **k: runs.append(a) or schedule(*a, **k))
    app = BubbleGridApp(kind="1f1b", stages=4, microbatches=8, model="llama2-7b")
    assert len(runs) == 64  # every microbatch count the slider offers
    before = app.result.timeline
    app.model.value = "llama2-13b"
    app.recompute.value = next(r for r in app.recompute.options if r != app.recompute.value)
    assert len(runs) == 64 and app.result.timeline is before
    first = grid.simulate({**app.state(), "model": "llama2-7b"}, 8)
    assert app.result.memory.per_layer_bytes != first.memory.per_layer_bytes  # the model's memory, recomputed
    # shared, so read-only; and what a fresh simulation gives
    assert not before.start.flags.writeable
    assert np.array_equal(before.end, schedule("1f1b", 4, 8).end)
    app.stages.value = 8  # new physics: simulated
    assert len(runs) == 128


def test_the_first_message_after_a_change_holds_the_current_count_and_marks_the_rest_pending():
    # in a kernel (a running event loop): the current count first, the others after, in the loop's later turns
    import asyncio

    first = []

    async def run():
        app = BubbleGridApp(kind="1f1b", stages=8, microbatches=30)
        app.picture.observe(lambda change: first.append(list(change["new"])) if not first else None, names="summaries")
        app.backward.value = 2.0
        await app.filling
        return app

    app = asyncio.run(run())
    summaries = first[0]
    # 1F1B runs B + W as one op: t_F + t_B + t_W = 1 + 2 + 1 = 4 per microbatch; step (m + p - 1) x 4 = 37 x 4 = 148
    assert summaries[30 - 1] == app.summary() and "step 148 x t_F, ideal 120 x t_F" in summaries[30 - 1]
    assert [i for i, s in enumerate(summaries) if s != PENDING] == [30 - 1]


def test_chunks_only_for_interleaved(app):
    assert app.chunks.disabled
    app.kind.value = "interleaved"
    assert not app.chunks.disabled
    app.chunks.value = 2
    tl = app.result.timeline
    assert tl.chunks == 2 and tl.overhead == pytest.approx(3 / (2 * 8))
    app.kind.value = "gpipe"
    assert app.chunks.disabled and app.result.timeline.chunks == 1
    app.kind.value = "1f1b"


def test_invalid_settings_show_our_message(app):
    app.kind.value = "interleaved"
    app.microbatches.value = 6
    assert app.result is None and "multiple of stages" in app.error
    assert app.shown_texts() == [f"Cannot compute: {app.error}"] and "Traceback" not in app.status.value
    assert app.picture.summary == f"Cannot compute: {app.error}" and app.picture.frames["positions"][6 - 1][1] == 0
    app.microbatches.value = 8
    assert app.error is None and app.picture.errors[8 - 1] == "" and app.picture.frames["positions"][8 - 1][1] > 0
    # 16 stages of Llama-2-7B have 2 layers each: 4 chunks cannot split them
    app.stages.value = 16
    app.microbatches.value = 16
    app.chunks.value = 4
    assert "chunks=4 does not divide the layers per stage" in app.error
    app.kind.value = "zb-h1"
    app.microbatches.value = 8
    assert "zb-h1 needs microbatches >= stages" in app.error
    app.stages.value, app.microbatches.value, app.kind.value = 4, 8, "1f1b"
    assert app.error is None


def test_weight_ratio_fills_the_zb_h1_drain(app):
    # ZB-H1's bubble time is (p-1)(t_F + t_B - min(t_F, t_B, t_W)); with W = 0 it is 1F1B's
    app.kind.value = "zb-h1"
    app.weight.value = 0.0
    step = app.result.timeline.step_time
    assert step - 8 * 2 == pytest.approx(3 * 2)
    app.weight.value = 1.0
    assert app.result.timeline.step_time - 8 * 3 == pytest.approx(3 * (1 + 1 - 1))
    app.kind.value = "1f1b"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(pipeline.KINDS),
    p=st.integers(1, 16),
    m=st.integers(1, 64),
    v=st.integers(1, 8),
    backward=st.sampled_from([0.25, 1.0, 2.5, 4.0]),
    weight=st.sampled_from([0.0, 0.5, 1.0, 4.0]),
    model=st.sampled_from(["llama2-7b", "gpt3-175b", "megatron-gpt-1.7b"]),
    recompute=st.sampled_from(["none", "selective", "full"]),
)
def test_any_control_combination_gives_a_result_or_our_message(kind, p, m, v, backward, weight, model, recompute):
    app = BubbleGridApp(
        kind=kind,
        stages=p,
        microbatches=m,
        chunks=v,
        backward=backward,
        weight=weight,
        model=model,
        recompute=recompute,
    )
    if app.error is None:
        r = app.result
        assert 0.0 <= r.timeline.bubble_fraction < 1.0
        if r.closed_form is not None:
            assert r.timeline.bubble_fraction == pytest.approx(r.closed_form.bubble_fraction, abs=1e-9)
        else:  # the schedules after 1F1B (lesson 11) state the papers' figures instead
            assert kind in pipeline.NO_CLOSED_FORM and r.published
        assert math.isfinite(r.memory.peak_bytes) and r.memory.peak_bytes > 0
        assert _finite_text(app.summary()) and app.picture.summary == app.summary()
        assert _sent_ops(app.picture, m) == _ops(r.timeline)
    else:
        assert app.result is None and app.shown_texts() == [f"Cannot compute: {app.error}"]


# --------------------------------------------------------------------------- stage analysis


@pytest.fixture(scope="module")
def panel():
    return StageAnalysisApp(
        model="llama2-70b", stages=4, microbatches=8, layer_time_ms=2.0, link="ib-ndr", max_bubble_pct=20.0
    )


def test_panel_is_analyze_stages(panel):
    m = models.model("llama2-70b")
    ndr = hardware.link("ib-ndr")
    want = pipeline.analyze_stages(
        80, 4, 8, seq_len=m.seq_len, hidden=m.hidden, micro_batch_size=1, layer_time=2e-3, link=ndr, max_bubble=0.2
    )
    a = panel.result
    assert panel.error is None
    assert a.bubble_fraction == pytest.approx(want.bubble_fraction)
    assert a.step_time.to("s").magnitude == pytest.approx(want.step_time.to("s").magnitude)
    # b s h x 2 bytes = 4096 x 8192 x 2 = 67.1 MB at each boundary, 8 of them per step on a link
    assert a.activation.to("B").magnitude == 4096 * 8192 * 2
    shown = panel.shown_texts()[-1]
    assert "67.1 MB" in shown and "537 MB each way" in shown
    assert [w.code for w in a.warnings] == [w.code for w in want.warnings] == ["bubble"]
    assert "increase microbatches from 8 to" in panel.status.value
    # the grid shows the simulated step in milliseconds
    assert panel.grid.pixels.step_time == pytest.approx(want.step_time.to("ms").magnitude)


def test_panel_slow_link_warns_and_no_link_does_not(panel):
    panel.link.value = "ethernet-100g"
    panel.kind.value = "interleaved"
    panel.chunks.value = 2
    panel.layer_time.value = 0.2
    codes = [w.code for w in panel.result.warnings]
    assert "bandwidth" in codes and "needs at least" in panel.status.value
    panel.link.value = NO_LINK
    assert "bandwidth" not in [w.code for w in panel.result.warnings] and panel.result.transfer_time is None
    panel.microbatches.value = 6  # not a multiple of 4 stages
    assert (
        panel.result is None
        and "multiple of stages" in panel.error
        and panel.shown_texts() == [f"Cannot compute: {panel.error}"]
    )
    panel.layer_time.value = 0.0
    panel.microbatches.value = 8
    assert "layer_time must be positive" in panel.error
    panel.kind.value, panel.layer_time.value, panel.link.value = "1f1b", 2.0, "ib-ndr"
    assert panel.error is None and panel.chunks.disabled


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    model=st.sampled_from(["llama2-7b", "llama2-70b", "megatron-gpt-1.7b"]),
    kind=st.sampled_from(STAGE_ANALYSIS_KINDS),
    p=st.integers(1, 16),
    m=st.integers(1, 64),
    b=st.integers(1, 16),
    v=st.integers(1, 8),
    layer_ms=st.sampled_from([0.0, 0.05, 2.0, 50.0]),
    link=st.sampled_from([NO_LINK, "nvlink4", "ethernet-100g"]),
    limit=st.sampled_from([1.0, 20.0, 90.0]),
)
def test_panel_any_combination_gives_a_result_or_our_message(model, kind, p, m, b, v, layer_ms, link, limit):
    panel = StageAnalysisApp(
        model=model,
        stages=p,
        microbatches=m,
        micro_batch_size=b,
        kind=kind,
        chunks=v,
        layer_time_ms=layer_ms,
        link=link,
        max_bubble_pct=limit,
    )
    if panel.error is None:
        a = panel.result
        assert 0.0 <= a.bubble_fraction < 1.0 and math.isfinite(a.step_time.to("s").magnitude)
        assert _finite_text(panel.status.value)
    else:
        assert panel.result is None and panel.shown_texts() == [f"Cannot compute: {panel.error}"]


def test_apps_construct_without_arguments():
    for cls in APPS:
        app = cls()
        assert app.error is None and app.result is not None


def test_static_figures_draw_every_op():
    from matplotlib.collections import PolyCollection

    from distlab.plots.pipeline import schedules_figure, timeline_figure

    tl = pipeline.schedule("1f1b", 2, 2)  # 2 stages x (2 F + 2 B) = 8 ops, all wide enough to label
    fig = timeline_figure(tl)
    (ax,) = fig.axes
    (ops,) = [c for c in ax.collections if isinstance(c, PolyCollection)]
    assert len(ops.get_paths()) == 8
    assert sorted(t.get_text() for t in ax.texts) == sorted(["F0", "F1", "B0", "B1"] * 2)
    both = schedules_figure([tl, pipeline.schedule("zb-h1", 2, 2)], ["1f1b", "zb-h1"])
    assert len(both.axes) == 2 and both.axes[0].get_xlim() == both.axes[1].get_xlim()


# --------------------------------------------------------------------------- lesson 11: the schedules after 1F1B


@pytest.mark.parametrize("kind", ["zb-v", "dualpipe", "dualpipe-v"])
def test_grid_shows_the_schedules_after_1f1b(kind):
    app = BubbleGridApp(kind=kind, stages=4, microbatches=8, backward=1.0, weight=1.0)
    assert app.error is None and app.result.closed_form is None
    tl = app.result.timeline
    assert tl.schedule == kind and tl.chunks == 2
    assert _sent_ops(app.picture, 8) == _ops(tl)
    text = app.picture.summary
    assert "no closed form" in text and "own span" in text
    if kind == "zb-v":  # Qi et al. 2024: no idle inside a stage's span at F = B = W, m >= 2p - 1
        assert "at most 0 x t_F" in text and "Qi et al. 2024" in text
    else:  # DeepSeek's bound at p = 4, F = B = W = 1: dualpipe (1)(3 + 2 - 3) = 2; dualpipe-v PP = 8: 3 x 1 = 3
        assert ("= 2 x t_F" if kind == "dualpipe" else "= 3 x t_F") in text


def test_grid_reports_dualpipe_needs_an_even_p():
    app = BubbleGridApp(kind="dualpipe", stages=3, microbatches=8)
    assert app.result is None and "even number of stages" in app.error


def test_in_a_kernel_the_grid_answers_with_the_current_count_and_fills_the_rest_in_later_turns():
    # Inside a running event loop (as in a kernel) a change that needs new physics simulates only the slider's
    # current count before returning; the other counts are PENDING until the loop's later turns fill them, and
    # then every position equals what a change made without an event loop computes at once.
    import asyncio

    reference = BubbleGridApp(kind="zb-v", stages=8, microbatches=20)

    async def run():
        app = BubbleGridApp(kind="1f1b", stages=8, microbatches=20)
        app.kind.value = "zb-v"
        answered = list(app.picture.summaries)
        await app.filling
        return answered, list(app.picture.summaries), app

    answered, filled, app = asyncio.run(run())
    assert answered[20 - 1] == reference.picture.summaries[20 - 1]
    assert sum(s == PENDING for s in answered) == len(answered) - 1
    assert filled == reference.picture.summaries
    assert app.picture.times == reference.picture.times and app.picture.codes == reference.picture.codes


def test_a_second_change_abandons_the_first_ones_filling():
    # two changes before the loop turns: the first change's filling stops at its first turn (its results would
    # be stale), and the picture ends with the second change's physics at every count
    import asyncio

    reference = BubbleGridApp(kind="1f1b", stages=4, microbatches=12, backward=2.0)

    async def run():
        app = BubbleGridApp(kind="1f1b", stages=4, microbatches=12)
        app.backward.value = 1.5
        first = app.filling
        app.backward.value = 2.0
        await first
        await app.filling
        return app

    app = asyncio.run(run())
    assert app.picture.summaries == reference.picture.summaries


@pytest.mark.parametrize("kind", ["gpipe", "1f1b", "interleaved", "zb-h1", "zb-v"])
def test_the_legend_lists_weight_gradients_only_when_the_grid_draws_them(kind):
    # issue 31: the legend always listed "weight gradient (W)", a colour 1F1B's grid never draws
    from distlab.widgets.pipeline import BubbleGridApp, StageAnalysisApp

    grid = BubbleGridApp()
    if kind not in [o if isinstance(o, str) else o[1] for o in grid.kind.options]:
        pytest.skip(f"{kind} is not offered by the bubble grid")
    grid.kind.value = kind
    draws_w = bool(np.any(np.asarray(grid.result.timeline.kind).astype(str) == "W"))
    assert draws_w == (kind in ("zb-h1", "zb-v"))
    # the grid's legend is drawn in the picture (timeline.js), from the picture's data: the app reads it as it does
    assert ("weight gradient (W)" in grid.legend) == draws_w
    stages = StageAnalysisApp()
    if kind in [o if isinstance(o, str) else o[1] for o in stages.kind.options]:
        stages.kind.value = kind
        if stages.error is None:
            assert ("weight gradient (W)" in stages.legend.value) == (kind in ("zb-h1", "zb-v"))


def test_the_browser_grid_draws_the_colours_its_legend_names():
    # issue 31: the grid (timeline.js) drew Okabe-Ito colours under a legend in the plots' palette; the kernel now
    # sends the legend's colours with the frames, and the picture draws those
    from distlab.plots.pipeline import legend_html
    from distlab.widgets.pipeline import BubbleGridApp

    app = BubbleGridApp(kind="zb-h1")
    frames = app.picture.frames
    legend = legend_html(split=True)
    for colour in (*frames["colours"]["kinds"], frames["colours"]["idle"], frames["colours"]["step"]):
        assert colour.lower() in legend.lower(), colour
