"""Shared widget plumbing: the LessonApp base, an in-place-updating figure and the error/result panel."""

from __future__ import annotations

import asyncio
import functools
import html
import math
import time
from typing import Any

import ipywidgets as widgets
import traitlets
from matplotlib.figure import Figure

from ..errors import ConfigurationError, DistlabError

__all__ = [
    "figure_canvas",
    "FRAME_COMPRESSION",
    "quick_frame",
    "message_html",
    "fit_labels",
    "dropdown_width_px",
    "OptionalDropdown",
    "replace_options",
    "GPU_COUNTS",
    "nearest_gpu_count",
    "gpu_slider",
    "BlitRenderer",
    "axes_state",
    "DATA",
    "attempt",
    "remembered",
    "remembered_estimate",
    "forget_remembered",
    "FILL_TURN_S",
    "PREPARE_AFTER_S",
    "event_loop_running",
    "fill_in_turns",
    "finish_cell_fills",
    "fill_order",
    "turn_deadline",
    "neighbour_values",
    "LessonApp",
]


def figure_canvas(figsize=(6.4, 3.6), margins=None) -> tuple[Figure, widgets.DOMWidget]:
    """A matplotlib Figure drawn by an ipympl canvas widget, without changing the global backend.

    ipympl redraws the same figure in place: no flicker, no new output. Fixed margins (not a
    layout engine) keep each redraw cheap.
    """
    from ipympl.backend_nbagg import new_figure_manager_given_figure

    fig = Figure(figsize=figsize)
    fig.subplots_adjust(**(margins or dict(left=0.1, right=0.98, bottom=0.1, top=0.95)))
    new_figure_manager_given_figure(id(fig), fig)
    canvas: Any = fig.canvas  # ipympl's Canvas widget (matplotlib's type names only FigureCanvasBase)
    canvas.toolbar_visible = False
    canvas.header_visible = False
    canvas.footer_visible = False
    canvas.resizable = False
    # What ipympl does itself once a front end says "initialized": send diffs only, no full PNG
    # for the saved-notebook preview on every frame (left on, a canvas drawn before it is shown
    # could render 0 x 0 in JupyterLab).
    canvas.syncing_data_url = False
    canvas.get_diff_image = functools.partial(quick_frame, canvas)
    return fig, canvas


#: zlib level of the PNG frames sent to the browser: 1 encodes a whole 640 x 340 frame in 2-3 ms less than PIL's
#: default (6): 4.5 against 6.5 ms CPU for the memory wall, 5.1 against 8.2 ms for the mesh grid, for 15-25% more
#: bytes (19 against 16 KB; 2026-11-24, the 2 vCPU dev machine).
FRAME_COMPRESSION = 1


def quick_frame(canvas) -> bytes | None:
    """The frame ipympl sends after a draw or blit: what matplotlib's WebAgg canvas sends (get_diff_image: the
    whole picture for the first frame or when the size changed, else only the pixels that changed, transparent
    elsewhere, which the browser lays over its last frame), PNG-encoded at FRAME_COMPRESSION. The encoding
    was the largest single cost of a blitted frame."""
    import io

    import numpy as np
    from PIL import Image

    if not canvas._png_is_old:
        return None
    pixels = np.asarray(canvas.get_renderer().buffer_rgba())
    words = pixels.view(np.uint32)[..., 0]  # one 32-bit word per pixel: one comparison each
    last = canvas._last_buff
    whole = canvas._force_full or words.shape != last.shape or bool((pixels[..., 3] != 255).any())
    canvas.set_image_mode("full" if whole else "diff")
    frame = words if whole else np.where(words != last, words, 0)
    canvas._last_buff = words.copy()
    canvas._force_full = False
    canvas._png_is_old = False
    with io.BytesIO() as png:
        Image.fromarray(frame.view(np.uint8).reshape(*frame.shape, 4)).save(
            png, format="png", compress_level=FRAME_COMPRESSION
        )
        return png.getvalue()


