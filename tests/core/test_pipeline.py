"""Tests of distlab.pipeline: schedules, the timeline simulator, closed forms, stage analysis."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distlab import memory, models, pipeline, training
from distlab.errors import ConfigurationError, DistlabError
from distlab.pipeline import (
    KINDS,
    Op,
    PipelineWarning,
    StageActivations,
    boundary_message_bytes,
    activation_memory,
    analyze_stages,
    bubble_fraction,
    bubble_overhead,
    check_microbatches,
    closed_form,
    gpipe_order,
    interleaved_order,
    naive_order,
    one_f_one_b_order,
    pipeline_step_time,
    schedule,
    simulate,
    split_layers,
    stage_orders,
    zb_h1_bubble_time,
    zb_h1_order,
)

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def close(a, b, tol=1e-12):
    return math.isclose(a, b, rel_tol=tol, abs_tol=tol)


# --------------------------------------------------------------------------- helpers


def route(tl, s, c, j):
    """(position on microbatch j's route, route length) of chunk c on stage s, from the placement rules
    (distlab.pipeline.schedules' notes): loop c p + s; v s or 2p-1-s; dual s or p-1-s by direction."""
    p, v = tl.stages, tl.chunks
    if tl.placement == "v":
        return (s if c == 0 else 2 * p - 1 - s), 2 * p
    if tl.placement == "dual":
        return (s if c == 0 else p - 1 - s), p
    return c * p + s, p * v


def at(tl, position, j):
    """(stage, chunk) at `position` of microbatch j's route: the inverse of route()."""
    p, m = tl.stages, tl.microbatches
    if tl.placement == "v":
        return (position, 0) if position < p else (2 * p - 1 - position, 1)
    if tl.placement == "dual":
        return (position, 0) if j < (m + 1) // 2 else (p - 1 - position, 1)
    return position % p, position // p


def check_timeline(tl, t_f, t_b, t_w, p2p):
    """Independent check: every op once, durations, no overlap, dependencies, earliest start."""
    p, m, v = tl.stages, tl.microbatches, tl.chunks
    t_f, t_b, t_w = (np.broadcast_to(np.asarray(x, dtype=float), (p,)) for x in (t_f, t_b, t_w))
    kinds = [str(k) for k in tl.kind]
    split = "W" in kinds
    expected = {
        (s, k, j, c)
        for s in range(p)
        for c in range(v)
        for j in range(m)
        for k in (("F", "B", "W") if split else ("F", "B"))
        if tl.placement != "dual" or c == int(j >= (m + 1) // 2)
    }
    seen = list(zip(tl.stage.tolist(), kinds, tl.microbatch.tolist(), tl.chunk.tolist()))
    assert len(seen) == len(set(seen)), "an op appears twice"
    assert set(seen) == expected, "ops missing or extra"
    where = {key: i for i, key in enumerate(seen)}
    share = 1 if tl.placement == "dual" else v

    def dependency(s, k, j, c):
        pos, length = route(tl, s, c, j)
        if k == "F":
            return None if pos == 0 else (*at(tl, pos - 1, j), "F", j)
        if k == "B":
            return (s, c, "F", j) if pos == length - 1 else (*at(tl, pos + 1, j), "B", j)
        return (s, c, "B", j)

    prev_end = {}
    fused = tl.fused if tl.fused is not None else np.zeros(len(seen), bool)
    for i, (s, k, j, c) in enumerate(seen):
        full = {"F": t_f[s], "B": t_b[s] if split else t_b[s] + t_w[s], "W": t_w[s]}[k] / share
        assert close(tl.end[i] - tl.start[i], full, 1e-9)
        deps = [dependency(s, k, j, c)]
        if fused[i]:  # a fused F waits for the input of the backward it is paired with
            assert seen[i + 1][0] == s and seen[i + 1][1] == "B"
            deps.append(dependency(*seen[i + 1]))
        ready = prev_end.get(s, 0.0)
        assert tl.start[i] >= ready - 1e-9, f"stage {s} runs two ops at once"
        for dep in deps:
            if dep is None:
                continue
            ds, dc, dk, dj = dep
            d = where[(ds, dk, dj, dc)]
            arrive = tl.end[d] + (p2p if ds != s else 0.0)
            assert tl.start[i] >= arrive - 1e-9, f"{(s, k, j, c)} starts before {dep} is done"
            ready = max(ready, arrive)
        assert close(tl.start[i], ready, 1e-9), "an op starts later than it could"
        prev_end[s] = tl.end[i]
    assert close(tl.step_time, float(tl.end.max()))


durations = st.floats(0.1, 5.0, allow_nan=False, allow_infinity=False)


@st.composite
def configs(draw):
    kind = draw(st.sampled_from(KINDS))
    p = draw(st.integers(1, 6))
    v = 1
    if kind == "interleaved":
        v = draw(st.integers(1, 4))
        m = p * draw(st.integers(1, 4))
    elif kind == "zb-h1":
        m = draw(st.integers(p, p + 10))
    elif kind == "dualpipe":
        p = 2 * draw(st.integers(1, 3))
        m = 2 * draw(st.integers(p, p + 4))
    elif kind == "dualpipe-v":
        m = draw(st.integers(2 * p, 2 * p + 6))
    else:
        m = draw(st.integers(1, 12))
    per_stage = draw(st.booleans())
    if per_stage:
        t_f = draw(st.lists(durations, min_size=p, max_size=p))
        t_b = draw(st.lists(durations, min_size=p, max_size=p))
        t_w = draw(st.lists(st.one_of(st.just(0.0), durations), min_size=p, max_size=p))
    else:
        t_f, t_b = draw(durations), draw(durations)
        t_w = draw(st.one_of(st.just(0.0), durations))
    p2p = draw(st.one_of(st.just(0.0), st.floats(0.0, 2.0)))
    return kind, p, m, v, t_f, t_b, t_w, p2p


# --------------------------------------------------------------------------- timeline validity


@SETTINGS
@given(configs())
def test_timeline_is_valid(config):
    kind, p, m, v, t_f, t_b, t_w, p2p = config
    tl = schedule(kind, p, m, v, t_f=t_f, t_b=t_b, t_w=t_w, p2p=p2p)
    check_timeline(tl, t_f, t_b, t_w, p2p)
    assert 0.0 <= tl.bubble_fraction < 1.0
    busy = np.bincount(tl.stage, weights=tl.end - tl.start, minlength=p)
    assert np.allclose(busy, tl.busy)
    assert close(tl.bubble_fraction, 1 - busy.sum() / (p * tl.step_time), 1e-9)
    # the generators and the timeline agree on each stage's order
    orders = stage_orders(kind, p, m, v)
    assert all(tl.ops(s) == orders[s] for s in range(p))


@SETTINGS
@given(configs())
def test_simulate_matches_schedule(config):
    kind, p, m, v, t_f, t_b, t_w, p2p = config
    a = schedule(kind, p, m, v, t_f=t_f, t_b=t_b, t_w=t_w, p2p=p2p)
    b = simulate(
        stage_orders(kind, p, m, v), chunks=a.chunks, t_f=t_f, t_b=t_b, t_w=t_w, p2p=p2p, placement=a.placement
    )
    if a.fused is not None and a.fused.any():  # plain op lists carry no fused pairs: those can only start earlier
        assert np.all(b.start <= a.start + 1e-9)
    else:
        assert np.array_equal(a.start, b.start) and np.array_equal(a.end, b.end)


def test_arrays_are_read_only_and_timeline_frozen():
    tl = schedule("1f1b", 4, 8)
    with pytest.raises(ValueError):
        tl.start[0] = 5.0
    with pytest.raises(AttributeError):
        tl.step_time = 1.0


# --------------------------------------------------------------------------- closed forms


uniform = st.tuples(durations, durations, durations)


@SETTINGS
@given(st.sampled_from(["gpipe", "1f1b"]), st.integers(1, 12), st.integers(1, 40), uniform)
def test_gpipe_1f1b_equal_closed_form(kind, p, m, times):
    t_f, t_b, t_w = times
    tl = schedule(kind, p, m, t_f=t_f, t_b=t_b, t_w=t_w)
    assert close(tl.bubble_fraction, (p - 1) / (m + p - 1))
    assert close(tl.overhead, (p - 1) / m)
    assert close(tl.bubble_fraction, bubble_fraction(p, m))
    assert close(tl.overhead, bubble_overhead(p, m))
    assert close(tl.step_time, closed_form(kind, p, m, 1, t_f, t_b, t_w).step_time)


@SETTINGS
@given(st.integers(1, 8), st.integers(1, 5), st.integers(1, 5), uniform)
def test_interleaved_equals_closed_form(p, rounds, v, times):
    m = p * rounds
    t_f, t_b, t_w = times
    tl = schedule("interleaved", p, m, v, t_f=t_f, t_b=t_b, t_w=t_w)
    assert close(tl.bubble_fraction, (p - 1) / (v * m + p - 1))
    assert close(tl.overhead, (p - 1) / (v * m))
    assert close(tl.bubble_fraction, bubble_fraction(p, m, v))
    assert close(tl.overhead, bubble_overhead(p, m, v))


@SETTINGS
@given(st.integers(1, 10), st.integers(0, 20), durations, durations, st.floats(0.0, 1.0))
def test_zb_h1_equals_qi_et_al(p, extra, t_f, t_b, w_share):
    m = p + extra
    t_w = min(t_f, t_b) * w_share  # Qi et al.'s regime: W no longer than F or B
    tl = schedule("zb-h1", p, m, t_f=t_f, t_b=t_b, t_w=t_w)
    ideal = m * (t_f + t_b + t_w)
    assert close(tl.step_time - ideal, (p - 1) * (t_f + t_b - t_w), 1e-9)
    assert close(tl.step_time - ideal, zb_h1_bubble_time(p, t_f, t_b, t_w), 1e-9)
    assert close(tl.bubble_fraction, closed_form("zb-h1", p, m, 1, t_f, t_b, t_w).bubble_fraction, 1e-9)


@SETTINGS
@given(st.integers(1, 8), st.integers(0, 8), durations, durations, durations)
def test_zb_h1_with_long_w(p, extra, t_f, t_b, t_w):
    # A W longer than F or B only fills its gap in the drain: (p-1)(t_F + t_B - min(t_F, t_B, t_W)).
    m = p + extra
    tl = schedule("zb-h1", p, m, t_f=t_f, t_b=t_b, t_w=t_w)
    bubble = tl.step_time - m * (t_f + t_b + t_w)
    assert close(bubble, (p - 1) * (t_f + t_b - min(t_f, t_b, t_w)), 1e-9)
    assert close(bubble, zb_h1_bubble_time(p, t_f, t_b, t_w), 1e-9)


@pytest.mark.parametrize("p, m", [(1, 1), (2, 1), (4, 1), (4, 3), (8, 2)])
def test_naive_idles_all_but_one_stage(p, m):
    tl = schedule("naive", p, m)
    assert close(tl.bubble_fraction, (p - 1) / p)
    assert close(closed_form("naive", p, m).bubble_fraction, (p - 1) / p)
    assert naive_order(p, m)[0][:2] == (Op("F", 0), Op("B", 0))


def test_lecture_example_p4_m8():
    # Hand derivation (t_F = 1, full backward t_B + t_W = 2, so one F+B = 3):
    # the last stage gets microbatch 0 at t = 3; after the fill every stage does 8 F and
    # 8 B, i.e. 24 of busy time; the first stage's last B ends after (m + p - 1) = 11
    # rounds of F+B = 33. Idle share = (33 - 24) / 33 = 9/33 = 3/11 = 27.27 %, and the
    # time added over ideal = 9/24 = (p-1)/m = 3/8.
    tl = schedule("1f1b", 4, 8)
    assert tl.step_time == 33.0
    assert tl.bubble_fraction == pytest.approx(3 / 11, abs=1e-15)
    assert f"{100 * tl.bubble_fraction:.2f}%" == "27.27%"
    assert tl.overhead == pytest.approx(3 / 8, abs=1e-15)
    gp = schedule("gpipe", 4, 8)
    assert gp.step_time == 33.0 and gp.bubble_fraction == tl.bubble_fraction


def test_lecture_example_p4_m12():
    # 3 / (12 + 4 - 1) = 3/15 = 20 %: step 15 rounds of 3 = 45, busy 36 per stage.
    tl = schedule("1f1b", 4, 12)
    assert tl.step_time == 45.0
    assert tl.bubble_fraction == 0.2
    assert bubble_fraction(4, 12) == 0.2


def test_in_flight_1f1b_at_most_p_gpipe_m():
    for p, m in [(4, 8), (4, 12), (8, 32), (4, 2)]:
        one = schedule("1f1b", p, m)
        gp = schedule("gpipe", p, m)
        assert one.peak_in_flight.max() <= p
        assert list(one.peak_in_flight) == [min(p - s, m) for s in range(p)]
        assert list(gp.peak_in_flight) == [m] * p
    zb = schedule("zb-h1", 4, 8)
    # ZB-H1 keeps 1F1B's peak: p on the first stage, and every stage holds p until W.
    assert zb.peak_in_flight.max() == 4
    assert list(zb.peak_in_flight_w) == [4, 4, 4, 4]


def test_interleaved_in_flight_in_microbatch_equivalents():
    tl = schedule("interleaved", 4, 8, 2)
    # stage 0 warms up 2(p-1) + (v-1)p = 10 chunk forwards, plus one more before its first
    # B ends: 11 chunk activations = 5.5 microbatches of the stage's layers.
    assert tl.peak_in_flight[0] == 5.5


def test_interleaved_bubble_shrinks_with_chunks():
    for p, m in [(2, 4), (4, 8), (8, 16)]:
        bubbles = [schedule("interleaved", p, m, v).bubble_fraction for v in (1, 2, 3, 4, 8)]
        assert all(a > b for a, b in zip(bubbles, bubbles[1:]))


def test_interleaved_with_one_chunk_is_1f1b():
    assert interleaved_order(4, 8, 1) == one_f_one_b_order(4, 8)


def test_zb_h1_beats_1f1b():
    for p, m in [(2, 2), (4, 8), (8, 8), (8, 64)]:
        assert schedule("zb-h1", p, m).bubble_fraction < schedule("1f1b", p, m).bubble_fraction
        # with F = B = W the bubble is a third of 1F1B's (Qi et al. 2023)
        assert close(3 * zb_h1_bubble_time(p), closed_form("1f1b", p, m).bubble_time)
        assert close(3 * (schedule("zb-h1", p, m).step_time - 3 * m), schedule("1f1b", p, m).step_time - 3 * m)


def test_zb_h1_order_p4():
    orders = zb_h1_order(4, 8)
    text = [" ".join(f"{o.kind}{o.microbatch}" for o in row) for row in orders]
    assert text[0].startswith("F0 F1 F2 F3 B0 W0 F4 B1 W1")
    assert text[3].startswith("F0 B0 F1 B1 F2 B2 F3 B3 W0 F4")
    assert text[3].endswith("B7 W4 W5 W6 W7")


def test_1f1b_with_fewer_microbatches_than_stages_is_degenerate_but_valid():
    tl = schedule("1f1b", 4, 2)
    check_timeline(tl, 1.0, 1.0, 1.0, 0.0)
    assert close(tl.bubble_fraction, 3 / 5)
    # the warm-up is cut to m, so stage 0 runs GPipe's order
    assert one_f_one_b_order(4, 2)[0] == gpipe_order(4, 2)[0]


def test_p2p_latency_lengthens_the_step():
    base = schedule("1f1b", 4, 8)
    slow = schedule("1f1b", 4, 8, p2p=0.5)
    assert slow.step_time > base.step_time
    # the fill and the drain each cross p-1 links
    assert slow.step_time >= base.step_time + 2 * 3 * 0.5


def test_units_accepted():
    a = schedule("1f1b", 4, 8, t_f="1 ms", t_b="1 ms", t_w="1 ms", p2p="0 s")
    assert close(a.step_time, 33e-3)
    assert a.summary_quantities()["bubble"].to("%").magnitude == pytest.approx(27.2727, abs=1e-3)


def test_large_pipeline_is_fast():
    # its speed (about 0.25-0.6 s here) is measured in benchmarks/bench_pipeline.py, not asserted
    tl = schedule("interleaved", 64, 512, 4)
    assert close(tl.overhead, 63 / (4 * 512))


# --------------------------------------------------------------------------- grid and dict


def test_grid_and_to_dict():
    tl = schedule("1f1b", 2, 2, t_b=1.0, t_w=0.0)
    assert tl.grid() == "stage 0 | F0 F1 .  B0 .  B1\nstage 1 | .  F0 B0 F1 B1 ."
    data = tl.to_dict()
    assert data["bubble_fraction"] == tl.bubble_fraction and data["step_time"] == 6.0
    assert data["grid"] == tl.grid().splitlines()
    assert data["ops"][0] == {"stage": 0, "kind": "F", "microbatch": 0, "chunk": 0, "start": 0.0, "end": 1.0}
    import json

    json.dumps(data)
    inter = schedule("interleaved", 2, 2, 2)
    assert "F0.1" in inter.grid()
    wide = schedule("1f1b", 2, 2).grid(slot=0.5)
    assert wide.splitlines()[0].split("|")[1].split()[:2] == ["F0", "F0"]


# --------------------------------------------------------------------------- stage analysis


def test_split_layers():
    assert split_layers(32, 4) == (8, 8, 8, 8)
    assert split_layers(30, 4) == (8, 8, 7, 7)
    assert split_layers(10, 3, [2, 4, 4]) == (2, 4, 4)
    with pytest.raises(ConfigurationError, match="stages=5 exceeds layers=4"):
        split_layers(4, 5)
    with pytest.raises(ConfigurationError, match="adds up to 9"):
        split_layers(10, 3, [2, 3, 4])
    with pytest.raises(ConfigurationError, match="stages=3"):
        split_layers(10, 3, [5, 5])


def test_activation_bytes_and_traffic():
    assert boundary_message_bytes(1, 4096, 8192, 2) == 4096 * 8192 * 2
    a = analyze_stages(32, 4, 8, seq_len=4096, hidden=8192, micro_batch_size=2, layer_time="2 ms")
    act = 2 * 4096 * 8192 * 2
    assert a.activation.to("B").magnitude == act
    assert a.link_bytes_per_step.to("B").magnitude == 8 * act
    assert a.bytes_per_step.to("B").magnitude == 2 * 3 * 8 * act
    # one activation must cross within one stage forward of 8 layers x 2 ms
    assert a.required_bandwidth.to("B/s").magnitude == pytest.approx(act / 16e-3)
    assert a.bubble_fraction == pytest.approx(3 / 11)


def test_bubble_warning_suggestions_are_computed():
    a = analyze_stages(32, 4, 8, seq_len=1024, hidden=1024, max_bubble=0.2)
    (warning,) = [w for w in a.warnings if w.code == "bubble"]
    assert isinstance(warning, PipelineWarning)
    assert "27.3%" in warning.message
    # smallest m with (p-1)/(m+p-1) <= 0.2 is 12 (3/15 = 20 %)
    assert warning.values["alt_microbatches"] == 12
    assert "from 8 to 12 (bubble 27.3% -> 20.0%)" in warning.message
    assert warning.values["alt_stages"] == 2
    assert warning.values["alt_stages_bubble"] == pytest.approx(1 / 9)
    assert warning.values["alt_chunks"] == 2
    assert warning.values["alt_chunks_bubble"] == pytest.approx(3 / 19)
    assert warning.values["zb_h1_bubble"] == pytest.approx(schedule("zb-h1", 4, 8).bubble_fraction)


def test_bubble_warning_respects_batch():
    a = analyze_stages(32, 4, 4, seq_len=128, hidden=128, batch=8)
    (warning,) = [w for w in a.warnings if w.code == "bubble"]
    assert warning.values["alt_microbatches"] == 8
    assert "from 4 to 8" in warning.message


def test_imbalance_and_bandwidth_warnings():
    a = analyze_stages(30, 4, 64, seq_len=4096, hidden=8192, layer_time="0.1 ms", bandwidth="25 GB/s")
    codes = {w.code: w for w in a.warnings}
    assert "[8, 8, 7, 7]" in codes["imbalance"].message and "3 or 5 stages" in codes["imbalance"].message
    bw = codes["bandwidth"]
    act = 4096 * 8192 * 2
    assert bw.values["required_bandwidth"] == pytest.approx(act / 0.7e-3)
    assert bw.values["step_time"] > bw.values["step_time_no_comm"]
    assert a.transfer_time.to("s").magnitude == pytest.approx(act / 25e9)


def test_single_stage_sends_nothing():
    a = analyze_stages(16, 1, 4, seq_len=8, hidden=8, schedule="interleaved", chunks=2, layer_time=1e-3)
    assert a.bytes_per_step.magnitude == 0 and a.required_bandwidth is None
    assert a.bubble_fraction == 0.0


def test_no_warnings_when_efficient():
    a = analyze_stages(32, 4, 64, seq_len=1024, hidden=1024, schedule="zb-h1")
    assert a.warnings == ()


# --------------------------------------------------------------------------- invalid input


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: schedule("pipedream-2bw", 4, 8), "naive, gpipe, 1f1b, interleaved, zb-h1"),
        (lambda: schedule("1f1b", 0, 8), "stages=0"),
        (lambda: schedule("1f1b", 4, 2.5), "microbatches=2.5"),
        (lambda: schedule("1f1b", 4, 8, t_f=0), "t_f must be positive"),
        (lambda: schedule("1f1b", 4, 8, t_b=-1), "t_b must be positive"),
        (lambda: schedule("1f1b", 4, 8, t_w=-1), "t_w must not be negative"),
        (lambda: schedule("1f1b", 4, 8, p2p=-1), "p2p must not be negative"),
        (lambda: schedule("1f1b", 4, 8, t_f=[1, 2]), "t_f has 2 values"),
        (lambda: schedule("interleaved", 4, 6, 2), "microbatches=6, stages=4"),
        (lambda: schedule("1f1b", 4, 8, 2), "chunks=2 applies only"),
        (lambda: schedule("interleaved", 4, 8, 3, layers=32), "chunks=3 does not divide the 8 layers"),
        (lambda: schedule("1f1b", 10, 8, layers=8), "stages=10 exceeds layers=8"),
        (lambda: schedule("1f1b", 4, 3, batch=8), "microbatches=3 does not divide batch=8"),
        (lambda: schedule("1f1b", 4, 16, batch=8), "microbatches=16 exceeds the 8 samples"),
        (lambda: schedule("zb-h1", 4, 3), "zb-h1 needs microbatches >= stages"),
        (lambda: check_microbatches(0), "microbatches=0"),
        (lambda: analyze_stages(8, 9, 8, seq_len=1, hidden=1), "stages=9 exceeds layers=8"),
        (lambda: analyze_stages(8, 2, 8, seq_len=1, hidden=1, batch=8, micro_batch_size=2), "disagrees"),
        (
            lambda: analyze_stages(16, 2, 4, seq_len=1, hidden=1, schedule="interleaved", chunks=2, split=[7, 9]),
            "chunks=2 does not divide the layers per stage",
        ),
        (lambda: analyze_stages(8, 2, 8, seq_len=1, hidden=1, max_bubble=1.5), "max_bubble"),
        (lambda: simulate([[("F", 0), ("B", 0)], [("F", 0)]]), "exactly once"),
        (lambda: simulate([[("B", 0), ("F", 0)], [("F", 0), ("B", 0)]]), "deadlocks"),
    ],
)
def test_invalid_inputs_raise_our_errors(call, match):
    with pytest.raises(ConfigurationError, match=match):
        call()


