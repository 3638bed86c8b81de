"""widgets.common.remembered (issue 19's speed work): the lesson apps keep their library results per configuration.
A remembered result must equal the uncached library call, the table must stay bounded, and our errors must come
back as they were raised."""

from __future__ import annotations

import dataclasses
import threading

import matplotlib.pyplot as plt
import numpy as np
import pytest
from blocked import run_until_blocked
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distlab import hardware, models, pipeline, production, training, triage
from distlab.errors import ConfigurationError, DistlabError
from distlab.widgets.controls import neighbour_steps
from distlab.widgets.prefetch import REACH
from distlab.widgets.common import remembered
from distlab.widgets.pipeline import StageAnalysisApp
from distlab.widgets.production import ProductionStepApp, TriageApp


def _same(a, b) -> bool:
    """Equal field by field, NumPy arrays element by element (NaN equal to NaN): an independent comparison of a
    remembered result with a fresh one (dataclass == is ambiguous on arrays)."""
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        return type(a) is type(b) and all(_same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(np.asarray(a), np.asarray(b), equal_nan=np.asarray(a).dtype.kind == "f")
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float) and a != a:
        return b != b
    return a == b


def test_remembered_computes_each_configuration_once_and_stays_bounded():
    calls = []

    @remembered(3)
    def square(x, offset=0):
        calls.append((x, offset))
        return x * x + offset

    assert [square(x) for x in (1, 2, 3, 1, 2, 3)] == [1, 4, 9, 1, 4, 9]
    assert calls == [(1, 0), (2, 0), (3, 0)]  # the second round is remembered
    assert square(2, offset=1) == 5 and square(2, offset=1) == 5  # keywords are part of the key
    assert len(calls) == 4 and square.cache_len() == 3  # 4 configurations seen, at most 3 kept
    # least recently used dropped first: 1 was used before 3 and (2, 1); 2 (offset 0) was just dropped
    square(3)
    assert len(calls) == 4
    square(1)
    assert calls[-1] == (1, 0) and square.cache_len() == 3
    for x in range(100):
        square(x)
    assert square.cache_len() == 3
    square.cache_clear()
    assert square.cache_len() == 0

    @remembered(2)
    def total(values):
        calls.append(values)
        return sum(values)

    assert total([1, 2]) == 3 and total([1, 2]) == 3  # a list cannot be a key: computed each time, not kept
    assert total.cache_len() == 0 and calls[-2:] == [[1, 2], [1, 2]]


def test_remembered_raises_our_error_again_and_does_not_keep_others():
    calls = []

    @remembered(4)
    def check(x):
        calls.append(x)
        if x < 0:
            raise ConfigurationError(f"x={x} must be at least 0")
        if x == 0:
            raise ZeroDivisionError("a bug, not a refused input")
        return 1 / x

    for _ in range(2):
        with pytest.raises(ConfigurationError, match="x=-1 must be at least 0"):
            check(-1)
    assert calls == [-1]  # our error is remembered: the configuration is not computed again
    for _ in range(2):
        with pytest.raises(ZeroDivisionError):
            check(0)
    assert calls == [-1, 0, 0]  # anything else is not remembered
    with pytest.raises(ConfigurationError):
        remembered(0)


def test_triage_app_results_equal_the_uncached_library_call():
    app = TriageApp()
    try:
        for tp, pp, zero in [(8, 4, 0), (4, 4, 1), (8, 4, 0), (8, 2, 3)]:
            app.tp.value, app.pp.value, app.zero.value = tp, pp, zero
            fresh = triage.oom_triage("llama3.1-70b", hardware.cluster("dgx-h100", 32, "ib-ndr"), **app.config())
            assert _same(app.result, fresh) and app.result == fresh
    finally:
        app.close()