#: The colour of a warning line in a 'warn' status (the rest keeps the text colour).
WARNING_COLOUR = "#b3261e"


def message_html(text: str, kind: str = "result") -> str:
    """HTML for the status panel; kind 'error' shows distlab's message in place of a result; 'warn' is a result
    whose lines starting with 'warning' are red (the rest of the text keeps its colour)."""
    colour = {"result": "#1f2328", "warn": "#1f2328", "ok": "#1a7f37", "bad": "#b3261e", "error": "#b3261e"}[kind]
    prefix = "<b>Cannot compute:</b> " if kind == "error" else ""
    lines = [html.escape(line) for line in text.split("\n")]
    if kind == "warn":
        lines = [
            f'<span style="color:{WARNING_COLOUR}">{line}</span>' if line.startswith("warning") else line
            for line in lines
        ]
    body = "<br>".join(lines)
    return f'<div style="color:{colour}; font-family: var(--jp-code-font-family, monospace); white-space: pre-wrap">{prefix}{body}</div>'


class BlitRenderer:
    """Redraw only the artists that change (matplotlib's blitting), the static rest from a cache.

    The animated artists are left out of full draws; after every full draw the clean
    background is captured and the animated artists are painted on top. refresh() either
    restores that background and repaints the animated artists (blit: ipympl then sends
    only the changed pixels), or, when the static part changed, does a full draw.

    `data_artists` (optional) are a middle layer: the data a discrete control replaces (a model's
    curves) over axes that stay. refresh(data=True) repaints them over the cached axes (ticks and
    labels are not drawn again, the slowest part of a full draw), caches the result as the new
    background and paints the animated artists on top.

    No lesson app changes its axes on a control (fixed ranges, drawn ticks: plots._ticks), so a full draw happens
    only when the app is built or the canvas is resized.
    """

    def __init__(self, canvas, artists, data_artists=()):
        self.canvas = canvas
        self.artists = list(artists)
        self.data_artists = list(data_artists)
        self._axes = None
        self._background = None
        for artist in self.artists + self.data_artists:
            artist.set_animated(True)
        canvas.mpl_connect("draw_event", self._on_draw)

    def _on_draw(self, event=None):
        self._axes = self.canvas.copy_from_bbox(self.canvas.figure.bbox)
        self._paint(self.data_artists)
        self._background = self.canvas.copy_from_bbox(self.canvas.figure.bbox) if self.data_artists else self._axes
        self._paint(self.artists)

    def _paint(self, artists):
        figure = self.canvas.figure
        for artist in artists:
            figure.draw_artist(artist)

    def refresh(self, full: bool = False, data: bool = False) -> None:
        if full or self._background is None or self._axes is None:
            self.canvas.draw()
            return
        if data and self.data_artists:
            self.canvas.restore_region(self._axes)
            self._paint(self.data_artists)
            self._background = self.canvas.copy_from_bbox(self.canvas.figure.bbox) if self.data_artists else self._axes
        else:
            self.canvas.restore_region(self._background)
        self._paint(self.artists)
        self.canvas.blit(self.canvas.figure.bbox)


def axes_state(figure) -> tuple:
    """Every axes' limits, scales and tick labels: what a full draw paints besides the animated artists (the
    widget tests compare it before and after a control moves: no control changes the axes)."""
    return tuple(
        (
            ax.get_xlim(),
            ax.get_ylim(),
            ax.get_xscale(),
            ax.get_yscale(),
            tuple(t.get_text() for t in ax.get_xticklabels()),
            tuple(t.get_text() for t in ax.get_yticklabels()),
        )
        for ax in figure.axes
    )


