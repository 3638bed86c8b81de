"""Shared widget plumbing: the LessonApp base and the error/result panel under its picture.

The rest of the shared plumbing lives by responsibility (all of it importable from here, as before): the figure
canvas and blitting renderer in canvas.py, the controls in controls.py, remembering and filling in the kernel's
spare time in filling.py.
"""

from __future__ import annotations

import asyncio
import html
import re

import ipywidgets as widgets

from ..errors import DistlabError
from .browser import BrowserPicture
from .canvas import DATA, FRAME_COMPRESSION, BlitRenderer, _either, axes_state, figure_canvas, quick_frame
from .controls import (
    GPU_COUNTS,
    SHORT_LABEL,
    OptionalDropdown,
    dropdown_width_px,
    fit_labels,
    gpu_slider,
    nearest_gpu_count,
    neighbour_values,
    offered,
    replace_options,
    show_what_applies,
    text_width_px,
)
from .filling import (
    APP_LOCK,
    FILL_TURN_S,
    attempt,
    event_loop_running,
    fill_in_turns,
    fill_order,
    fill_positions,
    finish_cell_fills,
    forget_remembered,
    remembered,
    remembered_estimate,
    turn_deadline,
)

__all__ = [
    "figure_canvas",
    "FRAME_COMPRESSION",
    "quick_frame",
    "message_html",
    "WARNING_COLOUR",
    "fit_labels",
    "SHORT_LABEL",
    "text_width_px",
    "dropdown_width_px",
    "OptionalDropdown",
    "replace_options",
    "show_what_applies",
    "offered",
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
    "fill_positions",
    "fill_order",
    "turn_deadline",
    "neighbour_values",
    "lock_comms",
    "LessonApp",
]

#: The colour of a warning line in a 'warn' status (the rest keeps the text colour).
WARNING_COLOUR = "#b3261e"


#: A space between a number and its unit ("5.75 ms"): written as a no-break space in the status panel, whose lines wrap
#: at the notebook's width and broke "5.75 / ms exposed" (review v16, lesson 8's bucket app).
_UNIT_GAP = re.compile(
    r"(\d) (?=(?:[kMGTP]?B(?:/s)?|[kMGT]iB|ms|µs|ns|s|%|W|[kMG]Hz|[TP]FLOP/s|GPUs?|nodes?|days?|h|min)(?![\w/]))"
)


def message_html(text: str, kind: str = "result") -> str:
    """HTML for the status panel; kind 'error' shows distlab's message in place of a result; 'warn' is a result
    whose lines starting with 'warning' are red (the rest of the text keeps its colour)."""
    colour = {"result": "#1f2328", "warn": "#1f2328", "ok": "#1a7f37", "bad": "#b3261e", "error": "#b3261e"}[kind]
    prefix = "<b>Cannot compute:</b> " if kind == "error" else ""
    lines = [_UNIT_GAP.sub("\\1&nbsp;", html.escape(line)) for line in text.split("\n")]
    if kind == "warn":
        lines = [
            f'<span style="color:{WARNING_COLOUR}">{line}</span>' if line.startswith("warning") else line
            for line in lines
        ]
    body = "<br>".join(lines)
    return f'<div style="color:{colour}; font-family: var(--jp-code-font-family, monospace); white-space: pre-wrap">{prefix}{body}</div>'


class _UnderAppLock:
    """A comm's message handler, called under filling.APP_LOCK."""

    def __init__(self, handler) -> None:
        self.handler = handler

    def __call__(self, msg) -> None:
        with APP_LOCK:
            self.handler(msg)


def lock_comms(root: widgets.Widget) -> None:
    """Handle every comm message to `root` and to each widget it holds (its children, theirs, every widget a synced
    trait names: a canvas's toolbar, a frame cache's controls) under filling.APP_LOCK: the one place where every
    change the browser makes enters the kernel (ipywidgets' set_state, then the observers, the app's update; ipympl's
    draw requests; a browser picture's custom messages). JupyterLab 4.6 hands widget comm messages to a kernel
    subshell's thread (commsOverSubshells), while fills and frame-cache paints run in the main thread's idle turns
    (issue 32): locked here, an observer that runs before update (replace_options) or a canvas draw never runs
    during a paint. A widget without a comm (no kernel) is left as it is."""
    seen: set[int] = set()
    stack: list = [root]
    while stack:
        widget = stack.pop()
        if id(widget) in seen:
            continue
        seen.add(id(widget))
        comm = getattr(widget, "comm", None)
        handler = getattr(comm, "_msg_callback", None)
        if comm is not None and handler is not None and not isinstance(handler, _UnderAppLock):
            comm.on_msg(_UnderAppLock(handler))
        for name in widget.keys:
            value = getattr(widget, name, None)
            for item in value if isinstance(value, (list, tuple)) else (value,):
                if isinstance(item, widgets.Widget):
                    stack.append(item)


