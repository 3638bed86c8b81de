"""Headless tests of the ring animation app: the picture is the simulation's record, steps only recolour."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from distlab import collectives
from distlab.widgets import collectives as W
from distlab.widgets.collectives import APPS, RingAllReduceApp


def _drawn_cells(picture) -> set:
    """(gpu, chunk, contributor) of every stripe the artists draw, read back from their paths' geometry."""
    rects = picture.stripe_rects  # (gpus, chunks, contributors, 4, 2)
    centres = rects.mean(axis=3)
    lookup = {
        tuple(np.round(centres[g, c, j], 9)): (g, c, j) for g, c, j in itertools.product(*map(range, centres.shape[:3]))
    }
    cells = set()
    for j, path in enumerate(picture.stripes.get_paths()):
        vertices = path.vertices
        if len(vertices) < 5:
            continue
        polys = vertices.reshape(-1, 5, 2)[:, :4]  # closed quads: 4 corners + the closing vertex
        for centre in polys.mean(axis=1):
            g, c, contributor = lookup[tuple(np.round(centre, 9))]
            assert contributor == j  # drawn in the colour of the GPU it stands for
            cells.add((g, c, contributor))
    return cells


def _held_cells(trace, t) -> set:
    return {tuple(int(i) for i in idx) for idx in np.argwhere(trace.holds_matrix(t))}


