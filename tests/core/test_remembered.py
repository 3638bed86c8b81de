"""Simulated pipeline steps remembered by their settings (distlab.pipeline.remembered): the same step for the same
settings, a fresh one for any other, never a stale or changed one, within the bound on ops held."""

from __future__ import annotations

import dataclasses
import threading

import numpy as np
import pytest

from distlab.errors import ConfigurationError
from distlab.pipeline import analyze_stages, schedule
from distlab.pipeline import remembered as memory
from distlab.pipeline.schedules import _raw_orders
from distlab.pipeline.timeline import _simulate_raw

FIELDS = [f.name for f in dataclasses.fields(schedule("1f1b", 2, 2))]


@pytest.fixture(autouse=True)
def nothing_remembered():
    memory.forget_all()
    yield
    memory.forget_all()


def _same(a, b) -> bool:
    """Every field of two timelines equal (arrays element by element)."""
    return all(np.array_equal(getattr(a, f), getattr(b, f)) for f in FIELDS)


@pytest.mark.parametrize(
    ("name", "p", "m", "v"), [("1f1b", 4, 8, 1), ("interleaved", 4, 8, 2), ("zb-h1", 4, 6, 1), ("dualpipe", 4, 8, 2)]
)
def test_a_remembered_step_is_the_step_simulated_afresh(name, p, m, v):
    """Independent of the memory: the step _simulate_raw builds from the schedule's own orders, field by field."""
    first = schedule(name, p, m, chunks=v, t_f=[1.0, 1.5, 1.0, 2.0], t_b=1.2, t_w=0.7, p2p=0.1)
    again = schedule(name, p, m, chunks=v, t_f=[1.0, 1.5, 1.0, 2.0], t_b=1.2, t_w=0.7, p2p=0.1)
    assert again is first  # held: the same frozen object
    t_f, t_b, t_w = np.array([1.0, 1.5, 1.0, 2.0]), np.full(p, 1.2), np.full(p, 0.7)
    chunks = first.chunks
    where = first.placement
    fresh = _simulate_raw(_raw_orders(name, p, m, chunks), p, chunks, t_f, t_b, t_w, 0.1, name, m, where)
    assert _same(first, fresh)


def test_any_other_setting_is_simulated_not_served_from_memory():
    """A step differing in one setting is a different object with its own numbers: 1F1B's bubble (p-1)/(m+p-1)
    (Narayanan et al. 2021, Sec. 2.2) is 3/11 at p=4, m=8 and 3/13 at m=10; a uneven t_f changes the step time."""
    base = schedule("1f1b", 4, 8)
    assert base.bubble_fraction == pytest.approx(3 / 11)
    assert schedule("1f1b", 4, 10).bubble_fraction == pytest.approx(3 / 13)
    # the same F time on every stage but the last, twice as long there: a different step, not the held one
    uneven = schedule("1f1b", 4, 8, t_f=[1, 1, 1, 2])
    assert uneven is not base and uneven.step_time > base.step_time
    assert schedule("1f1b", 4, 8, p2p=0.5).step_time > base.step_time
    assert schedule("1f1b", 4, 8) is base


def test_a_held_step_cannot_be_changed_by_the_caller_it_was_given_to():
    """The premise of handing one step to every caller: a Timeline is frozen and its arrays read-only."""
    step = schedule("gpipe", 3, 4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        step.step_time = 0.0
    for name in FIELDS:
        value = getattr(step, name)
        if isinstance(value, np.ndarray):
            with pytest.raises(ValueError):
                value[...] = 0
    assert schedule("gpipe", 3, 4) is step and step.step_time == pytest.approx(3 * (4 + 3 - 1))  # (m+p-1)(t_f+t_b+t_w)


def test_an_error_is_raised_every_time_and_never_held():
    """Times further apart than MAX_TIME_RATIO are refused, on every call, and nothing is held for them."""
    for _ in range(2):
        with pytest.raises(ConfigurationError, match="t_f"):
            schedule("1f1b", 2, 2, t_f=1.0, t_b=1e13)
    assert memory._held[0] == 0 and not memory._steps


def test_the_ops_held_never_exceed_the_bound_and_the_least_recently_used_goes_first(monkeypatch):
    """With room for 100 ops: 1F1B on p=2 stages and m microbatches holds 2 p m = 4 m ops (F and B per stage and
    microbatch), so m = 10 (40 ops) and m = 12 (48) fit together, and m = 5 (20 more: 108) drops the least
    recently used of them."""
    monkeypatch.setattr(memory, "MAX_REMEMBERED_OPS", 100)
    ten, twelve = schedule("1f1b", 2, 10), schedule("1f1b", 2, 12)
    assert (ten.start.size, twelve.start.size) == (40, 48) and memory._held[0] == 88
    assert schedule("1f1b", 2, 10) is ten  # used again: now twelve is the least recently used
    five = schedule("1f1b", 2, 5)
    assert memory._held[0] == 60 and memory._held[0] <= 100
    assert schedule("1f1b", 2, 10) is ten and schedule("1f1b", 2, 5) is five
    assert schedule("1f1b", 2, 12) is not twelve  # dropped: simulated again
    assert memory._held[0] == sum(ops for _, ops in memory._steps.values()) <= 100
    big = schedule("1f1b", 2, 30)  # 120 ops, more than the whole bound: computed, never held
    assert big.start.size == 120 and schedule("1f1b", 2, 30) is not big and memory._held[0] <= 100


def test_the_stage_analysis_and_its_alternatives_share_the_held_steps():
    """analyze_stages simulates its step through the same memory as schedule(): equal settings, the same step
    (layer_time 1 and backward_factor 2 make the stage's F 8 layers x 1 and B = W = half of 2 x 8)."""
    analysis = analyze_stages(32, 4, 8, seq_len=4096, hidden=4096)
    held = len(memory._steps)  # the analysis's step and the alternatives it weighs (3 stages here)
    step = schedule("1f1b", 4, 8, t_f=8.0, t_b=8.0, t_w=8.0)
    assert analysis.bubble_fraction == pytest.approx(step.bubble_fraction) == pytest.approx(3 / 11)
    assert held >= 1 and len(memory._steps) == held  # schedule() was handed the analysis's held step, not a new one


def test_threads_asking_at_once_all_get_the_right_step():
    """Eight threads asking for overlapping settings at once: each answer equals the step simulated afresh."""
    settings = [("1f1b", 4, m) for m in range(4, 12)] * 4
    answers: dict = {}

    def ask(k, setting):
        answers[k] = schedule(*setting)

    threads = [threading.Thread(target=ask, args=(k, s)) for k, s in enumerate(settings)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    memory.forget_all()
    for k, setting in enumerate(settings):
        assert _same(answers[k], schedule(*setting))
