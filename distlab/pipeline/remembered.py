"""Simulated pipeline steps remembered by their settings, within a bound on the ops held (Lesson 4 §6).

A widget simulates the step of its current settings and of every setting one control away (the prefetch), and the
next change's neighbours are mostly the same steps again; an analysis simulates a dozen alternatives and its
neighbouring settings share most of them. A simulated step is a pure function of its settings (schedule, stages,
microbatches, chunks, placement, per-stage times, p2p) and a Timeline is frozen with read-only arrays, so one can be
handed to every caller that asks for the same settings. At most MAX_REMEMBERED_OPS ops are held, the least recently
used step dropped first; an error is never remembered (it is raised again, computed again).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable, Hashable

__all__ = ["MAX_REMEMBERED_OPS", "remembered", "forget_all"]

#: The most ops (F, B and W operations of every stage, summed over the steps held) the memory keeps: a Timeline holds
#: about 50 bytes an op (six arrays an op), so about 10 MB.
MAX_REMEMBERED_OPS = 200_000

_steps: OrderedDict = OrderedDict()  # key -> (timeline, its ops)
_held = [0]  # ops held
_lock = threading.Lock()


def remembered(key: Hashable, simulate: Callable):
    """The step `simulate()` returns for `key`, computed once while it is held (a step larger than the whole bound
    is computed every time and not held)."""
    with _lock:
        found = _steps.get(key)
        if found is not None:
            _steps.move_to_end(key)
            return found[0]
    timeline = simulate()
    ops = int(timeline.start.size)
    if ops > MAX_REMEMBERED_OPS:
        return timeline
    with _lock:
        if key not in _steps:
            _steps[key] = (timeline, ops)
            _held[0] += ops
        while _held[0] > MAX_REMEMBERED_OPS:
            _held[0] -= _steps.popitem(last=False)[1][1]
    return timeline


def forget_all() -> None:
    """Drop every remembered step (tests that time or count simulations start from none)."""
    with _lock:
        _steps.clear()
        _held[0] = 0
