"""Computing in the kernel's spare time: results remembered per configuration (our error too), and work filled in
over turns of the kernel's event loop so that a control moved meanwhile is answered within a frame."""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections import OrderedDict

from ..errors import ConfigurationError, DistlabError

__all__ = [
    "APP_LOCK",
    "attempt",
    "remembered",
    "remembered_estimate",
    "forget_remembered",
    "FILL_TURN_S",
    "event_loop_running",
    "fill_in_turns",
    "finish_cell_fills",
    "fill_positions",
    "fill_order",
    "turn_deadline",
]


def attempt(compute, *args):
    """compute(*args), or the DistlabError it raised, returned: how an app computes every position of a browser
    picture's slider (distlab.widgets.browser), where each invalid position shows our message in its place."""
    try:
        return compute(*args)
    except DistlabError as exc:
        return exc


#: The clear() of every table made by remembered (forget_remembered empties them all).
_TABLE_CLEARS: list = []


def forget_remembered() -> None:
    """Empty every remembered table (a benchmark times first visits; memory handed back)."""
    for clear in _TABLE_CLEARS:
        clear()


def remembered(maxsize: int):
    """A decorator: the function (a pure library call; its arguments hashable) memoised on its arguments in a
    least-recently-used table of at most `maxsize` entries, shared by every instance of an app and every control
    (a configuration visited again, whichever control led there, is not recomputed). Our error is remembered
    too and raised again; any other exception is not remembered. The wrapper's `cache_len()` is the number kept and
    `cache_clear()` empties the table. Callers get the same result object each time: results must be treated as
    read-only (the library's are frozen dataclasses). Safe from several threads (two may compute the same entry)."""

    if maxsize < 1:
        raise ConfigurationError(f"maxsize={maxsize}: must be at least 1")

    def decorate(function):
        table: OrderedDict = OrderedDict()
        # the table's own lock, held for each lookup and each insertion (not while computing): an app built in a
        # cell (the main thread, outside APP_LOCK) and an app updating on a kernel subshell's thread may share a table
        lock = threading.RLock()

        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            # each argument with its type: True, 1 and 1.0 hash alike, but our checks treat them apart (tp=True is
            # refused, tp=1 is not), so they are different calls
            key = (
                tuple((type(a), a) for a in args),
                tuple((k, type(v), v) for k, v in sorted(kwargs.items(), key=lambda item: item[0])),
            )
            try:
                hash(key)
            except TypeError:  # an argument that cannot be a key (a list): computed, not remembered
                return function(*args, **kwargs)
            with lock:
                found = key in table
                if found:
                    table.move_to_end(key)
                    value = table[key]
            if not found:
                value = attempt(functools.partial(function, *args, **kwargs))
                with lock:
                    table[key] = value
                    table.move_to_end(key)
                    while len(table) > maxsize:
                        table.popitem(last=False)
            if isinstance(value, DistlabError):
                raise value.with_traceback(None)
            return value

        def clear() -> None:
            with lock:
                table.clear()

        wrapper.cache_len = table.__len__  # type: ignore[attr-defined]
        wrapper.cache_clear = clear  # type: ignore[attr-defined]
        _TABLE_CLEARS.append(clear)
        return wrapper

    return decorate


@remembered(2048)
def remembered_estimate(model, cluster, **config):
    """training.estimate remembered per configuration, one table shared by every app that prices steps (the
    training lab, the production-step app): a configuration any of them priced is not priced again. 2,048 estimates
    (about 8 kB each): the default lab's neighbourhood fill prices 1,068 configurations (the triage variants of
    those that do not fit among them), which a table of 256 lost before the next fill or the next visit."""
    from .. import training

    return training.estimate(model, cluster, **config)


#: Held by every change an app draws (LessonApp.update) and by every turn of work in the kernel's spare time
#: (fill_in_turns, finish_cell_fills, prefetch.Prefetcher, the frame cache's paints): one at a time, whichever thread
#: runs it. JupyterLab 4.6 sends widget comm messages over a kernel subshell (its setting commsOverSubshells,
#: default "perCommTarget"; ipykernel 7 runs each subshell in its own thread), so a control's observers run in the
#: subshell's thread while a fill a cell started runs in the main thread's event loop: unlocked, an update read the
#: values of the neighbour the frame cache was painting and showed its text (issue 32). Re-entrant: an update
#: outside an event loop fills at once, in its own thread.
APP_LOCK = threading.RLock()


