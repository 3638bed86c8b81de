"""The browser's cache of the pictures one control change away, for the apps matplotlib draws (issue 32: every
control answered in the browser).

After each change (LessonApp.update) the kernel computes, in idle turns of its event loop (prefetch.Prefetcher, at
most one neighbour per turn), every state one change of one control away (prefetch.neighbour_jobs, the control just
moved first): the result (the app's compute_for), the picture render() and the renderer would draw from the current
one, painted into the canvas's Agg buffer WITHOUT sending it (BlitRenderer.paint: ipympl sends only on draw() and
blit()), encoded as PNG (canvas.encode_png), and the HTML the status panel (and any other text the app's render
rewrites) would show (LessonApp.status_html: our message at an invalid state, where the canvas is hidden). Then what
the paint changed is put back: every attribute it rebound on the figure's artists, on the app and on the distlab
objects the app holds (a plot helper's remembered time range, the renderer's backgrounds), and the buffer's pixels,
so nothing the student sees moves and the next real change draws as if no neighbour had been painted. Each payload
{png: bytes (a binary buffer), texts: [status HTML, ...], shown: whether the canvas is shown} goes to a small
anywidget beside the canvas (FrameCache, browser_js/framecache.js), which keys it by the labels the app's controls
show (browser_js/prefetch.js, the same cache as the browser pictures'). A change whose state is cached is drawn at
once: the PNG over the canvas (same CSS size, the device's pixel ratio) and the cached HTML in place of the panel's;
the overlay goes when the kernel says it has drawn that state (`drawn`, set at the end of update, after ipympl's
frame). A change not cached goes to the kernel, as before.

Converting an app (a LessonApp with compute_for(values) and a BlitRenderer) takes a few lines:

    class MyApp(FrameCachingApp, LessonApp):          # the mixin first
        prepared_controls = ("model", "gpus")         # what compute_for(values) reads (already there)
        drawing_controls = ("step",)                  # controls only render/describe read (optional)
        frame_texts = ("legend",)                     # HTML widgets render rewrites, through self.show_text (optional)

        def frame_neighbour(self, state, name, value):  # only where an observer moves a control (optional)
            return {**state, name: value, "tp": tp_after(...)}  # the pure function the observer calls too

and render/describe read control values only through self.values() / self.value_of(name) (never widget.value),
and HTML widgets other than `status` only through self.show_text(name, html): while a neighbour is painted these
answer for the neighbour. render must change state by rebinding attributes (matplotlib's setters do), not by editing
an array in place, for the put-back to be exact; tests/widgets/test_framecache.py checks each converted app (the
cached PNG against the frame the kernel sends when the control really moves, after real moves elsewhere). The app passes its children to super().__init__ as before (the mixin adds its FrameCache
last) and calls self.update().
"""

from __future__ import annotations

import anywidget
import ipywidgets as widgets
import numpy as np
import traitlets

from ..errors import DistlabError
from .browser import PREFETCH_MODULE, _controls_trait, module_source
from .canvas import _either, encode_png, smallest_text_px
from .filling import APP_LOCK, attempt
from .prefetch import Prefetcher, values_key, without_via

__all__ = ["FRAME_LIMIT", "FrameCache", "FrameCachingApp", "frame_pixels"]

#: Pictures the kernel remembers: none, since a picture may depend on the way there as well as on the state (a bar
#: chart keeps its time range while the bars fill it well), so each fill paints its neighbours from the current one.
#: Their results are remembered where they are slow (the apps' remembered library calls).
FRAME_LIMIT = 0


#: The app's ipympl canvas (framecache.js marks its view FITS_CLASS) scales down to a narrower output: ipympl gives the
#: canvas, its div and the figure fixed pixel sizes, so at a 900 px window a 7.6-inch figure ran 176-300 px past the
#: output, where JupyterLab cut it (review v18). The bottom canvas joins the flow at the output's width with its own
#: aspect ratio; ipympl's top canvas and the cached frame's overlay cover it. No app reads the mouse on its canvas.
FITS_CLASS = "distlab-fits"
FITS_CSS = f"""
.{FITS_CLASS}, .{FITS_CLASS} .jupyter-matplotlib-figure, .{FITS_CLASS} .jupyter-matplotlib-canvas-container {{
  max-width: 100%; min-width: 0;
}}
.{FITS_CLASS} .jupyter-matplotlib-canvas-div {{ max-width: calc(100% - 4px) !important; height: auto !important; }}
.{FITS_CLASS} .jupyter-matplotlib-canvas-div > canvas:first-child {{
  position: relative !important; max-width: 100% !important; height: auto !important;
}}
.{FITS_CLASS} .jupyter-matplotlib-canvas-div > canvas + canvas {{ width: 100% !important; height: 100% !important; }}
"""

