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


@pytest.mark.parametrize("algorithm, n", [("ring", 2), ("ring", 3), ("ring", 5), ("parameter-server", 4)])
def test_every_state_draws_exactly_the_traces_contributors(algorithm, n):
    app = RingAllReduceApp(gpus=n, algorithm=algorithm)
    trace = app.trace
    assert trace.algorithm == algorithm and trace.gpus == n and trace.steps == 2 * (n - 1)
    for t in range(trace.steps + 1):
        app.step.value = t
        assert _drawn_cells(app.picture) == _held_cells(trace, t)
        # the outlined chunks are the ones received in the step just done
        outline = app.picture.outlines.get_paths()[0].vertices
        received = 0 if t == 0 else int(np.count_nonzero(trace.recv_from[t - 1] >= 0))
        assert len(outline) // 5 == received


def test_ring_story_on_four_gpus():
    # After N-1 = 3 steps GPU i holds chunk i summed over all 4 GPUs; at the end every chunk everywhere.
    app = RingAllReduceApp(gpus=4)
    app.step.value = 3
    cells = _drawn_cells(app.picture)
    for g in range(4):
        assert {(g, g, j) for j in range(4)} <= cells
    app.step.value = 6
    assert len(_drawn_cells(app.picture)) == 4 * 4 * 4
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


def test_step_changes_only_recolour_and_blit():
    app = RingAllReduceApp(gpus=6)
    artists = [id(a) for a in app.picture.animated_artists]
    calls = []
    app.renderer.refresh = lambda full=False: calls.append(full)
    for t in (1, 2, 5, 10, 0):
        app.step.value = t
    assert calls == [False] * 5
    assert [id(a) for a in app.picture.animated_artists] == artists  # same artists, new paths
    assert app.renderer.artists == app.picture.animated_artists
    app.size.value = "8 GB"  # numbers only: no redraw at all
    assert calls == [False] * 5
    app.gpus.value = 7  # a new simulation: new artists, one full redraw, back to the start
    assert calls[-1] is True and app.step.value == 0 and app.step.max == app.play.max == 12


def test_play_button_drives_the_step_slider():
    # The Play widget is linked to the slider in the front end (jslink), so playing needs no kernel round trip.
    app = RingAllReduceApp(gpus=5)
    assert app.play_link.source == (app.play, "value") and app.play_link.target == (app.step, "value")
    assert app.play.max == app.step.max == 8 and app.play.min == app.step.min == 0
    app.gpus.value = 3
    assert app.play.max == app.step.max == 4


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
        text = app.status.value.lower()
        if app.error is None:
            r = app.result
            assert r.state == t and math.isfinite(r.cost.time_s) and r.cost.time_s >= 0
            assert math.isfinite(r.sent_bytes) and "nan" not in text and "inf " not in text
        else:
            assert app.result is None and "cannot compute" in text and "traceback" not in text
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
