"""One physics, two modules: lesson 7's step model (distlab.training) against lesson 4's simulator
(distlab.pipeline), and the one b·s·h·e message behind the pipeline, TP and P2P byte counts.

Derivation. Let t be one microbatch's forward + backward time on one stage (the step model's
per-microbatch stage time: compute plus TP communication, so m t = compute_s + tp_comm_s), p = pp,
m microbatches, v chunks, and every stage equal, with no p2p latency (the step model prices p2p as its
own term). The simulator run with t_F = t_B = t_W = t / 3 keeps every stage busy m t, so its bubble
TIME is step_time - m t. For GPipe, 1F1B and interleaved 1F1B that is the fill and drain of p - 1
stages at t / v each, (p - 1) t / v = bubble_overhead(p, m, v) x m t: the step model's bubble_s.
Its in-flight count is the activation memory of the first stage divided by (one layer's activations x
the layers on the stage): GPipe m, 1F1B min(p, m), interleaved min(p + (p - 1) / v, m): the
simulator's peak_in_flight of stage 0 (2(p-1) + (v-1)p chunk forwards of warm-up plus one in the
steady state, / v; all m v of them when m = p; with v = 1 the schedule is 1F1B). Before this test
the step model used p + (p-1)/v also at m = p (5.5 for p = 4, v = 2 where the simulator holds 4) and
at v = 1 (2p - 1 where 1F1B holds p): both fixed in pipeline.in_flight_array.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from distlab import hardware, memory, models, pipeline, tensor, training
from distlab.errors import ConfigurationError

MODEL = models.model("llama2-7b")  # 32 layers


@st.composite
def configs(draw):
    schedule = draw(st.sampled_from(training.SCHEDULES))
    nodes = draw(st.sampled_from([1, 2, 4]))
    tp = draw(st.sampled_from([1, 2, 4, 8]))
    pp = draw(st.sampled_from([1, 2, 4, 8]))
    if tp * pp > 8 * nodes:
        pp = max(1, 8 * nodes // tp)
    dp = 8 * nodes // (tp * pp)
    v = draw(st.sampled_from([1, 2, 4])) if schedule == "interleaved" and MODEL.layers % (pp * 4) == 0 else 1
    m = draw(st.integers(1, 12))
    if schedule == "interleaved":
        m = pp * draw(st.integers(1, 4))
    b = draw(st.sampled_from([1, 2]))
    return dict(
        nodes=nodes,
        tp=tp,
        pp=pp,
        dp=dp,
        chunks=v,
        schedule=schedule,
        micro_batch_size=b,
        global_batch=dp * b * m,
        seq_len=draw(st.sampled_from([1024, 4096])),
        recompute=draw(st.sampled_from(["none", "selective"])),
        zero=1,
    )


def _estimate(config):
    c = dict(config)
    nodes = c.pop("nodes")
    # unfused attention: the stored activations are memory.activation_bytes_per_layer's, scores included
    return training.estimate(MODEL, hardware.cluster("dgx-h100", nodes, "ib-ndr"), **c, attention="unfused")


@settings(max_examples=60, deadline=None)
@given(configs())
def test_step_model_bubble_and_in_flight_equal_the_simulator(config):
    est = _estimate(config)
    p, m, v = config["pp"], est.microbatches, config["chunks"]
    t = (est.compute_s + est.tp_comm_s) / m
    tl = pipeline.schedule(config["schedule"], p, m, v, t_f=t / 3, t_b=t / 3, t_w=t / 3)
    assert est.bubble_s == pytest.approx(tl.step_time - float(tl.busy.max()), rel=1e-9, abs=1e-15)
    per_layer = memory.activation_bytes_per_layer(
        MODEL, config["micro_batch_size"], config["seq_len"], config["tp"], False, config["recompute"], "mixed"
    )
    in_flight = est.memory.activations_bytes / (per_layer * math.ceil(MODEL.layers / p))
    assert in_flight == pytest.approx(float(tl.peak_in_flight[0]), rel=1e-9)
    assert float(tl.peak_in_flight[0]) == float(tl.peak_in_flight.max())  # the first stage is the busiest


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(pipeline.ARRAY_SCHEDULES), st.integers(1, 8), st.integers(1, 24), st.sampled_from([1, 2, 3]))
def test_closed_form_arrays_equal_the_simulator(schedule, p, m, v):
    if schedule != "interleaved":
        v = 1
    elif m % p:
        m = p * math.ceil(m / p)
    tl = pipeline.schedule(schedule, p, m, v)  # t_F = t_B = t_W = 1: a microbatch takes 3 on a stage
    code = pipeline.ARRAY_SCHEDULES.index(schedule)
    assert float(pipeline.bubble_overhead_array(p, m, v)) * 3 * m == pytest.approx(tl.step_time - 3 * m)
    assert float(pipeline.in_flight_array(code, p, m, v)) == pytest.approx(float(tl.peak_in_flight[0]))


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 16),
    st.sampled_from([512, 4096, 32768]),
    st.sampled_from([1024, 8192]),
    st.sampled_from([1, 2, 4, 8]),
    st.sampled_from([1, 2, 4]),
)
def test_boundary_tp_and_p2p_messages_are_one_number(b, s, h, tp, e):
    one = memory.message_bytes(b, s, h, e)
    assert one == b * s * h * e
    assert pipeline.boundary_message_bytes(b, s, h, e) == one
    assert tensor.tp_message_bytes(b, s, h, e) == one
    assert training.p2p_message_bytes(b, s, h, tp, e) == one / tp


OLD_NAMES = [
    lambda: pipeline.schedule(kind="1f1b", stages=4, microbatches=8),
    lambda: pipeline.closed_form(kind="gpipe", stages=4, microbatches=8),
    lambda: pipeline.bubble_fraction(stages=4, microbatches=8),
    lambda: pipeline.pipeline_step_time(1.0, 4, 8, kind="gpipe"),
    lambda: pipeline.activation_bytes(1, 8, 8, bytes_per_element=2),
    lambda: pipeline.activation_memory(2, "llama2-7b", stages=4),
    lambda: pipeline.analyze_stages(
        8, 2, 4, seq_len=8, hidden=8, kind="gpipe", link_bandwidth="25 GB/s", link_latency="1 us"
    ),
    lambda: pipeline.split_layers(8, stages=2),
    lambda: pipeline.stage_orders(kind="gpipe", stages=2, microbatches=2),
]

NEW_NAMES = [
    lambda: pipeline.schedule(schedule="1f1b", pp=4, microbatches=8),
    lambda: pipeline.closed_form(schedule="gpipe", pp=4, microbatches=8),
    lambda: pipeline.bubble_fraction(pp=4, microbatches=8),
    lambda: pipeline.pipeline_step_time(1.0, 4, 8, schedule="gpipe"),
    lambda: pipeline.boundary_message_bytes(1, 8, 8, element_bytes=2),
    lambda: pipeline.activation_memory(2, "llama2-7b", pp=4),
    lambda: pipeline.analyze_stages(
        8, 2, 4, seq_len=8, hidden=8, schedule="gpipe", bandwidth="25 GB/s", latency="1 us"
    ),
    lambda: pipeline.analyze_stages(pp=2, microbatches=4, model="llama2-7b", link="ib-ndr", layer_time="1 ms"),
    lambda: pipeline.split_layers(8, pp=2),
    lambda: pipeline.stage_orders(schedule="gpipe", pp=2, microbatches=2),
    lambda: training.estimate("llama2-7b", hardware.cluster("dgx-h100", 1), global_batch=8, tp=2, pp=2),
]


@pytest.mark.parametrize("call", OLD_NAMES)
def test_old_names_warn_and_give_the_same_result(call):
    with pytest.warns(DeprecationWarning, match="deprecated; use"):
        call()


@pytest.mark.parametrize("call", NEW_NAMES)
def test_new_names_do_not_warn(call):
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        call()


def test_the_triage_moved_and_its_old_names_still_work():
    from distlab import production, triage

    # training no longer forwards the triage's names (that lazy import made training -> triage -> training a cycle)
    assert not hasattr(training, "oom_triage") and not hasattr(training, "explain_infeasible")
    assert production.OOMTriage is triage.OOMTriage and production.TriageStep is triage.TriageStep
    with pytest.warns(DeprecationWarning, match="use triage.oom_triage"):
        old = production.triage_oom("llama2-7b", "dgx-h100", global_batch=8, pp=2, micro_batch_size=1)
    assert (
        old.to_dict() == triage.oom_triage("llama2-7b", "dgx-h100", global_batch=8, pp=2, micro_batch_size=1).to_dict()
    )
    assert not hasattr(training, "mfu_array")


def test_old_and_new_names_agree():
    with pytest.warns(DeprecationWarning):
        old = pipeline.analyze_stages(
            80,
            4,
            8,
            seq_len=4096,
            hidden=8192,
            layer_time="2 ms",
            kind="gpipe",
            link_bandwidth="25 GB/s",
            link_latency="5 us",
        )
    new = pipeline.analyze_stages(
        80, 4, 8, seq_len=4096, hidden=8192, layer_time="2 ms", schedule="gpipe", bandwidth="25 GB/s", latency="5 us"
    )
    assert [w.message for w in old.warnings] == [w.message for w in new.warnings]
    assert old.step_time_s == new.step_time_s and old.activation == new.activation
    shaped = pipeline.analyze_stages(
        pp=4,
        microbatches=8,
        model="llama2-70b",
        layer_time="2 ms",
        schedule="gpipe",
        bandwidth="25 GB/s",
        latency="5 us",
    )
    assert shaped.activation_bytes == new.activation_bytes and shaped.step_time_s == new.step_time_s
    with pytest.raises(ConfigurationError, match=r"give pp= only \(stages= is its old name\)"):
        pipeline.schedule("1f1b", stages=4, pp=4, microbatches=8)


def test_timeline_summary_is_text_and_to_dict_holds_its_numbers():
    tl = pipeline.schedule("1f1b", 4, 8)
    assert isinstance(tl.summary(), str) and "bubble 27.27%" in tl.summary()
    data = tl.to_dict()
    assert data["bubble_fraction"] == tl.bubble_fraction and data["step_time"] == tl.step_time
    assert tl.summary_quantities()["step_time"].magnitude == tl.step_time


def test_ops_at_matches_the_op_intervals():
    tl = pipeline.schedule("zb-h1", 4, 8, t_w=0.5)
    times = np.linspace(0, tl.step_time, 301)
    running = tl.ops_at(times)
    for s in range(tl.stages):
        for t, k in zip(times, running[s]):
            inside = np.flatnonzero((tl.stage == s) & (tl.start <= t) & (t < tl.end))
            assert (k == -1 and inside.size == 0) or (inside.size == 1 and k == inside[0])