#: The smallest size (CSS px) a kernel-drawn picture's text is shown at, as the browser pictures' (browser_js/common.js
#: MIN_TEXT_PX): scaled down to a narrower output (FITS_CSS), an ipympl canvas stops at FrameCache.least_scale, and
#: ipympl's canvas container (overflow: auto) scrolls sideways past that (at a 900 px window the 8-point ticks were
#: shown at 7 px: issue 32).
MIN_TEXT_PX = 10.0


class FrameCache(anywidget.AnyWidget):
    """Holds, in the browser, the pictures and texts of an app's states one control change away (see the module).

    `controls`: the app's control widgets, whose labels key the cache; `canvas`: the app's ipympl canvas; `text_widgets`:
    the HTML widgets a payload's texts replace (the status panel first); `drawn`: the key of the state the kernel
    drew last (the browser then removes its overlay)."""

    _esm = module_source(PREFETCH_MODULE, "framecache.js")
    _css = FITS_CSS
    controls = _controls_trait()
    canvas = traitlets.Instance(widgets.Widget, allow_none=True).tag(sync=True, **widgets.widget_serialization)
    text_widgets = traitlets.List(traitlets.Instance(widgets.Widget)).tag(sync=True, **widgets.widget_serialization)
    drawn = traitlets.Unicode("").tag(sync=True)
    #: the least share of its width the canvas is shown at: MIN_TEXT_PX / its figure's smallest text (0: not known yet)
    least_scale = traitlets.Float(0.0).tag(sync=True)


def frame_pixels(canvas) -> np.ndarray:
    """A copy of the canvas's Agg buffer (height x width x 4, RGBA)."""
    return np.asarray(canvas.get_renderer().buffer_rgba()).copy()