#: The longest description ipywidgets' default label width (about 80 px) shows whole.
SHORT_LABEL = 9
#: A toggle button's room around its text (px): ipywidgets' button padding and border. Measured in Chromium with
#: JupyterLab's 13 px UI font: "plain DP" (54 px of text in DejaVu Sans) is cut to "plain ..." at 70 px, whole at 80.
BUTTON_PADDING_PX = 26
#: A dropdown's room around its option's text (px): the select's padding, border and arrow in JupyterLab's theme.
DROPDOWN_PADDING_PX = 48
#: ipywidgets' label width (--jp-widgets-inline-label-width) and a control's default width (--jp-widgets-inline-width)
LABEL_PX, CONTROL_PX = 80, 300
#: The font a button's text is measured in: DejaVu Sans (matplotlib's own, wider than the usual system UI fonts) at
#: JupyterLab's widget font size.
BUTTON_FONT_PX = 13


@functools.lru_cache(maxsize=512)
def text_width_px(text: str, size_px: float = BUTTON_FONT_PX) -> float:
    """The width (px) of `text` in DejaVu Sans at size_px (matplotlib's font metrics at 72 dpi: 1 pt = 1 px)."""
    from matplotlib.backends.backend_agg import RendererAgg
    from matplotlib.font_manager import FontProperties

    width, _, _ = RendererAgg(1, 1, 72).get_text_width_height_descent(
        text, FontProperties(family="DejaVu Sans", size=size_px), ismath=False
    )
    return float(width)


def dropdown_width_px(control: widgets.Dropdown) -> int:
    """The width (px) a dropdown needs to show its label and its widest option whole."""
    style: Any = control.style
    label = LABEL_PX if not style.description_width else math.ceil(text_width_px(control.description)) + 12
    widest = max(text_width_px(str(option)) for option in control._options_labels)
    return label + math.ceil(widest) + DROPDOWN_PADDING_PX


def fit_labels(widget) -> None:
    """Give every control under `widget` whose description is longer than SHORT_LABEL characters a label as wide
    as its text (ipywidgets cuts longer ones: "max bubb…", "interle…"), every toggle button room for its
    widest option's text (ipywidgets cuts it too: "plain …", "pipeline s…"), and every dropdown room for its
    widest option ("ethernet-1…", "megatron-dist…": issue 31)."""
    for child in [widget, *getattr(widget, "children", ())]:
        if child is not widget:
            fit_labels(child)
        description = getattr(child, "description", "")
        style: Any = getattr(child, "style", None)
        if (
            isinstance(description, str)
            and len(description) > SHORT_LABEL
            and hasattr(style, "description_width")
            and not style.description_width
        ):
            style.description_width = "initial"
        if isinstance(child, widgets.ToggleButtons) and child.options:
            labels = [option[0] if isinstance(option, tuple) else str(option) for option in child.options]
            need = math.ceil(max(text_width_px(str(label)) for label in labels)) + BUTTON_PADDING_PX
            given = str(style.button_width or "")
            if not given.endswith("px") or float(given[:-2]) < need:
                style.button_width = f"{need}px"
        if isinstance(child, widgets.Dropdown) and child.options:
            need = dropdown_width_px(child)
            given = str(child.layout.width or f"{CONTROL_PX}px")
            if given.endswith("px") and float(given[:-2]) < need:
                # a copy: apps share one Layout between controls ("narrow"), which keep their own widths
                state = {k: v for k, v in child.layout.get_state().items() if not k.startswith("_") and v is not None}
                child.layout = widgets.Layout(**{**state, "width": f"{need}px"})


