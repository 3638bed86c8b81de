"""Shared widget plumbing: the LessonApp base, an in-place-updating figure and the error/result panel."""

from __future__ import annotations

import html
from typing import Any

import ipywidgets as widgets
from matplotlib.figure import Figure

from ..errors import DistlabError

__all__ = ["figure_canvas", "message_html", "BlitRenderer", "LessonApp"]


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
    return fig, canvas


def message_html(text: str, kind: str = "result") -> str:
    """HTML for the status panel; kind 'error' shows distlab's message in place of a result."""
    colour = {"result": "#1f2328", "ok": "#1a7f37", "bad": "#b3261e", "error": "#b3261e"}[kind]
    prefix = "<b>Cannot compute:</b> " if kind == "error" else ""
    body = html.escape(text).replace("\n", "<br>")
    return f'<div style="color:{colour}; font-family: var(--jp-code-font-family, monospace); white-space: pre-wrap">{prefix}{body}</div>'


class BlitRenderer:
    """Redraw only the artists that change (matplotlib's blitting), the static rest from a cache.

    The animated artists are left out of full draws; after every full draw the clean
    background is captured and the animated artists are painted on top. refresh() either
    restores that background and repaints the animated artists (blit: ipympl then sends
    only the changed pixels), or, when the static part changed, does a full draw.
    """

    def __init__(self, canvas, artists):
        self.canvas = canvas
        self.artists = list(artists)
        self._background = None
        for artist in self.artists:
            artist.set_animated(True)
        canvas.mpl_connect("draw_event", self._on_draw)

    def _on_draw(self, event=None):
        self._background = self.canvas.copy_from_bbox(self.canvas.figure.bbox)
        self._paint()

    def _paint(self):
        figure = self.canvas.figure
        for artist in self.artists:
            figure.draw_artist(artist)

    def refresh(self, full: bool = False) -> None:
        if full or self._background is None:
            self.canvas.draw()
            return
        self.canvas.restore_region(self._background)
        self._paint()
        self.canvas.blit(self.canvas.figure.bbox)


def _either(a: bool | None, b: bool | None) -> bool | None:
    """Combine two redraw requests: None (nothing to redraw) unless one asks; then full if either does."""
    return None if a is None and b is None else bool(a) or bool(b)


class LessonApp(widgets.VBox):
    """The template every lesson app shares: controls -> compute() -> render(result) -> summary(result).

    A subclass builds its controls, `status` (an HTML widget under the picture) and `renderer` (a
    BlitRenderer), passes its children to `super().__init__` and calls `self.update()`. It implements

    - `compute() -> result`: the library call(s) for the current controls; raises DistlabError on
      invalid input;
    - `render(result) -> bool | None`: moves the artists in place; True when the static part changed
      (full redraw), False for a blit, None when there is nothing to redraw;
    - `describe(result) -> str`: the text under the picture, naming the function behind each number;
    - optionally `fade() -> bool | None` (the picture on invalid input; default: left as it is) and
      `status_kind(result)` ('result', 'ok' or 'bad': the colour of the text).

    `result` is the current result (None on invalid input); `error` is our message, shown in place of
    the result (None when valid). A DistlabError from compute, render or describe never reaches the
    student as a traceback: `update` catches it here, once for every app.
    """

    result = None
    error: str | None = None
    renderer: BlitRenderer | None = None

    def compute(self):
        raise NotImplementedError

    def render(self, result) -> bool | None:
        return None

    def fade(self) -> bool | None:
        return None

    def describe(self, result) -> str:
        raise NotImplementedError

    def status_kind(self, result) -> str:
        return "result"

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
        self.status.value = message_html(text, kind)
        if full is not None and self.renderer is not None:
            self.renderer.refresh(full=full)