class FrameCachingApp:
    """The part every matplotlib-drawn app whose neighbouring pictures the browser caches shares (mixed in before
    LessonApp; see the module). `frame_cache` is its FrameCache, `prefetcher` the Prefetcher that fills it."""

    #: HTML widgets (attribute names) besides the status panel that render() rewrites (through show_text).
    frame_texts: tuple[str, ...] = ()
    prepared_controls: tuple[str, ...]
    drawing_controls: tuple[str, ...]
    _painting: dict | None = None  # the neighbour's control values while it is painted
    _captured: dict | None = None  # the texts show_text wrote meanwhile
    _painted: tuple | None = None  # (result, control values) that render() drew last in update
    _least_scale_set = False  # FrameCache.least_scale is set from the drawn figure (the first update)

    def __init__(self, children=(), **kwargs):
        self.frame_cache = FrameCache(
            controls=[getattr(self, name) for name in self.frame_controls()],
            canvas=self.renderer.canvas,  # type: ignore[attr-defined]
            text_widgets=[self.status, *(getattr(self, name) for name in self.frame_texts)],  # type: ignore[attr-defined]
        )
        self.prefetcher = Prefetcher(
            self.frame_cache, self.frame_steps, kernel_limit=FRAME_LIMIT, per_turn=1, context=self.frame_context
        )
        super().__init__((*children, self.frame_cache), **kwargs)  # type: ignore[call-arg]

    def frame_controls(self) -> tuple[str, ...]:
        """The controls (attribute names) whose states the browser caches: the prepared and the drawing ones."""
        return (*self.prepared_controls, *self.drawing_controls)

    def frame_neighbour(self, state: dict, name: str, value) -> dict:
        """The state the kernel reaches when the student sets control `name` to `value` in `state`: `state` with that
        value, and, in an app with a dependent control (lesson 5's TP degree, lesson 10's EP size), that control as the
        app's observer moves it (the app overrides this with the pure function its observer calls too)."""
        return {**state, name: value}

    def frame_context(self) -> tuple:
        """What a neighbour's pixels depend on besides its state, part of its id in the browser's cache (which keeps
        older fills' pictures): the figure's pixel geometry (ipympl sets its dpi to the device's pixel ratio), the
        full draw the renderer's cached axes come from (a picture painted before the canvas's first draw in the
        browser, or before a resize, is not reused after it) and the numbers the app's plot helpers remember along the
        way (a bar chart's time range)."""
        fig = self.fig  # type: ignore[attr-defined]
        axes = id(self.renderer._axes)  # type: ignore[attr-defined]  # a new region object at every full draw
        kept = [
            (name, sorted((k, v) for k, v in vars(obj).items() if isinstance(v, (int, float, str))))
            for name, obj in sorted(vars(self).items())
            if type(obj).__module__.startswith("distlab.plots") and hasattr(obj, "__dict__")
        ]
        return (float(fig.dpi), tuple(float(v) for v in fig.bbox.size), axes, tuple(kept))

    def frame_state(self) -> dict:
        """{name: value} of every frame control now."""
        return {name: getattr(self, name).value for name in self.frame_controls()}

    def _frame_widgets(self) -> dict:
        return {name: getattr(self, name) for name in self.frame_controls()}

    def values(self) -> dict:
        """The prepared controls' values: the neighbour's while one is painted."""
        if self._painting is not None:
            return {name: self._painting[name] for name in self.prepared_controls}
        return super().values()  # type: ignore[misc]

    def value_of(self, name: str):
        """The value of the control `name`: the neighbour's while one is painted (render and describe read it)."""
        if self._painting is not None and name in self._painting:
            return self._painting[name]
        return getattr(self, name).value

    def show_text(self, name: str, html: str) -> None:
        """Set the HTML widget `name` (one of frame_texts) to `html`; while a neighbour is painted, kept for its
        payload instead (nothing is sent)."""
        if self._captured is not None:
            self._captured[name] = html
            return
        widget = getattr(self, name)
        if widget.value != html:
            widget.value = html

    def update(self, change=None) -> None:
        """LessonApp.update, then (in a kernel) say which state is drawn and start filling its neighbours; all of it
        under filling.APP_LOCK, which every paint holds too: an update never sees a neighbour's values."""
        with APP_LOCK:
            self.prefetcher.stop()
            super().update(change)  # type: ignore[misc]
            if not self._least_scale_set:  # once its texts are drawn: how far a narrow output may shrink them
                smallest = smallest_text_px(self.renderer.canvas.figure)  # type: ignore[attr-defined]
                self.frame_cache.least_scale = min(1.0, MIN_TEXT_PX / smallest)  # 0: no text, no floor
                self._least_scale_set = True
            state = self.frame_state()
            if self.result is not None:  # type: ignore[attr-defined]
                self._painted = (self.result, state)  # type: ignore[attr-defined]
            controls = self._frame_widgets()
            self.frame_cache.drawn = values_key(controls, state)
            moved = change.get("owner") if isinstance(change, dict) else None
            self.prefetcher.start_around(controls, state, moved, self.frame_neighbour, marked=True)

    def close(self) -> None:
        if "prefetcher" in self.__dict__:  # not when __init__ refused its arguments
            self.prefetcher.stop()
        super().close()  # type: ignore[misc]

    def frame_steps(self, state: dict):
        """The Prefetcher's generator for one neighbour: the result of each state on the way there (a state two or
        more steps away: prefetch.VIA) and its own (compute_for, our error kept), one per step, then its payload."""
        state, via = without_via(state)
        passed = []
        for on_the_way in via:
            passed.append((on_the_way, attempt(self.compute_for, on_the_way)))  # type: ignore[attr-defined]
            yield
        result = attempt(self.compute_for, state)  # type: ignore[attr-defined]
        yield
        return self.frame_payload(state, result, passed)

    def frame_payload(self, state: dict, result, via=()) -> dict:
        """{png, texts, shown} of the state `state` whose result is `result` (or our error): what update() would
        show there, painted without sending anything, after rendering each (state, result) of `via` as update() would
        on the way there (a held key: a bar chart's range kept or moved at each step); the current picture is put
        back afterwards. Under filling.APP_LOCK, from the snapshot to the put-back: no update, in any thread, runs in
        between."""
        with APP_LOCK:
            return self._frame_payload(state, result, via)

    def _frame_payload(self, state: dict, result, via=()) -> dict:
        renderer = self.renderer  # type: ignore[attr-defined]
        pixels = renderer.snapshot()
        history = _snapshot(self._drawing_objects())
        self._captured = {}
        try:
            # the states on the way rendered as update() renders them (our error: the picture faded), their redraw
            # requests joined to the last one's: one paint then leaves the pixels update() leaves after them all
            way = None
            for on_the_way, passed in via:
                self._painting = on_the_way
                outcome, full, _, kind = self.drawn(_given(passed))  # type: ignore[attr-defined]
                way = _either(way, _either(full, self.fade()) if kind == "error" else full)  # type: ignore[attr-defined]
            self._painting = state
            outcome, full, text, kind = self.drawn(_given(result))  # type: ignore[attr-defined]
            png = None
            if kind != "error":
                renderer.paint(_either(way, full) if via else full)
                png = encode_png(np.asarray(renderer.canvas.get_renderer().buffer_rgba()))
            status = self.status_html(text, kind, None if kind == "error" else result)  # type: ignore[attr-defined]
            texts = [status, *(self._captured.get(name, getattr(self, name).value) for name in self.frame_texts)]
        finally:
            self._painting, self._captured = None, None
            _restore(history)
            renderer.restore(pixels)
        return {"png": png, "texts": texts, "shown": kind != "error"}

    def _drawing_objects(self) -> list:
        """What render() may change besides the pixels: every artist of the figure and the colour scale of each
        that has one (its colorizer and norm), the app's own attributes and those of the distlab objects it holds
        (the plot helpers with their remembered ranges and ticks, the renderer with its backgrounds)."""
        found: dict[int, object] = {id(self): self}
        stack = [value for value in vars(self).values() if value is not self.prefetcher]  # the fill itself
        while stack:
            obj = stack.pop()
            if isinstance(obj, (list, tuple)):
                stack.extend(obj)
            elif isinstance(obj, dict):
                stack.extend(obj.values())
            elif (
                id(obj) not in found
                and type(obj).__module__.startswith("distlab.")
                and not isinstance(obj, widgets.Widget)
                and hasattr(obj, "__dict__")
            ):
                found[id(obj)] = obj
                stack.extend(vars(obj).values())
        artists = _artists(self.fig)  # type: ignore[attr-defined]
        # an image's colour scale: set_clim edits its Normalize in place (no artist attribute is rebound)
        scales = [getattr(a, name, None) for a in artists for name in ("colorizer", "norm") if hasattr(a, "get_clim")]
        return [*found.values(), *artists, *(scale for scale in scales if scale is not None)]


