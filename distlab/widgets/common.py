"""Shared widget plumbing: an in-place-updating figure and the error/result panel."""

from __future__ import annotations

import html

import ipywidgets as widgets
from matplotlib.figure import Figure


def figure_canvas(figsize=(6.4, 3.6)) -> tuple[Figure, widgets.DOMWidget]:
    """A matplotlib Figure drawn by an ipympl canvas widget, without changing the global backend.

    ipympl redraws the same figure in place on draw_idle(): no flicker, no new output.
    """
    from ipympl.backend_nbagg import new_figure_manager_given_figure

    fig = Figure(figsize=figsize, layout="constrained")
    new_figure_manager_given_figure(id(fig), fig)
    canvas = fig.canvas
    canvas.toolbar_visible = False
    canvas.header_visible = False
    canvas.footer_visible = False
    canvas.resizable = False
    return fig, canvas


def message_html(text: str, kind: str = "result") -> str:
    """HTML for the status panel; kind 'error' shows distlab's message in place of a result."""
    colour = {"result": "#1f2328", "ok": "#1a7f37", "bad": "#b3261e", "error": "#b3261e"}[kind]
    prefix = "<b>Cannot compute:</b> " if kind == "error" else ""
    body = html.escape(text).replace("\n", "<br>")
    return f'<div style="color:{colour}; font-family: var(--jp-code-font-family, monospace); white-space: pre-wrap">{prefix}{body}</div>'