def test_production_step_app_results_equal_the_uncached_library_calls():
    app = ProductionStepApp()
    try:
        for nodes, slow in [(32, 1.0), (8, 1.3), (32, 1.0), (8, 1.3)]:
            app.nodes.value, app.slow.value = nodes, slow
            cl = hardware.cluster("dgx-h100", nodes, "ib-ndr")
            fresh = production.straggler_step(
                app.MODEL, app.cluster(), slow_factor=slow, sigma=0.0, precision="mixed", **app.config()
            )
            assert _same(app.result, fresh)
            assert _same(app.reference, training.estimate(app.MODEL, cl, **app.config()))
    finally:
        plt.close(app.fig)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    model=st.sampled_from(["llama2-70b", "llama2-7b", "gpt3-175b"]),
    stages=st.integers(1, 16),
    microbatches=st.integers(1, 64),
    max_bubble=st.floats(1.0, 90.0),
)
def test_stage_analysis_app_results_equal_the_uncached_library_call(model, stages, microbatches, max_bubble):
    app = StageAnalysisApp()
    try:
        for _ in range(2):  # the second time from the table
            app.model.value, app.stages.value, app.microbatches.value = model, stages, microbatches
            app.max_bubble.value = max_bubble
            m = models.model(model)
            try:
                fresh = pipeline.analyze_stages(
                    m.layers,
                    stages,
                    microbatches,
                    seq_len=m.seq_len,
                    hidden=m.hidden,
                    micro_batch_size=1,
                    layer_time="2.0 ms",
                    schedule="1f1b",
                    chunks=1,
                    link=hardware.link("ib-ndr"),
                    max_bubble=app.max_bubble.value / 100.0,
                )
            except DistlabError as exc:
                assert app.result is None and app.error == str(exc)
                continue
            assert app.error is None and _same(app.result, fresh)
    finally:
        plt.close(app.fig)


def test_neighbour_values_are_the_values_either_side():
    import ipywidgets as widgets

    from distlab.widgets.common import neighbour_values

    assert neighbour_values(widgets.Dropdown(options=[1, 2, 4, 8], value=4)) == [8, 2]
    assert neighbour_values(widgets.Dropdown(options=[1, 2, 4, 8], value=1)) == [2]
    assert neighbour_values(widgets.ToggleButtons(options=[("plain DP", 0), ("ZeRO-1", 1)], value=1)) == [0]
    assert neighbour_values(widgets.Checkbox(value=True)) == [False]
    assert neighbour_values(widgets.IntSlider(value=16, min=1, max=16)) == [15]
    assert neighbour_values(widgets.FloatSlider(value=20.0, min=1.0, max=90.0, step=1.0)) == [21.0, 19.0]
    assert neighbour_values(widgets.IntSlider(value=3, min=1, max=16, disabled=True)) == []
    assert neighbour_values(widgets.BoundedFloatText(value=2.0)) == []


def test_in_a_kernel_the_neighbouring_configurations_are_prepared_in_idle_turns(monkeypatch):
    import asyncio

    calls = []
    real = triage.oom_triage

    def counted(model, cluster, **config):
        calls.append((model, cluster.nodes, config["tp"], config["pp"]))
        return real(model, cluster, **config)

    monkeypatch.setattr(triage, "oom_triage", counted)
    from distlab.widgets.common import forget_remembered

    forget_remembered()
    app = TriageApp()  # outside an event loop: nothing prepared
    assert app.preparing is None and len(calls) == 1

    async def student():
        app.tp.value = 4  # answered now; its neighbours computed in later turns
        assert len(calls) == 2
        await app.preparing
        # the neighbours of tp=4, pp=4, 32 nodes, llama3.1-70b, seq 8192, micro-batch 4, plain DP, no recomputation,
        # sequence parallel: the values 1 to REACH steps along each of the nine controls (the browser's ladders:
        # TriageApp.neighbour_states), less tp=8 (the first configuration, remembered already)
        prepared = len(calls) - 2
        assert prepared == sum(len(neighbour_steps(getattr(app, name), REACH)) for name in app.prepared_controls) - 1
        app.tp.value = 8  # a neighbour of tp=4: remembered, not computed again
        assert len(calls) == 2 + prepared
        app.pp.value = 2  # moved again before the controls rested: that preparation never starts
        first = app.preparing
        app.pp.value = 8
        before = len(calls)
        await first
        assert len(calls) == before
        await app.preparing
        assert len(calls) > before  # the neighbours of the last state, prepared
        return prepared

    try:
        prepared = asyncio.run(student())
    finally:
        app.close()
    assert prepared >= 9