def test_errors_are_distlab_errors():
    with pytest.raises(DistlabError):
        schedule("1f1b", 4, 8, t_f="1 GB")


def test_1f1b_accepts_m_below_p():
    assert schedule("1f1b", 8, 3).bubble_fraction == pytest.approx(7 / 10)


# --------------------------------------------------------------------------- PyTorch


def _torch_orders(cls_name, p, m, v=1):
    """Per-rank compute actions of torch.distributed.pipelining's schedule (distlab.verify), or a skip."""
    pytest.importorskip("torch.distributed.pipelining.schedules")
    from distlab.errors import MissingDependencyError
    from distlab.verify import torch_pipeline_orders

    try:
        return torch_pipeline_orders(cls_name, p, m, v)
    except MissingDependencyError as exc:  # torch's private planning API moved
        pytest.skip(str(exc))


@pytest.mark.parametrize("p, m", [(2, 2), (4, 8), (4, 3), (3, 7)])
def test_gpipe_matches_torch(p, m):
    pytest.importorskip("torch")
    assert _torch_orders("ScheduleGPipe", p, m) == gpipe_order(p, m)


@pytest.mark.parametrize("p, m, v", [(2, 4, 2), (4, 8, 2), (4, 12, 3), (4, 4, 2), (3, 9, 4)])
def test_interleaved_matches_torch(p, m, v):
    # torch's ScheduleInterleaved1F1B uses Megatron-LM's current warm-up,
    # 2(p-1-rank) + (v-1)p capped at m v, and the same round-robin over chunks in rounds of
    # p microbatches, so with m a multiple of p the orders are identical (torch also allows
    # other m, which we reject like Megatron-LM's classic schedule).
    pytest.importorskip("torch")
    assert _torch_orders("ScheduleInterleaved1F1B", p, m, v) == interleaved_order(p, m, v)