#: How long (s) the controls must rest before an app prepares its neighbouring values (LessonApp.prepare_neighbours):
#: a slider being dragged sends a value every few tens of milliseconds and prepares nothing.
PREPARE_AFTER_S = 0.2


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
    #: Seconds the controls rest before preparing (None: PREPARE_AFTER_S); 0 for an app with no slider to drag.
    prepare_after_s: float | None = None
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
        lock_comms(self)

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
        pending = self.neighbour_states(self.values(), moved)
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

        loop.call_later(PREPARE_AFTER_S if self.prepare_after_s is None else self.prepare_after_s, start)
        self.preparing = done

    def neighbour_states(self, current: dict, moved=None) -> list:
        """The states prepare_neighbours computes: every neighbouring value of each prepared control (neighbour_values)
        in the state `current`, the control `moved` first."""
        names = sorted(self.prepared_controls, key=lambda name: getattr(self, name) is not moved)
        return [{**current, name: value} for name in names for value in neighbour_values(getattr(self, name))]

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

    def drawn(self, compute, keep=None) -> tuple:
        """(result, redraw request, text, kind) of `compute()`'s result, rendered and described (`keep(result)` is
        called before render); our DistlabError in place of the result, its message as the text and kind 'error' when
        compute, render or describe raises one. The one place an app's DistlabError is caught (update, and the frame
        cache painting a neighbour: distlab.widgets.framecache)."""
        full = None
        try:
            result = compute()
            if keep is not None:
                keep(result)
            full = self.render(result)
            return result, full, self.describe(result), self.status_kind(result)
        except DistlabError as exc:
            return exc, full, str(exc), "error"

    def update(self, change=None) -> None:
        """Recompute and redraw in place; on invalid input fade the picture and show our message instead. Holds
        filling.APP_LOCK: no fill turn runs meanwhile, in any thread (a control's observers may run in a kernel
        subshell's thread)."""
        with APP_LOCK:
            self._update(change)

    def _update(self, change=None) -> None:
        def keep(result) -> None:
            self.result, self.error = result, None

        outcome, full, text, kind = self.drawn(self.compute, keep)
        if isinstance(outcome, DistlabError):
            self.result, self.error = None, text
            full = _either(full, self.fade())
        self._present(text, kind)
        if full is not None and self.renderer is not None:
            if isinstance(full, str) and full == DATA:
                self.renderer.refresh(data=True)
            else:
                self.renderer.refresh(full=bool(full))
        self.prepare_neighbours(change)

    def _present(self, text: str, kind: str) -> None:
        """The text under the picture, and the picture itself only when there is a result: our message appears
        once, where the result would be, with no empty or faded picture above it (issue 31: "errors print twice
        above blank space"). A browser picture (summary_in_picture) writes the result or our message under its
        own canvas, which it hides at an invalid position (browser_js/common.js; BrowserPicture.show_error makes
        sure the current position carries our message): the status panel then stays empty, or holds only the
        picture's warning note; an app drawn by matplotlib hides its canvas and says it in the status panel."""
        picture = self.picture_widget()
        if kind == "error" and isinstance(picture, BrowserPicture):
            picture.show_error(text)
            status = ""
        else:
            status = self.status_html(text, kind, self.result)
        if self.status.value != status:
            self.status.value = status
        if picture is not None and not isinstance(picture, BrowserPicture):
            display = "none" if kind == "error" else None
            if picture.layout.display != display:
                picture.layout.display = display

    def status_html(self, text: str, kind: str, result=None) -> str:
        """The status panel's HTML for `text` of `kind` (describe's text or our message, kind 'error'), `result`
        the result it describes: only the picture's note when the picture shows the text itself
        (summary_in_picture), else message_html. _present shows it; the frame cache (distlab.widgets.framecache)
        sends it for a neighbouring state."""
        if self.summary_in_picture and kind != "error":  # the picture shows the text; only its note stays here
            note = self.picture_note(result)
            return message_html(note, "warn") if note else ""
        return message_html(text, kind)

    def picture_widget(self):
        """The widget that shows the app's picture: its browser picture (`picture`) or its matplotlib canvas
        (the renderer's); None for an app without one."""
        picture = getattr(self, "picture", None)
        if isinstance(picture, BrowserPicture):
            return picture
        return self.renderer.canvas if self.renderer is not None else None

    def picture_shown(self) -> bool:
        """Whether the student sees a picture now: a browser picture hides its canvas at a position with our
        message (BrowserPicture.canvas_shown), a matplotlib canvas is hidden on invalid input."""
        picture = self.picture_widget()
        if picture is None:
            return False
        if isinstance(picture, BrowserPicture):
            return picture.canvas_shown
        return picture.layout.display != "none"

    def shown_texts(self) -> list[str]:
        """The texts the student reads under the picture now, as plain text: the browser picture's own text (an
        app whose picture shows it) and the status panel's; empty ones left out."""
        texts = []
        picture = self.picture_widget()
        if isinstance(picture, BrowserPicture):
            texts.append(picture.summary)
        status = html.unescape(re.sub(r"<[^>]+>", "", re.sub(r"<br\s*/?>", "\n", self.status.value)))
        texts.append(status.replace("\xa0", " "))  # the no-break spaces that keep a number with its unit
        return [t for t in texts if t.strip()]