#: How long one turn of background filling may hold the kernel (s): below one frame, so a control the student
#: moves meanwhile waits at most this long.
FILL_TURN_S = 0.012


def event_loop_running() -> bool:
    """Whether an asyncio event loop runs here (inside a kernel: yes; tests and scripts: no)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def fill_in_turns(step):
    """Call step() until it returns False: inside a running kernel, one call per turn of its event loop, so the
    browser's next message is served between two calls (a picture's other positions are filled in after the
    current one is drawn), returning an asyncio.Future done when step() has returned False; with no running event
    loop (tests, scripts) all at once, before returning None.

    A fill that a cell started (not a control's callback) is also finished when that cell ends, before the kernel
    reports the cell done (finish_cell_fills): a notebook executed without a browser (nbconvert --execute, Voila,
    nbval) then saves every position in its widget state, so an export to HTML shows them with no kernel.
    """
    unlocked = step

    def step() -> bool:
        with APP_LOCK:
            return unlocked()

    if not event_loop_running():
        while step():
            pass
        return None
    loop = asyncio.get_running_loop()
    done = loop.create_future()

    def turn():
        if done.done():  # finished at the end of its cell
            return
        try:
            more = step()
        except BaseException as exc:  # a bug, not our error (steps catch those): surfaces on the future
            done.set_exception(exc)
            return
        if more:
            loop.call_soon(turn)
        else:
            done.set_result(None)

    loop.call_soon(turn)
    if _cell_running():
        _CELL_FILLS.append((step, done))
    return done


#: The fills (step, future) started by the cell the kernel is running, finished by finish_cell_fills at its end.
_CELL_FILLS: list = []


def _cell_running() -> bool:
    """Whether this code runs for a cell the kernel was asked to execute (not for a control's message), and if so
    make sure finish_cell_fills runs when the cell ends (an IPython post_run_cell callback)."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - ipywidgets needs IPython
        return False
    shell = get_ipython()
    kernel = getattr(shell, "kernel", None)
    if shell is None or kernel is None:
        return False
    parent = kernel.get_parent() or {}
    if parent.get("header", {}).get("msg_type") != "execute_request":
        return False
    if finish_cell_fills not in shell.events.callbacks["post_run_cell"]:
        shell.events.register("post_run_cell", finish_cell_fills)
    return True


def finish_cell_fills(result=None) -> None:
    """Run every fill the ending cell started to its end now, in the cell's own time (IPython's post_run_cell):
    what they send then reaches the kernel's client as part of that cell, whose execution nbconvert and Voila
    wait for (what later turns send comes after the cell is reported done, and nbconvert does not record it).
    The cell's picture is already shown; a control moved afterwards is answered in turns as before."""
    while _CELL_FILLS:
        step, done = _CELL_FILLS.pop(0)
        if done.done():
            continue
        try:
            while step():
                pass
        except BaseException as exc:  # a bug, not our error (steps catch those): surfaces on the future
            done.set_exception(exc)
            continue
        done.set_result(None)


def fill_positions(pending: list, compute, still_current, send, progress_s: float | None = None):
    """fill_in_turns over the positions in `pending` (fill_order: nearest first): each turn calls compute(p) for
    the next positions until turn_deadline(), send() once all are computed; a turn that finds still_current()
    False (the controls moved again: a newer refresh fills instead) stops. With `progress_s`, inside a running
    event loop send() also runs every progress_s seconds, so the positions done so far reach the browser.
    Returns what fill_in_turns returns."""
    last_send = time.perf_counter()

    def step() -> bool:
        nonlocal last_send
        if not still_current():
            return False
        deadline = turn_deadline()
        while pending and time.perf_counter() < deadline:
            compute(pending.pop(0))
        progress = progress_s is not None and event_loop_running() and time.perf_counter() > last_send + progress_s
        if not pending or progress:
            send()
            last_send = time.perf_counter()
        return bool(pending)

    return fill_in_turns(step)


def fill_order(positions, current) -> list:
    """The positions still to compute, nearest to the current one first (where the slider goes next)."""
    return sorted(positions, key=lambda p: (abs(p - current), p))


def turn_deadline() -> float:
    """The time.perf_counter() at which one turn of fill_in_turns should hand the kernel back."""
    return time.perf_counter() + FILL_TURN_S