@pytest.mark.parametrize("p, m", [(2, 4), (4, 8), (4, 4), (5, 12)])
def test_1f1b_matches_torch_except_its_last_rank(p, m):
    # torch 2.x's Schedule1F1B._get_pipeline_order (a planning/visualisation IR) numbers the
    # last rank's forwards from 1 instead of 0 (F1..Fm); its runtime path is correct. So all
    # ranks but the last are compared whole, and the last rank's backwards.
    pytest.importorskip("torch")
    theirs = _torch_orders("Schedule1F1B", p, m)
    ours = one_f_one_b_order(p, m)
    assert theirs[:-1] == ours[:-1]
    assert [o for o in theirs[-1] if o.kind == "B"] == [o for o in ours[-1] if o.kind == "B"]


@pytest.mark.parametrize("p, m", [(2, 4), (4, 8), (4, 4), (5, 10)])
def test_zb_h1_matches_torch_zero_bubble_with_one_chunk(p, m):
    # ScheduleInterleavedZeroBubble with one local stage is ZB-H1 ("ZB1P"): warm-up p-1-rank
    # forwards, W delayed by `rank` steps, remaining Ws at the end. torch's B here is its
    # input-gradient op 'I'.
    pytest.importorskip("torch")
    assert _torch_orders("ScheduleInterleavedZeroBubble", p, m, 1) == zb_h1_order(p, m)