class OptionalDropdown(widgets.Dropdown):
    """A Dropdown one of whose options stands for None ("dropless", "no limit", "calibrated", "= TP").

    ipywidgets reads a None value as "nothing selected": the box shows blank, and picking that option in the browser
    blanks it again. Here None selects its own option, so the student sees its label."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.index = self._index_of(self.value)  # a None value given: no change event has selected its option

    def _index_of(self, value):
        choices = list(self._options_values)
        if value is None:
            return choices.index(None) if None in choices else None
        if self.index is not None and self.equals(choices[self.index], value):
            return self.index
        return choices.index(value)

    @traitlets.observe("value")
    def _propagate_value(self, change):
        # as ipywidgets' _Selection, except that None is an option's value, not "no selection"
        index = self._index_of(change.new)
        if self.index != index:
            self.index = index


def replace_options(app, control, options, value) -> None:
    """Give a selection control of `app` new options and a value, without app.update() running in between
    (the app's observer returns while app._syncing is set: ipywidgets picks a value of its own first)."""
    app._syncing = True
    try:
        control.options = options
        control.value = value
    finally:
        app._syncing = False


def offered(value, name: str, options) -> None:
    """Raise our error naming `name` and the values a control offers when an app is built with `value` not among
    `options` (a list of values, or of (label, value) pairs), instead of a traitlets error or a silent snap."""
    values = [o[1] if isinstance(o, tuple) else o for o in options]
    if not any(value is v or (type(value) is type(v) and value == v) or _same_number(value, v) for v in values):
        shown = ", ".join(repr(v) for v in values)
        raise ConfigurationError(f"{name}={value!r} is not offered by this app; valid: {shown}")


def _same_number(a, b) -> bool:
    """Equal numbers of either int or float type (8 and 8.0), never a bool (True is not 1 here)."""
    numbers = (int, float)
    return (
        isinstance(a, numbers)
        and isinstance(b, numbers)
        and not isinstance(a, bool)
        and not isinstance(b, bool)
        and a == b
    )


#: The GPU counts a GPU slider offers, 1 to 1,024, about evenly on a log scale: every count up to 16, whole
#: 8-GPU nodes to 64, then four per doubling (every power of two among them), so small counts get as much of the
#: slider as large ones.
GPU_COUNTS = (*range(1, 17), *range(24, 65, 8), *(n * k // 4 for n in (64, 128, 256, 512) for k in (5, 6, 7, 8)))


def nearest_gpu_count(value: int) -> int:
    """`value` if GPU_COUNTS offers it, else the nearest count it offers on the log scale."""
    import math

    if value in GPU_COUNTS:
        return value
    return min(GPU_COUNTS, key=lambda n: abs(math.log(n) - math.log(max(1, value))))


def gpu_slider(value: int, description: str = "GPUs") -> widgets.SelectionSlider:
    """A slider over GPU_COUNTS (before: a linear 1-1,024 slider, where 1-16 took 1.5% of its width); a value it
    does not offer starts at the nearest count it does, on the log scale."""
    return widgets.SelectionSlider(
        options=GPU_COUNTS,
        value=nearest_gpu_count(value),
        description=description,
        continuous_update=True,
    )


#: What render() may return besides True (full redraw), False (blit) and None (nothing): the data layer changed.
DATA = "data"


def _either(a, b):
    """Combine two redraw requests: None (nothing to redraw) unless one asks; then full if either does, else
    the data layer if either changed it, else a blit."""
    if a is None and b is None:
        return None
    if any(x is not None and not isinstance(x, str) and bool(x) for x in (a, b)):
        return True
    return DATA if any(isinstance(x, str) and x == DATA for x in (a, b)) else False


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
    read-only (the library's are frozen dataclasses)."""
    from collections import OrderedDict

    if maxsize < 1:
        raise ConfigurationError(f"maxsize={maxsize}: must be at least 1")

    def decorate(function):
        table: OrderedDict = OrderedDict()

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
            if key in table:
                table.move_to_end(key)
                value = table[key]
            else:
                value = table[key] = attempt(functools.partial(function, *args, **kwargs))
                while len(table) > maxsize:
                    table.popitem(last=False)
            if isinstance(value, DistlabError):
                raise value.with_traceback(None)
            return value

        wrapper.cache_len = table.__len__  # type: ignore[attr-defined]
        wrapper.cache_clear = table.clear  # type: ignore[attr-defined]
        _TABLE_CLEARS.append(table.clear)
        return wrapper

    return decorate


@remembered(256)
def remembered_estimate(model, cluster, **config):
    """training.estimate remembered per configuration, one table shared by every app that prices steps (the
    training lab, the production-step app): a configuration any of them priced is not priced again."""
    from .. import training

    return training.estimate(model, cluster, **config)


#: How long one turn of background filling may hold the kernel (s): below one frame, so a control the student
#: moves meanwhile waits at most this long.
FILL_TURN_S = 0.012


#: How long (s) the controls must rest before an app prepares its neighbouring values (LessonApp.prepare_neighbours):
#: a slider being dragged sends a value every few tens of milliseconds and prepares nothing.
PREPARE_AFTER_S = 0.2


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


def neighbour_values(widget) -> list:
    """The values next to a control's current one, where a student moves it next: the options either side (a
    dropdown, toggle buttons, a selection slider), a checkbox's other state, a slider's value one step either side
    inside its range; none for a disabled control or a text box."""
    if getattr(widget, "disabled", False):
        return []
    value = widget.value
    if hasattr(widget, "options"):
        values = [o[1] if isinstance(o, tuple) else o for o in widget.options]
        if value not in values:
            return []
        k = values.index(value)
        return [values[i] for i in (k + 1, k - 1) if 0 <= i < len(values)]
    if isinstance(value, bool):
        return [not value]
    if isinstance(widget, (widgets.IntSlider, widgets.FloatSlider)):
        step = widget.step or 1
        return [v for v in (value + step, value - step) if widget.min <= v <= widget.max]
    return []


class LessonApp(widgets.VBox):
    """The template every lesson app shares: controls -> compute() -> render(result) -> summary(result).

    A subclass builds its controls, `status` (an HTML widget under the picture) and `renderer` (a
    BlitRenderer), passes its children to `super().__init__` and calls `self.update()`. It implements

    - `compute() -> result`: the library call(s) for the current controls; raises DistlabError on
      invalid input;
    - `render(result) -> bool | str | None`: moves the artists in place; True when the static part changed
      (full redraw), DATA when only the renderer's data layer changed, False for a blit, None when there
      is nothing to redraw;
    - `describe(result) -> str`: the text under the picture, naming the function behind each number;
    - optionally `fade() -> bool | None` (the picture on invalid input; default: left as it is) and
      `status_kind(result)` ('result', 'ok' or 'bad': the colour of the text; 'warn': only its warning lines red).

    An app whose compute() is `compute_for(self.values())` (over a remembered library call where it is slow) may
    name its controls in `prepared_controls`: inside a kernel, once the controls have rested PREPARE_AFTER_S after a
    change, the result of every neighbouring value of those controls (neighbour_values) is computed in later turns
    of the event loop (fill_positions: each turn at most FILL_TURN_S plus one neighbour; abandoned when a control
    moves again), so the student's next move finds its result remembered (pictures need no preparing: every app
    keeps fixed axes or draws in the browser, so a move is a blit). Nothing is sent meanwhile; outside an event
    loop (tests, scripts) nothing is prepared.

    `result` is the current result (None on invalid input); `error` is our message, shown in place of
    the result (None when valid). A DistlabError from compute, render or describe never reaches the
    student as a traceback: `update` catches it here, once for every app.
    """

    result = None
    error: str | None = None
    renderer: BlitRenderer | None = None
    #: True when a browser picture (distlab.widgets.browser) shows the text itself: the status panel then
    #: shows only our message on invalid input.
    summary_in_picture = False
    #: Controls (attribute names) whose neighbouring values' results are prepared in idle kernel turns.
    prepared_controls: tuple[str, ...] = ()
    #: Controls (attribute names) that change only what is drawn, not any result: moving one prepares nothing new.
    drawing_controls: tuple[str, ...] = ()
    #: The preparation under way in a kernel (an asyncio.Future; None when none).
    preparing = None
    _preparation = 0

    def close(self) -> None:
        """Close the app's widgets; a preparation under way stops at its next turn."""
        self._preparation += 1
        super().close()

    def __init__(self, children=(), **kwargs):
        super().__init__(children, **kwargs)
        fit_labels(self)

    def compute(self):
        raise NotImplementedError

    def values(self) -> dict:
        """{control name: value} of the prepared controls (what compute_for reads)."""
        return {name: getattr(self, name).value for name in self.prepared_controls}

    def compute_for(self, values: dict):
        """The result for these control values (an app with prepared_controls computes through it)."""
        raise NotImplementedError

    def prepare_neighbours(self, change=None) -> None:
        """Inside a running kernel, once the controls have rested PREPARE_AFTER_S: compute, one per later turn, the
        result of every neighbouring value of each prepared control, the control just changed (`change`'s owner)
        first; abandoned when update runs again (a slider dragged prepares nothing). Outside an event loop:
        nothing. `preparing` is a future done when the preparation has ended."""
        if not self.prepared_controls or not event_loop_running():
            return
        moved = change.get("owner") if isinstance(change, dict) else None
        if moved is not None and any(moved is getattr(self, name) for name in self.drawing_controls):
            return  # the neighbours prepared for the other controls still hold (a newer change would restart them)
        self._preparation += 1
        generation = self._preparation
        current = self.values()
        names = sorted(self.prepared_controls, key=lambda name: getattr(self, name) is not moved)
        pending = [{**current, name: value} for name in names for value in neighbour_values(getattr(self, name))]
        loop = asyncio.get_running_loop()
        done = loop.create_future()

        def finish(filling) -> None:
            if done.done():
                return
            error = filling.exception()
            if error is not None:
                done.set_exception(error)
            else:
                done.set_result(None)

        def start() -> None:
            if generation != self._preparation:  # moved again meanwhile: a newer preparation follows
                done.set_result(None)
                return
            filling = fill_positions(pending, self._prepare, lambda: generation == self._preparation, lambda: None)
            filling.add_done_callback(finish)

        loop.call_later(PREPARE_AFTER_S, start)
        self.preparing = done

    def _prepare(self, values: dict) -> None:
        # one neighbour: its result remembered (our error too)
        attempt(self.compute_for, values)

    def render(self, result) -> bool | None:
        return None

    def fade(self) -> bool | None:
        return None

    def describe(self, result) -> str:
        raise NotImplementedError

    def status_kind(self, result) -> str:
        return "result"

    def picture_note(self, result) -> str:
        """For an app whose picture shows its text (summary_in_picture): a warning kept under the picture, or ""."""
        return ""

    def summary(self, result=None) -> str:
        """The text under the picture for `result` (default: the current one; our message when there is none)."""
        result = self.result if result is None else result
        if result is None:
            return self.error or ""
        return self.describe(result)

    def update(self, change=None) -> None:
        """Recompute and redraw in place; on invalid input fade the picture and show our message instead."""
        full = None
        try:
            result = self.compute()
            self.result, self.error = result, None
            full = self.render(result)
            text, kind = self.describe(result), self.status_kind(result)
        except DistlabError as exc:
            self.result, self.error = None, str(exc)
            full = _either(full, self.fade())
            text, kind = self.error, "error"
        if self.summary_in_picture and kind != "error":  # the picture shows the text; only its note stays here
            note = self.picture_note(self.result)
            self.status.value = message_html(note, "warn") if note else ""
        else:
            self.status.value = message_html(text, kind)
        if full is not None and self.renderer is not None:
            if isinstance(full, str) and full == DATA:
                self.renderer.refresh(data=True)
            else:
                self.renderer.refresh(full=bool(full))
        self.prepare_neighbours(change)
