"""The figure side of a lesson app: an ipympl canvas that redraws in place, its PNG frames, and the blitting
renderer that repaints only the artists a control moves (distlab.widgets.common.LessonApp draws through it)."""

from __future__ import annotations

import functools
import struct
import zlib
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

if TYPE_CHECKING:  # matplotlib is imported when a figure is made: an app drawn in the browser never needs it
    from matplotlib.figure import Figure

__all__ = [
    "figure_canvas",
    "FRAME_COMPRESSION",
    "quick_frame",
    "encode_png",
    "BlitRenderer",
    "axes_state",
    "DATA",
    "smallest_text_px",
]


def figure_canvas(figsize=(6.4, 3.6), margins=None) -> tuple[Figure, widgets.DOMWidget]:
    """A matplotlib Figure drawn by an ipympl canvas widget, without changing the global backend.

    ipympl redraws the same figure in place: no flicker, no new output. Fixed margins (not a
    layout engine) keep each redraw cheap.
    """
    from ipympl.backend_nbagg import new_figure_manager_given_figure
    from matplotlib.figure import Figure

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


def smallest_text_px(fig) -> float:
    """The smallest font, in CSS px, of the visible texts a figure holds (tick labels, titles, legends, the apps'
    drawn ticks and notes): points x the figure's own dpi / 72, as ipympl shows it (its device-pixel-ratio dpi is
    the canvas's, not the CSS size); infinity for a figure without text. framecache.FrameCache.least_scale keeps a
    narrow output from shrinking it under framecache.MIN_TEXT_PX."""
    from matplotlib.text import Text

    sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_visible() and str(t.get_text()).strip()]
    return min(sizes) * getattr(fig, "_original_dpi", fig.dpi) / 72.0 if sizes else float("inf")


#: zlib level of the PNG frames sent to the browser (encode_png): 1, the fastest that compresses; PIL's default is 6.
FRAME_COMPRESSION = 1


def quick_frame(canvas) -> bytes | None:
    """The frame ipympl sends after a draw or blit: what matplotlib's WebAgg canvas sends (get_diff_image: the
    whole picture for the first frame or when the size changed, else only the pixels that changed, transparent
    elsewhere, which the browser lays over its last frame), PNG-encoded at FRAME_COMPRESSION. The encoding
    was the largest single cost of a blitted frame."""
    import numpy as np

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
    return encode_png(frame.view(np.uint8).reshape(*frame.shape, 4))


def encode_png(rgba) -> bytes:
    """An RGBA uint8 array (height x width x 4) as PNG: every frame sent, by ipympl (quick_frame) or by the frame
    cache (distlab.widgets.framecache). The simplest valid PNG (W3C PNG specification, 3rd edition: the signature;
    IHDR, 8-bit RGBA, colour type 6, no interlace; one IDAT, the zlib stream of the rows, each after filter byte 0,
    "None"; IEND; a chunk is its data's length, type, data and the CRC-32 of type and data), zlib at
    FRAME_COMPRESSION. Pillow at the same level tries every row filter: on 31 frames of lessons 3's and 10's apps
    (640 x 240) it took 2.8 ms a frame against 1.1 ms, for 7.9 against 8.5 kB (benchmarks/RESULTS.md, session 11)."""
    import numpy as np

    pixels = np.ascontiguousarray(rgba, dtype=np.uint8)
    height, width = pixels.shape[0], pixels.shape[1]
    rows = np.zeros((height, 1 + 4 * width), dtype=np.uint8)  # column 0: each row's filter type, 0 (None)
    rows[:, 1:] = pixels.reshape(height, 4 * width)
    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    idat = zlib.compress(rows.tobytes(), FRAME_COMPRESSION)
    return PNG_SIGNATURE + _chunk(b"IHDR", header) + _chunk(b"IDAT", idat) + _chunk(b"IEND", b"")


#: The eight bytes every PNG file begins with (the PNG specification's "PNG signature").
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _chunk(kind: bytes, data: bytes) -> bytes:
    """A PNG chunk: the data's length (4 bytes, big-endian), the type, the data, the CRC-32 of type and data."""
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


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

    def paint(self, full=False) -> None:
        """What refresh(full) paints into the canvas's Agg buffer (`full` as LessonApp.render returns it: True, DATA,
        False or None), without sending a frame (ipympl sends only on draw() and blit()): how the frame cache
        (distlab.widgets.framecache) draws a neighbouring state."""
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        if full is None:
            return
        data = isinstance(full, str) and full == DATA
        if (bool(full) and not data) or self._background is None or self._axes is None:
            FigureCanvasAgg.draw(self.canvas)  # the draw_event repaints the animated artists (_on_draw)
            return
        if data and self.data_artists:
            self.canvas.restore_region(self._axes)
            self._paint(self.data_artists)
            self._background = self.canvas.copy_from_bbox(self.canvas.figure.bbox)
        else:
            self.canvas.restore_region(self._background)
        self._paint(self.artists)

    def snapshot(self) -> tuple:
        """The buffer's pixels and the cached backgrounds, for restore() after paint()."""
        return self.canvas.copy_from_bbox(self.canvas.figure.bbox), self._axes, self._background

    def restore(self, snapshot: tuple) -> None:
        """Put back the pixels and backgrounds of snapshot() (nothing is sent)."""
        pixels, self._axes, self._background = snapshot
        self.canvas.restore_region(pixels)


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