# --------------------------------------------------------------------------- bubble suggestions with p2p


def test_microbatch_suggestion_is_the_fewest_that_meet_the_limit():
    # 80 layers of 8 ms over 4 stages, one 32 MiB activation per send over 25 GB/s: each send adds
    # 33554432 / 25e9 = 1.34 ms of p2p latency, so the closed-form guess m = 12 (exactly 20 %)
    # misses and a doubling to 24 overshoots; the fewest microbatches are found between them.
    a = analyze_stages(80, 4, 8, seq_len=4096, hidden=4096, layer_time="8 ms", bandwidth="25 GB/s", max_bubble=0.2)
    (warning,) = [w for w in a.warnings if w.code == "bubble"]
    m = warning.values["alt_microbatches"]
    t = 20 * 8e-3  # one stage's forward; backward 2 x forward, split into B and W
    p2p = 4096 * 4096 * 2 / 25e9

    def bubble(k):
        return schedule("1f1b", 4, k, t_f=t, t_b=t, t_w=t, p2p=p2p).bubble_fraction

    assert 12 < m < 24
    assert bubble(m) <= 0.2 < bubble(m - 1)
    assert warning.values["alt_microbatches_bubble"] == pytest.approx(bubble(m))


@pytest.mark.parametrize("schedule_name", ["1f1b", "gpipe", "interleaved"])
@pytest.mark.parametrize("link", ["ib-ndr", "ethernet-100g"])
def test_microbatch_suggestion_is_the_fewest_that_meet_the_limit_across_the_panel(schedule_name, link):
    # the search (a modelled first guess, then one count at a time, then halvings) must land where halving did:
    # the count that meets the limit with the next smaller count (p fewer when interleaved, whose counts are
    # multiples of p) failing it, each checked by its own analysis; Llama-2-70B as the Lesson 4 panel shows it,
    # 2 ms per layer's forward, 8 microbatches (2p interleaved, 2 chunks)
    interleaved = schedule_name == "interleaved"
    checked = 0
    for p in (3, 5, 8, 10, 12, 14, 16):
        for max_bubble in (0.2, 0.1):
            if interleaved and 80 % (2 * p):
                continue
            kw = dict(
                model="llama2-70b",
                micro_batch_size=1,
                layer_time="2 ms",
                schedule=schedule_name,
                chunks=2 if interleaved else 1,
                link=link,
                max_bubble=max_bubble,
            )
            m = 2 * p if interleaved else 8
            warnings = [w for w in analyze_stages(pp=p, microbatches=m, **kw).warnings if w.code == "bubble"]
            if not warnings or "alt_microbatches" not in warnings[0].values:
                continue
            found, bubble = warnings[0].values["alt_microbatches"], warnings[0].values["alt_microbatches_bubble"]
            if bubble > max_bubble:  # no count meets it (uneven stages): the best one is offered
                continue
            assert analyze_stages(pp=p, microbatches=found, **kw).bubble_fraction == pytest.approx(bubble)
            assert bubble <= max_bubble
            # the candidates: the closed form's m for the limit, (p - 1)(1 - limit) / (limit v), and its doublings
            # (interleaved: each rounded up to a multiple of p); the fewest is exact when the two around it are at
            # most 64 steps apart (farther: six halvings, within 1/64)
            step, v = (p, 2) if interleaved else (1, 1)
            guess = max(m + 1, math.ceil((p - 1) * (1 - max_bubble) / (max_bubble * v) - 1e-9))
            candidates = [step * math.ceil(guess * 2**k / step) for k in range(6)]
            below, above = [c for c in candidates if c < found], [c for c in candidates if c >= found]
            if above and (not below or (above[0] - below[-1]) // step <= 64) and found - step > m:
                assert analyze_stages(pp=p, microbatches=found - step, **kw).bubble_fraction > max_bubble
                checked += 1
    assert checked >= 3  # the grid reaches the search, not only the first candidates


# --------------------------------------------------------------------------- step time with a bubble


def test_pipeline_step_time_adds_p_minus_1_over_m_of_the_compute():
    # p = 8, m = 1: the idle share is 7/8 of the STEP, and the step is 8 x the compute (not 1.875 x,
    # which is what multiplying the compute by the idle share gives); m = 4: 1 + 7/4 = 2.75.
    assert pipeline_step_time(3.5, 8, 1) == pytest.approx(8 * 3.5)
    assert pipeline_step_time(3.5, 8, 4) == pytest.approx(2.75 * 3.5)
    assert pipeline_step_time("2 s", 4, 8, 2, schedule="interleaved") == pytest.approx(2 * (1 + 3 / 16))
    assert pipeline_step_time(1.0, 4, 8, schedule="naive") == pytest.approx(4.0)
    # zb-h1 with F = B = W: a third of 1F1B's added time
    assert pipeline_step_time(1.0, 4, 8, schedule="zb-h1") - 1 == pytest.approx((3 / 8) / 3)
    # the time added over ideal matches the simulator for uniform stages
    tl = schedule("1f1b", 6, 10)
    assert pipeline_step_time(float(tl.busy[0]), 6, 10) == pytest.approx(tl.step_time)


def test_pipeline_step_time_checks_the_samples_a_pipeline_gets():
    assert pipeline_step_time(1.0, 8, 8, batch=8) == pytest.approx(1 + 7 / 8)
    with pytest.raises(ConfigurationError, match="microbatches=16 exceeds the 8 samples"):
        pipeline_step_time(1.0, 8, 16, batch=8)
    with pytest.raises(ConfigurationError, match="compute_time must be positive"):
        pipeline_step_time(0, 8, 8)


# --------------------------------------------------------------------------- activation memory


LLAMA7 = models.model("llama2-7b")


def test_activation_memory_of_1f1b_by_hand():
    # Llama-2-7B, 32 layers over 4 stages = 8 each; 1F1B stage s holds 4 - s microbatches
    # (p=4, m=8); bytes = per layer x 8 x (4 - s).
    tl = schedule("1f1b", 4, 8)
    act = activation_memory(tl, "llama2-7b", recompute="selective")
    per_layer = memory.activation_bytes_per_layer(LLAMA7, 1, recompute="selective")
    assert isinstance(act, StageActivations)
    assert act.layers_per_stage == (8, 8, 8, 8)
    assert list(act.in_flight) == [4, 3, 2, 1]
    assert act.per_stage_bytes == pytest.approx([per_layer * 8 * k for k in (4, 3, 2, 1)])
    assert act.peak_stage == 0 and act.peak_bytes == pytest.approx(per_layer * 32)
    assert act.peak.to("GB").magnitude == pytest.approx(per_layer * 32 / 1e9)
    assert act.schedule == "1f1b" and "<- peak" in act.summary().splitlines()[0]
    assert act.to_dict()["peak_bytes"] == act.peak_bytes


@SETTINGS
@given(st.sampled_from([1, 2, 4, 8, 16, 32]), st.integers(0, 24), st.sampled_from(["none", "selective", "full"]))
def test_1f1b_peak_is_what_training_memory_assumes(p, extra, recompute):
    # lesson 1's training_memory counts pp microbatches on ceil(layers / pp) layers: the first
    # stage of 1F1B once m >= p
    m = p + extra
    act = activation_memory(schedule("1f1b", p, m), LLAMA7, recompute=recompute)
    want = memory.training_memory(LLAMA7, pp=p, recompute=recompute).activations_bytes
    assert act.peak_bytes == pytest.approx(want)


@SETTINGS
@given(st.integers(1, 8), st.integers(1, 20))
def test_gpipe_holds_m_and_1f1b_at_most_p(p, m):
    gp = activation_memory(schedule("gpipe", p, m), LLAMA7)
    one = activation_memory(schedule("1f1b", p, m), LLAMA7)
    per_stage_layers = np.array(split_layers(32, p))
    assert gp.per_stage_bytes == pytest.approx(gp.per_layer_bytes * per_stage_layers * m)
    assert np.all(one.in_flight <= min(p, m))
    assert np.all(one.per_stage_bytes <= gp.per_stage_bytes * (1 + 1e-12))


def test_zb_h1_holds_microbatches_until_w():
    tl = schedule("zb-h1", 4, 8)
    until_w = activation_memory(tl, LLAMA7)
    until_b = activation_memory(tl, LLAMA7, hold_for_w=False)
    assert list(until_w.in_flight) == [4, 4, 4, 4]
    assert list(until_b.in_flight) == [4, 3, 2, 1]
    # the maximum over stages equals 1F1B's (Qi et al. 2023: ZB-H1 keeps 1F1B's peak memory)
    assert until_w.peak_bytes == activation_memory(schedule("1f1b", 4, 8), LLAMA7).peak_bytes


def test_interleaved_counts_chunks_as_fractions_of_a_stage():
    # stage 0 of interleaved p=4, m=8, v=2 holds 11 chunk activations = 5.5 stage-equivalents
    act = activation_memory(schedule("interleaved", 4, 8, 2), LLAMA7)
    assert act.in_flight[0] == 5.5
    assert act.per_stage_bytes[0] == pytest.approx(act.per_layer_bytes * 8 * 5.5)
    with pytest.raises(ConfigurationError, match=r"chunks=4 does not divide the layers per stage \[2, 2"):
        activation_memory(schedule("interleaved", 16, 16, 4), LLAMA7)


def test_activation_memory_from_counts_and_an_uneven_split():
    per_layer = memory.activation_bytes_per_layer(LLAMA7, 2, seq_len=1024)
    act = activation_memory([3, 1], LLAMA7, split=[20, 12], micro_batch_size=2, seq_len=1024)
    assert act.per_stage_bytes == pytest.approx([per_layer * 20 * 3, per_layer * 12 * 1])
    same = activation_memory(2, LLAMA7, pp=4)
    assert list(same.in_flight) == [2, 2, 2, 2] and same.schedule is None
    with pytest.raises(ValueError):
        act.per_stage_bytes[0] = 0.0  # read-only, like the timeline's arrays


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: activation_memory(4, LLAMA7), "give pp=p"),
        (lambda: activation_memory([], LLAMA7), "in_flight is empty"),
        (lambda: activation_memory([1, 2], LLAMA7, pp=3), "in_flight has 2 values but stages=3"),
        (lambda: activation_memory(schedule("1f1b", 4, 8), LLAMA7, pp=2), "disagrees with the timeline's 4"),
        (lambda: activation_memory([1, 0], LLAMA7), r"in_flight\[1\] must be positive"),
        (lambda: activation_memory(1, LLAMA7, pp=33), "stages=33 exceeds layers=32"),
        (lambda: activation_memory(1, "llama-7b", pp=2), "closest"),
        (lambda: activation_memory(1, LLAMA7, pp=2, recompute="some"), "valid: none, selective, full"),
        (lambda: activation_memory(1, LLAMA7, pp=2, tp=3), "tp=3 does not divide the 32 attention heads"),
    ],
)
def test_activation_memory_rejects_bad_input(call, match):
    with pytest.raises(ConfigurationError, match=match):
        call()