@settings(max_examples=25, deadline=None)
@given(
    kind=st.sampled_from(["1f1b", "gpipe", "interleaved", "zb-h1", "naive"]),
    p=st.integers(1, 8),
    m=st.integers(1, 32),
    v=st.sampled_from([1, 2]),
    p2p=st.sampled_from([0.0, 1e-4]),
)
def test_the_stage_analysis_alternatives_remembered_equal_a_fresh_simulation(kind, p, m, v, p2p):
    # pipeline.advice remembers the bubble of each alternative it simulates (functools.lru_cache): the remembered
    # value is the fresh one, and the table is bounded
    from distlab.pipeline import advice

    args = (kind, p, m, v, 40, 2e-3, 2.0, p2p)
    remembered_value = advice._bubble_for(*args)
    assert advice._bubble_for(*args) == remembered_value
    assert advice._bubble_for.__wrapped__(*args) == remembered_value
    assert advice._bubble_for.cache_info().maxsize == 4096


def test_remembered_tells_true_one_and_one_point_zero_apart():
    # True == 1 == 1.0 and they hash alike, but the library refuses tp=True and takes tp=1: three different calls
    from distlab.widgets.common import remembered

    @remembered(8)
    def kind(value, *, other=0):
        return type(value).__name__, type(other).__name__

    assert [kind(1), kind(True), kind(1.0)] == [("int", "int"), ("bool", "int"), ("float", "int")]
    assert [kind(1, other=True), kind(1, other=1)] == [("int", "bool"), ("int", "int")]
    assert kind.cache_len() == 5


def test_a_closed_app_stops_preparing_and_a_drawing_control_prepares_nothing(monkeypatch):
    import asyncio

    from distlab.widgets.common import forget_remembered
    from distlab.widgets.mixture_of_experts import AllToAllApp

    forget_remembered()
    app = AllToAllApp()
    # the preparation alone: the frame cache's fill (distlab.widgets.framecache) calls compute_for too
    monkeypatch.setattr(app.prefetcher, "start_around", lambda *args, **kwargs: None)
    calls = []
    real = app.compute_for
    monkeypatch.setattr(app, "compute_for", lambda values: calls.append(values) or real(values))

    async def student():
        app.ep.value = 4  # answered (one call), its neighbours prepared in later turns
        await app.preparing
        prepared = len(calls) - 1
        assert prepared >= 5  # ep 2 and 8, and the other controls' neighbours
        app.step.value = 3  # the pairwise step changes only the drawing: answered, nothing prepared again
        await asyncio.sleep(0.5)
        assert len(calls) == prepared + 2
        app.skew.value = 0.5
        preparing = app.preparing
        app.close()  # closed before the controls rested: the preparation never runs
        await preparing
        assert len(calls) == prepared + 3

    try:
        asyncio.run(student())
    finally:
        plt.close(app.fig)


class _Spec:
    """An argument equal to another object built the same way (as a frozen dataclass is: its __eq__ is Python code,
    where the interpreter may switch threads); `between` runs at the chosen comparison."""

    between = None

    def __init__(self, v: int) -> None:
        self.v = v

    def __hash__(self) -> int:
        return hash(self.v)

    def __eq__(self, other) -> bool:
        if _Spec.between is not None:
            _Spec.between()
        return isinstance(other, _Spec) and self.v == other.v


def test_a_remembered_table_shared_by_two_threads_never_loses_an_entry_under_a_caller():
    # An app built in a cell (the main thread, outside APP_LOCK) and an app updating on a kernel subshell's thread
    # (JupyterLab 4.6's comms over subshells) may call one remembered function. Unshared, its table was read in two
    # steps (key in table, then move_to_end): an entry the other thread evicted in between raised a bare KeyError
    # at the caller (a traceback for the student). Here the other thread's call (a new argument: maxsize 1 evicts
    # the entry) runs at the second comparison of the first call's key, between those two steps.
    calls = []

    @remembered(1)
    def priced(spec):
        calls.append(spec.v)
        return spec.v * 10

    assert priced(_Spec(1)) == 10
    other = threading.Thread(target=priced, args=(_Spec(2),))
    compared = []

    def second_comparison_runs_the_other_thread():
        compared.append(1)
        if len(compared) == 2:
            _Spec.between = None
            run_until_blocked(other)  # as far as it can go while this lookup is under way

    _Spec.between = second_comparison_runs_the_other_thread
    try:
        assert priced(_Spec(1)) == 10  # found (one comparison), moved to the end (the second)
    finally:
        _Spec.between = None
    other.join()
    # the first call was answered from the table; the other thread's computed 2 and evicted 1 after it
    assert calls == [1, 2] and priced.cache_len() == 1
    assert priced(_Spec(2)) == 20 and calls == [1, 2]