def _given(result):
    """A compute() for LessonApp.drawn that returns `result`, or raises it when it is our error."""

    def computed():
        if isinstance(result, DistlabError):
            raise result
        return result

    return computed


def _snapshot(objects: list) -> list:
    """(object, a shallow copy of its attributes) for each: render() rebinds what it moves (set_x, set_text, a
    helper's remembered range), so putting back the rebound attributes puts back the state."""
    return [(obj, dict(vars(obj))) for obj in objects]


def _restore(snapshot: list) -> None:
    """Put back every attribute rebound since _snapshot, and drop those added (caches of the state painted). The
    saved values go back in one dict update, in C (a quarter of the time of comparing name by name: 0.43 against 1.8 ms
    for lesson 11's checkpoint app); no saved attribute is ever missing on the way, for a thread that reads one."""
    for obj, saved in snapshot:
        now = vars(obj)
        now.update(saved)
        if len(now) != len(saved):
            for name in [name for name in now if name not in saved]:
                del now[name]


def _artists(figure) -> list:
    """The figure and every artist under it, as Artist.findobj() lists them, walked without its per-artist match
    calls (0.6 against 1.0 ms for lesson 11's checkpoint app, every frame the cache paints)."""
    found = []
    stack = [figure]
    while stack:
        artist = stack.pop()
        found.append(artist)
        stack.extend(artist.get_children())
    return found