def test_naive_suggests_overlapping_not_more_microbatches():
    # naive idles (p-1)/p = 75 % for any m; 1F1B with the same m = 8 idles 3/11
    a = analyze_stages(32, 4, 8, seq_len=64, hidden=64, schedule="naive")
    (warning,) = [w for w in a.warnings if w.code == "bubble"]
    assert a.bubble_fraction == pytest.approx(0.75)
    assert warning.values["alt_schedule"] == "1f1b"
    assert warning.values["alt_schedule_bubble"] == pytest.approx(3 / 11)
    assert "alt_microbatches" not in warning.values
    assert "overlap the microbatches with 1f1b (bubble 27.3%)" in warning.message


def test_suggestions_stay_cheap_at_extreme_limits():
    # a 1 % limit asks for about (p-1) x 99 microbatches; with a slow link every candidate must
    # be simulated, which is bounded (MAX_SUGGESTION_OPS), so the analysis stays interactive (its speed is
    # measured in benchmarks/, not asserted here)
    a = analyze_stages(
        80,
        16,
        64,
        seq_len=4096,
        hidden=8192,
        layer_time="2 ms",
        bandwidth="12.5 GB/s",
        schedule="gpipe",
        max_bubble=0.01,
    )
    (warning,) = [w for w in a.warnings if w.code == "bubble"]
    assert warning.values["zb_h1_bubble"] < a.bubble_fraction