def _sent_cells(picture, t) -> set:
    """(gpu, chunk, contributor) of every stripe the browser picture is told to colour in state t: bit j of
    holds[t][g * chunks + c] (decoded here, independently of distlab.widgets.browser)."""
    f = picture.frames
    chunks = f["chunks"]
    return {
        (i // chunks, i % chunks, j)
        for i, mask in enumerate(f["holds"][t])
        for j in range(f["contributors"])
        if mask >> j & 1
    }


@pytest.mark.parametrize("algorithm, n", [("ring", 2), ("ring", 3), ("ring", 5), ("parameter-server", 4)])
def test_every_state_sent_to_the_browser_is_the_traces_record(algorithm, n):
    app = RingAllReduceApp(gpus=n, algorithm=algorithm)
    trace = app.trace
    assert trace.algorithm == algorithm and trace.gpus == n and trace.steps == 2 * (n - 1)
    f = app.picture.frames
    assert len(f["holds"]) == trace.steps + 1 and app.picture.max == trace.steps
    assert f["server"] == (-1 if trace.server is None else trace.server)
    for t in range(trace.steps + 1):
        assert _sent_cells(app.picture, t) == _held_cells(trace, t)
        # the outlined chunks are the ones received in the step just done, from the trace's receive record
        received = (
            set()
            if t == 0
            else {(g, int(trace.recv_chunk[t - 1, g])) for g in range(n) if trace.recv_from[t - 1, g] >= 0}
        )
        assert {tuple(gc) for gc in f["received"][t]} == received
        busy = (
            set()
            if t == 0
            else {(int(trace.recv_from[t - 1, g]), g) for g in range(n) if trace.recv_from[t - 1, g] >= 0}
        )
        assert {tuple(f["pairs"][i]) for i in f["busy"][t]} == busy
        # the text the browser shows at step t is what the app computes for step t
        app.step.value = t
        assert app.picture.summary == app.summary() == app.picture.summaries[t]


def test_ring_story_on_four_gpus():
    # After N-1 = 3 steps GPU i holds chunk i summed over all 4 GPUs; at the end every chunk everywhere.
    app = RingAllReduceApp(gpus=4)
    app.step.value = 3
    cells = _sent_cells(app.picture, 3)
    for g in range(4):
        assert {(g, g, j) for j in range(4)} <= cells
    app.step.value = 6
    assert len(_sent_cells(app.picture, 6)) == 4 * 4 * 4
    assert "Done" in app.summary()


def test_bytes_so_far_and_whole_cost_match_the_cost_model():
    # Ring, N = 8, M = 4 GB: after t steps each GPU sent t/8 x M; in all 2 x 7/8 x 4 GB = 7 GB.
    app = RingAllReduceApp(gpus=8, size="4 GB", link="ib-ndr")
    for t in range(15):
        app.step.value = t
        assert app.result.sent_fraction == Fraction(t, 8)
        assert app.result.sent_bytes == pytest.approx(t / 8 * 4e9)
    cost = collectives.collective_cost("all-reduce", "4 GB", 8, link="ib-ndr")
    assert app.result.cost.time_s == cost.time_s and app.result.sent_bytes == pytest.approx(7e9)
    assert "7/4 x M = 7 GB" in app.summary() and "ib-ndr" in app.summary()
    # parameter server, N = 4: the server receives 3 x M (push), then sends 3 x M (pull)
    app.algorithm.value = "parameter-server"
    app.gpus.value = 4
    app.step.value = 3
    assert app.result.received_fraction == 3 and app.result.sent_fraction == 0
    app.step.value = 6
    assert app.result.sent_fraction == 3 and app.result.cost.bytes_sent_per_gpu == pytest.approx(12e9)


def test_steps_need_no_new_data_and_a_new_simulation_sends_it_once():
    # Every state is sent at construction; stepping only moves the slider (no new data for the browser).
    app = RingAllReduceApp(gpus=6)
    sent = []
    app.picture.observe(lambda change: sent.append(change["name"]), names=["frames", "summaries", "errors"])
    for t in (1, 2, 5, 10, 0):
        app.step.value = t
    assert sent == []
    app.size.value = "8 GB"  # numbers only: the text of every step, the same picture
    assert sent == ["summaries"] and "8 GB" in app.picture.summaries[0]
    app.gpus.value = 7  # a new simulation: new states, back to the start
    assert "frames" in sent and app.step.value == 0 and app.step.max == 12 and len(app.picture.frames["holds"]) == 13


def test_play_button_is_in_the_picture():
    # The play button and the step slider live in the browser picture, so playing needs no kernel round trip.
    app = RingAllReduceApp(gpus=5, interval_ms=500)
    assert app.picture.playable and app.picture.interval_ms == 500
    assert app.step is app.picture and app.step.min == 0 and app.step.max == 8
    app.gpus.value = 3
    assert app.step.max == 4


def test_invalid_size_shows_our_message_at_every_step():
    app = RingAllReduceApp(gpus=4)
    app.size.value = "lots"
    assert app.error and all(e == app.error for e in app.picture.errors)
    assert app.picture.summary == f"Cannot compute: {app.error}" and app.shown_texts() == [
        f"Cannot compute: {app.error}"
    ]
    app.size.value = "4 GB"
    assert app.error is None and app.status.value == "" and app.picture.summary == app.summary()


SIZES = ["4 GB", "1e9", "0 B", "14GB", "1 TiB", "-1 GB", "4 GB/s", "lots", ""]
LINKS = ["nvlink4", "ib-ndr", "pcie4"]


@pytest.mark.parametrize("algorithm, n", [("ring", 2), ("ring", 16), ("parameter-server", 2), ("parameter-server", 9)])
def test_every_control_combination_gives_a_result_or_our_message(algorithm, n):
    app = RingAllReduceApp(gpus=n, algorithm=algorithm)
    # every size x link at a mid step, and every size at the first, middle and last states
    steps = sorted({0, n - 1, 2 * (n - 1)})
    grid = [(size, link, n - 1) for size, link in itertools.product(SIZES, LINKS)]
    grid += [(size, "nvlink4", t) for size, t in itertools.product(SIZES, steps)]
    for size, link, t in grid:
        app.size.value, app.link.value, app.step.value = size, link, t
        text = "\n".join(app.shown_texts()).lower()  # the picture's text and the status panel
        if app.error is None:
            r = app.result
            assert r.state == t and math.isfinite(r.cost.time_s) and r.cost.time_s >= 0
            assert math.isfinite(r.sent_bytes) and "nan" not in text and "inf " not in text
        else:
            assert app.result is None and text.count("cannot compute") == 1 and "traceback" not in text
            assert size in ("-1 GB", "4 GB/s", "lots", "")


def test_apps_construct_without_arguments():
    for cls in APPS:
        app = cls()
        assert app.error is None and app.result is not None


def test_describe_state_reads_the_record():
    trace = W.simulate("parameter-server", 3)
    assert "GPU 1 sent its whole gradient" in W.describe_state(trace, 1)
    assert "sent the full sum (M) to GPU 2" in W.describe_state(trace, 4) and "Done" in W.describe_state(trace, 4)


def test_picture_of_one_gpu_and_too_many_gpus():
    from matplotlib.figure import Figure

    from distlab.errors import ConfigurationError
    from distlab.plots.collectives import collective_picture, collective_states_figure

    one = collectives.simulate_ring_all_reduce([np.arange(3)])
    picture = collective_picture(Figure().add_subplot(), one)
    assert _drawn_cells(picture) == _held_cells(one, 0) == {(0, 0, 0)}  # its own data, nothing moves
    with pytest.raises(ConfigurationError, match="at most 16 GPUs"):
        collective_states_figure(collectives.simulate_ring_all_reduce([np.arange(3)] * 17), [0])