def test_stage_analysis_refuses_a_layer_time_too_small_to_price():
    # found by the widget fuzz test: a forward of 2e-302 ns made the needed bandwidth infinite
    with pytest.raises(ConfigurationError, match="too small to price"):
        __import__("distlab.pipeline").pipeline.analyze_stages(32, 4, 8, seq_len=2048, hidden=4096, layer_time=2e-311)


def test_times_too_far_apart_to_simulate_are_refused_by_name():
    # a forward op of 5e-324 (the smallest float) beside a p2p latency of 1 ms: the step / busiest-stage ratio
    # overflowed to inf (issue 19: never an infinity); times up to MAX_TIME_RATIO apart still simulate
    from distlab import pipeline
    from distlab.pipeline.timeline import MAX_TIME_RATIO

    with pytest.raises(ConfigurationError, match=r"t_f=4\.94066e-324 .* at most 1e\+12 x"):
        pipeline.schedule("1f1b", 4, 8, t_f=5e-324, t_b=5e-324, t_w=5e-324, p2p=1e-3)
    edge = pipeline.schedule("1f1b", 2, 2, t_f=1.0, t_b=1.0, t_w=0.0, p2p=MAX_TIME_RATIO)
    # with p = 2 the step's critical path crosses the boundary at least twice (F0 to stage 1, B0 back to stage 0),
    # each crossing one p2p latency L: step >= 2 L
    assert math.isfinite(edge.overhead) and edge.step_time > 2 * MAX_TIME_RATIO
    with pytest.raises(ConfigurationError, match=r"layer_time=1e-300 s is too small to simulate"):
        pipeline.analyze_stages(
            32, 4, 8, seq_len=4096, hidden=4096, micro_batch_size=1, layer_time="1e-300 s", link="nvlink4"
        )


# ---------------------------------------------------------------------------------------
# Activations in flight on each stage (Megatron-LM's warm-up counts, issue 30)


def test_stage_in_flight_by_hand():
    """Megatron-LM's interleaved warm-up (schedules.py get_pp_rank_microbatches, NVIDIA/Megatron-LM@d98e8a6):
    2 (p - r - 1) + (v - 1) p chunk forwards, one more in the steady state, divided by v per microbatch."""
    # p 4, v 2, m 8: (2 x 3 + 1 x 4 + 1) / 2 = 5.5; each later stage 2 / v = 1 fewer
    assert pipeline.stage_in_flight_array(2, 4, 8, 2, np.arange(4)).tolist() == [5.5, 4.5, 3.5, 2.5]
    # Llama 3 405B's layout (p 16, v 8, m 32): stage 0 (2 x 15 + 7 x 16 + 1) / 8 = 143 / 8 = 17.875, stage 1
    # (2 x 14 + 112 + 1) / 8 = 141 / 8 = 17.625: 2 / 8 fewer, not one microbatch fewer (16.875)
    assert pipeline.stage_in_flight_array(2, 16, 32, 8, [0, 1]).tolist() == [17.875, 17.625]
    # m = p = 16: stage 0's warm-up (142 chunk forwards) exceeds all 16 x 8 = 128, so it holds all 16
    assert pipeline.stage_in_flight_array(2, 16, 16, 8, 0) == 16.0
    # 1F1B: min(p - r, m), p 4: m 8 -> 4, 3, 2, 1; m 2 -> 2, 2, 2, 1. GPipe: m on every stage
    assert pipeline.stage_in_flight_array(1, 4, 8, 1, np.arange(4)).tolist() == [4.0, 3.0, 2.0, 1.0]
    assert pipeline.stage_in_flight_array(1, 4, 2, 1, np.arange(4)).tolist() == [2.0, 2.0, 2.0, 1.0]
    assert pipeline.stage_in_flight_array(0, 4, 3, 1, np.arange(4)).tolist() == [3.0, 3.0, 3.0, 3.0]


@pytest.mark.parametrize(
    "kind, p, m, v",
    [
        ("interleaved", 4, 8, 2),
        ("interleaved", 4, 8, 4),
        ("interleaved", 8, 16, 3),
        ("interleaved", 16, 16, 8),
        ("1f1b", 4, 2, 1),
        ("1f1b", 8, 16, 1),
        ("gpipe", 4, 6, 1),
    ],
)
def test_stage_in_flight_matches_the_simulator_on_every_stage(kind, p, m, v):
    """Independent implementation: the timeline simulator's peak per stage (it runs Megatron's op order)."""
    code = pipeline.ARRAY_SCHEDULES.index(kind)
    sim = pipeline.schedule(kind, p, m, chunks=v) if kind == "interleaved" else pipeline.schedule(kind, p, m)
    got = pipeline.stage_in_flight_array(code, p, m, v, np.arange(p))
    assert got.tolist() == pytest.approx(np.asarray(sim.peak_in_flight, dtype=float).tolist())


def test_balanced_interleaved_stages_hold_megatrons_count():
    """Llama 3 405B on 8,192 H100s (Llama 3 Table 4 layout: tp 8, pp 16, v 8, balanced stages, 32 microbatches):
    126 layers, balanced: the middle stages hold 8 x ceil(128 / 128) = 8 layers, the first 7. Stage 0: 7 x 17.875 =
    125.1 layer-microbatches; stage 1: 8 x 17.625 = 141 (was 8 x 16.875 = 135 with one microbatch fewer)."""
    e = training.estimate(
        "llama3.1-405b",
        "dgx-h100",
        nodes=1024,
        fabric="ib-ndr",
        global_batch=2048,
        seq_len=8192,
        tp=8,
        pp=16,
        chunks=8,
        schedule="interleaved",
        balance_stages=True,
        sequence_parallel=True,
        recompute="none",
        zero=1,
    )
    assert e.config["microbatches"] == 32
    # flash attention stores no scores: the selective count per layer, divided by nothing else (cp 1)
    per_layer = memory.activation_bytes_per_layer("llama3.1-405b", 1, 8192, 8, True, "selective")
    assert e.memory.activations_bytes == pytest.approx(141 * per_layer, rel=1e-12)
