"""The matplotlib figures the lesson apps draw read right (issue 31), at the app's default and at every value each
of its dropdowns and toggle buttons offers (one control moved at a time, from the default):

- no legend names a part '_nolegend_' or '_child0' (matplotlib's names for unlabelled artists: lesson 11's FSDP
  legend read '_nolegend_' six times);
- every colour a legend shows is drawn in the figure (lesson 4's legend showed colours the grid did not draw);
- no text leaves the figure, and no two texts the app places (annotations, titles, legends) overlap.

The apps are found through the lessons (distlab.lessons: each lesson's apps); an app that draws in the browser
(no matplotlib figure) is another test's (tests/widgets/test_widgets_browser.py)."""

from __future__ import annotations

import re

import ipywidgets as widgets
import matplotlib.colors as mcolors
import numpy as np
import pytest
from matplotlib.collections import Collection
from matplotlib.image import AxesImage
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.transforms import Bbox
from matplotlib.patches import Patch, Rectangle
from matplotlib.text import Text

from test_series_colours import DISTINCT, colour_distance
from lesson_apps import lesson_apps as _apps
from distlab.widgets.framecache import FrameCachingApp
from lesson_apps import walk as _walk


def _choices(app):
    """(control, value) for every option of every dropdown and toggle button, the default's excluded."""
    for w in _walk(app):
        if isinstance(w, (widgets.Dropdown, widgets.ToggleButtons)) and not w.disabled:
            for value in [v[1] if isinstance(v, tuple) else v for v in w.options]:
                if value != w.value:
                    yield w, value


def _rgba(colour) -> tuple | None:
    try:
        rgba = mcolors.to_rgba(colour)
    except (TypeError, ValueError):
        return None
    return None if rgba[3] == 0 else tuple(round(c, 3) for c in rgba[:3])


def _drawn_colours(fig) -> set:
    colours: set = set()
    for ax in fig.axes:
        for artist in ax.get_children():
            if not artist.get_visible():
                continue
            if isinstance(artist, Patch):
                colours |= {_rgba(artist.get_facecolor()), _rgba(artist.get_edgecolor())}
            elif isinstance(artist, Line2D):
                colours.add(_rgba(artist.get_color()))
            elif isinstance(artist, Collection):
                for c in [*np.atleast_2d(artist.get_facecolor()), *np.atleast_2d(artist.get_edgecolor())]:
                    colours.add(_rgba(c) if len(c) else None)
            elif hasattr(artist, "pixels"):  # distlab's timeline grid: one RGBA image of its palette
                colours |= _image_colours(artist.pixels(400, 80))
            elif isinstance(artist, AxesImage):
                data = artist.get_array()
                rgba = data if data is not None and data.ndim == 3 else artist.to_rgba(data, bytes=True)
                colours |= _image_colours(np.asarray(rgba))
    return colours - {None}


def _image_colours(rgba: np.ndarray) -> set:
    rgba = np.asarray(rgba)
    if rgba.dtype != np.uint8:
        rgba = np.round(np.clip(rgba, 0, 1) * 255).astype(np.uint8)
    flat = np.unique(rgba.reshape(-1, rgba.shape[-1]), axis=0)
    return {tuple(round(c / 255, 3) for c in px[:3]) for px in flat if len(px) < 4 or px[3] > 0}


#: an HTML legend's entries: a swatch (background or border colour) and the label after it
SWATCH = re.compile(r"(?:background|border:[\d.]+px solid)\s*:?\s*(#[0-9a-fA-F]{6})[^>]*></span>([^<]*)")


def html_legend_problems(app, drawn: set) -> list[str]:
    """The swatches of the app's HTML legends (widgets beside the canvas) whose colour the figure does not draw."""
    found = []
    for w in _walk(app):
        if isinstance(w, widgets.HTML) and w is not getattr(app, "status", None):
            for colour, label in SWATCH.findall(w.value):
                if _rgba(colour) not in drawn:
                    found.append(f"legend colour of {label.strip()!r} {colour} is not drawn")
                found += ascii_math([label.strip()])
    return found


#: the shape an HTML swatch shows (plots._style._SWATCH_SIZE), read from its style
SWATCH_SHAPE = re.compile(r'<span style="display:inline-block;([^"]*)"></span>([^<]*)')


def _swatch_shape(style: str) -> str:
    if "clip-path" in style:
        return "star"
    if "border-radius" in style:
        return "dot"
    if "mask:" in style:
        return "dashed"
    return "line" if "height:3px" in style else "box"


def _drawn_shapes(fig) -> set:
    """(colour, shape) of what the figure draws: a patch or an image is a box, a Line2D a line (solid) or a dashed
    line (dashed, dotted: review v16 found lesson 11's and 11b's dashed lines keyed with solid ones) and its marker
    ('o' and '.' a dot, '*' a star, 's' a box); a scatter's collection any marker shape."""
    markers = {"o": "dot", ".": "dot", "*": "star", "s": "box"}
    shapes: set = set()
    for ax in fig.axes:
        for artist in ax.get_children():
            if not artist.get_visible():
                continue
            if isinstance(artist, Line2D):
                colour = _rgba(artist.get_color())
                if artist.get_linestyle() in ("-", "solid"):
                    shapes.add((colour, "line"))
                elif artist.get_linestyle() not in ("None", "", " "):
                    shapes.add((colour, "dashed"))
                if artist.get_marker() in markers:
                    shapes.add((colour, markers[artist.get_marker()]))
            elif isinstance(artist, Collection):
                for c in np.atleast_2d(artist.get_facecolor()):
                    if len(c):
                        shapes |= {(_rgba(c), shape) for shape in ("dot", "star", "box", "line")}
    return shapes


def html_legend_shape_problems(app, fig) -> list[str]:
    """The HTML swatches whose shape the figure does not draw in their colour (lesson 8's bucket app keyed its
    green star, the best count, with a dot: review of session 13). Boxes are left to the colour check (bars, images
    and filled areas all read as a box)."""
    drawn = _drawn_shapes(fig)
    found = []
    for w in _walk(app):
        if isinstance(w, widgets.HTML) and w is not getattr(app, "status", None):
            for style, label in SWATCH_SHAPE.findall(w.value):
                colour = SWATCH.search(style + "></span>")
                shape = _swatch_shape(style)
                if colour is None or shape == "box":
                    continue
                if (_rgba(colour[1]), shape) not in drawn:
                    found.append(
                        f"legend key of {label.strip()!r} is a {shape}, and the figure draws no {shape} in its colour"
                    )
    return found


def _legend_entries(legend: Legend):
    for handle, text in zip(legend.legend_handles, legend.get_texts()):
        if isinstance(handle, Patch):
            colour = _rgba(handle.get_facecolor())
        elif isinstance(handle, Line2D):
            colour = _rgba(handle.get_color())
        elif isinstance(handle, Collection) and len(handle.get_facecolor()):
            colour = _rgba(handle.get_facecolor()[0])
        else:
            colour = None
        yield text.get_text(), colour


def _legends(fig):
    return [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend() is not None)]


def _placed_texts(fig):
    """The texts the app places itself: annotations and titles of the axes, the figure's texts, legend frames."""
    for ax in fig.axes:
        for t in [*ax.texts, ax.title, ax._left_title, ax._right_title]:
            if t.get_visible() and t.get_text().strip():
                yield t
    for t in fig.texts:
        if t.get_visible() and t.get_text().strip():
            yield t


#: a tick label that is a bare number: 3, 0.5, -2, 1,000, 10^-5 as matplotlib's mathtext writes it ($\\mathdefault{10^{-5}}$)
BARE_NUMBER = re.compile(r"[-−+]?[\d.,]+|\$\\mathdefault\{[-−\d.^{}]+\}\$")


def unitless_axes(fig) -> list[str]:
    """Axes whose tick labels are bare numbers with no axis label to say what they count (lesson 10's imbalance app
    drew its log time axis as 10^-5 ... 10^1, no 's' anywhere, review v14). Tick labels that carry the unit
    ('1 ms', '25%') or an axis label are enough. For figures that carry their own text (the lessons' static ones):
    an app may name its axes' units in the HTML legend beside the canvas (lesson 11b's 'x: interval (min, log)')."""
    found = []
    for ax in fig.axes:
        if not ax.axison:
            continue  # a diagram (lesson 2's ring states, lesson 6's grid): no axes drawn
        for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            if not axis.get_visible() or axis.label.get_text().strip():
                continue
            texts = [t.get_text() for t in axis.get_ticklabels() if t.get_visible() and t.get_text().strip()]
            if texts and all(BARE_NUMBER.fullmatch(t) for t in texts):
                found.append(f"{name} axis: bare numbers {texts[:3]} with no unit")
    return found


#: an axis label naming a unit of bytes or time in parentheses: "(bytes)", "(s)", "(ms)", "(GB = 10⁹ bytes)"
UNIT_IN_LABEL = re.compile(r"\((?:bytes|B|[kMGTP]i?B|s|ms|µs|us|ns)(?:\)| =)")
#: matplotlib's log tick label: $\mathdefault{10^{-3}}$
POWER_OF_TEN = re.compile(r"10\^\{")


def powers_of_units(fig) -> list[str]:
    """A log axis of bytes or seconds labelled 10^3 ... 10^11 where '1 kB' ... '100 GB' would do (lesson 2's cost
    against message size read 'message size M (bytes)' under 10^3 ... 10^11 and 'time (s)' beside 10^-6 ... 10^0,
    while lesson 8's bucket figure wrote '100 µs', '1 ms', '1 s'; review v18)."""
    fig.draw_without_rendering()  # the tick labels exist once drawn
    found = []
    for ax in fig.axes:
        for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            label = axis.label.get_text()
            texts = [t.get_text() for t in axis.get_ticklabels() if t.get_visible()]
            if axis.get_scale() == "log" and UNIT_IN_LABEL.search(label) and any(POWER_OF_TEN.search(t) for t in texts):
                found.append(f"{name} axis {label!r}: powers of ten {texts[:2]} where units would do")
    return found


def legend_over_bars(fig, renderer) -> list[str]:
    """A legend drawn over a bar of its own axes (lesson 11b's context figure put 'attention compute' and 'exposed
    communication' on top of the ring bars, review v14). Bars only: a line's box is its whole extent, so a legend
    in a line chart's empty corner would count."""
    found = []
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is None or not legend.get_visible():
            continue
        box = legend.get_window_extent(renderer)
        for patch in ax.patches:
            if isinstance(patch, Rectangle) and patch.get_visible() and patch.get_width() and patch.get_height():
                bar = patch.get_window_extent(renderer)
                if bar.width > 1 and bar.height > 1 and box.shrunk(0.95, 0.9).overlaps(bar):
                    found.append(f"the legend {[t.get_text() for t in legend.get_texts()][:2]} runs over a bar")
                    break
    return found


def unlabelled_empty_bars(fig, renderer) -> list[str]:
    """A bar chart's category with no visible bar and no text over it (lesson 11's schedules figure drew ZB-V's zero
    idle as nothing at all, review v17: a student reads a missing bar as a missing value). For each axes' bar
    containers (ax.containers; vertical bars), a category x whose bars all have zero height must have a text (a bar
    label, an annotation) within its width. Categorical charts only (a tick label that is a name, not a number, at
    the bar): an empty bin of a histogram or a per-GPU count is read off its axis."""
    from matplotlib.container import BarContainer

    found = []
    for ax in fig.axes:
        names = {
            round(tick.get_position()[0], 9)
            for tick in ax.get_xticklabels()
            if re.search(r"[A-Za-z]", tick.get_text()) and not re.fullmatch(r"[\d.,\s]*[kMGT]?[B]?", tick.get_text())
        }
        columns: dict = {}
        for container in ax.containers:
            if isinstance(container, BarContainer) and getattr(container, "orientation", "vertical") == "vertical":
                for patch in container.patches:
                    key = round(patch.get_x() + patch.get_width() / 2, 9)
                    if key in names:
                        columns.setdefault(key, []).append(patch)
        texts = [t.get_window_extent(renderer) for t in ax.texts if t.get_visible() and t.get_text().strip()]
        for patches in columns.values():
            if any(p.get_visible() and p.get_height() != 0 for p in patches):
                continue
            bar = patches[0].get_window_extent(renderer)
            if not any(box.x1 >= bar.x0 - 1 and box.x0 <= bar.x1 + 1 for box in texts):
                found.append(f"an empty bar at x = {patches[0].get_x() + patches[0].get_width() / 2:g} has no label")
    return found


def _segment_meets_box(p, q, box) -> bool:
    """Whether the segment p-q (display coordinates) passes through the box (clipped parametrically)."""
    (x0, y0), (x1, y1) = p, q
    lo, hi = 0.0, 1.0
    for d, a, b0, b1 in ((x1 - x0, x0, box.x0, box.x1), (y1 - y0, y0, box.y0, box.y1)):
        if d == 0:
            if not b0 <= a <= b1:
                return False
            continue
        t0, t1 = sorted(((b0 - a) / d, (b1 - a) / d))
        lo, hi = max(lo, t0), min(hi, t1)
        if lo > hi:
            return False
    return True


def dashed_lines_over_texts(fig, renderer) -> list[str]:
    """A text of an axes crossed by a dashed line of that axes (lesson 4's schedules: the ideal end's dashed line ran
    through the labels 'B3', 'B4', 'B5', review v14), unless the text sits above the line on an opaque patch of its
    own (a bbox), which hides the line under it. A frameless legend's texts count too (lesson 8's ring-attention
    legend sat over the NVLink crossover's dotted line, review v16): nothing hides the line under them."""
    found = []
    for ax in fig.axes:
        legend = ax.get_legend()
        legend_texts = (
            list(legend.get_texts())
            if legend is not None and legend.get_visible() and not legend.get_frame_on()
            else []
        )
        lines = [
            line
            for line in ax.get_lines()
            if line.get_visible()
            and line.get_linestyle() not in ("-", "None", "", " ", "solid")
            and len(line.get_xydata())
        ]
        for t in [*ax.texts, *legend_texts]:
            if not (t.get_visible() and t.get_text().strip()):
                continue
            patch = t.get_bbox_patch()
            # the text's own box (an annotation's arrow left out), less a margin of its empty edges: 5% each side,
            # 15% above and below (a label set on a line, va="bottom", touches it with its box, not its glyphs)
            whole = Text.get_window_extent(t, renderer)
            box = Bbox.from_extents(
                whole.x0 + 0.05 * whole.width,
                whole.y0 + 0.15 * whole.height,
                whole.x1 - 0.05 * whole.width,
                whole.y1 - 0.15 * whole.height,
            )
            for line in lines:
                hidden = patch is not None and patch.get_facecolor()[3] == 1 and t.get_zorder() > line.get_zorder()
                points = line.get_transform().transform(line.get_xydata())
                if not hidden and any(_segment_meets_box(a, b, box) for a, b in zip(points[:-1], points[1:])):
                    found.append(f"text {t.get_text()!r} is crossed by a dashed line")
                    break
    return found


#: decimal (kB = 1000 B, what distlab.units.format_bytes prints) and binary (KiB = 1024 B) byte units
DECIMAL_BYTES = re.compile(r"(?<![\w])[kMGTP]B(?![\w])")
BINARY_BYTES = re.compile(r"(?<![\w])[KMGTP]iB(?![\w])")


def _all_texts(fig) -> list[str]:
    texts = [t.get_text() for t in fig.findobj(Text) if t.get_visible()]
    for ax in fig.axes:
        texts += [t.get_text() for t in [*ax.get_xticklabels(), *ax.get_yticklabels()]]
    return texts


def mixed_byte_units(fig) -> list[str]:
    """A figure that writes bytes in both decimal and binary units (lesson 9's axis said '1 KiB' beside a table's
    '1.02 kB' for the same message): the kit prints decimal bytes (distlab.units: GB = 10**9 B); a binary unit
    only where it is said what it is beside the decimal one, as the GPUs' capacities are ('CUDA sees 79.11 GiB')."""
    texts = [t for t in _all_texts(fig) if "CUDA sees" not in t and "visible to CUDA" not in t]
    decimal = sorted({m for t in texts for m in DECIMAL_BYTES.findall(t)})
    binary = sorted({m for t in texts for m in BINARY_BYTES.findall(t)})
    return [f"bytes in decimal {decimal} and binary {binary} units in one figure"] if decimal and binary else []


#: the smallest a legend's marker, patch or line may be drawn (px, at the figure's dpi): smaller reads as no key
MIN_HANDLE_PX = 3.0


def tiny_legend_handles(fig, renderer) -> list[str]:
    """Legend entries whose key is drawn too small to see: a patch under MIN_HANDLE_PX on a side, a line thinner
    than 1 px with no marker of MIN_HANDLE_PX, a scatter marker under MIN_HANDLE_PX."""
    found = []
    points = fig.dpi / 72.0
    for legend in _legends(fig):
        if not legend.get_visible():
            continue
        for handle, text in zip(legend.legend_handles, legend.get_texts()):
            label = text.get_text()
            if isinstance(handle, Patch):
                box = handle.get_window_extent(renderer)
                size = min(box.width, box.height)
            elif isinstance(handle, Line2D):
                line = handle.get_linewidth() * points if handle.get_linestyle() not in ("None", "", " ") else 0
                marker = handle.get_markersize() * points if handle.get_marker() not in (None, "None", "", " ") else 0
                size = max(marker, MIN_HANDLE_PX if line >= 1.0 else 0.0)
            elif isinstance(handle, Collection) and len(handle.get_sizes()):
                size = float(np.sqrt(np.max(handle.get_sizes()))) * points
            else:
                continue
            if size < MIN_HANDLE_PX:
                found.append(f"legend key of {label!r} is drawn {size:.1f} px (under {MIN_HANDLE_PX:g} px)")
    return found


def _legend_cues(handle) -> tuple | None:
    """(colour as 0-255 RGB, the handle's other cues: kind, marker, line style, hatch) of one legend key."""
    if isinstance(handle, Patch) and mcolors.to_rgba(handle.get_facecolor())[3] == 0:
        # an outline's key (lesson 6's grid: the picked GPU's groups): told apart by its edge, its width and dashes
        colour = handle.get_edgecolor()
        others = ("outline", f"{handle.get_linewidth():g}", str(handle.get_linestyle()), handle.get_hatch() or "")
    elif isinstance(handle, Patch):
        colour, others = handle.get_facecolor(), ("patch", handle.get_hatch() or "")
    elif isinstance(handle, Line2D):
        colour, others = handle.get_color(), ("line", str(handle.get_marker()), str(handle.get_linestyle()))
    elif isinstance(handle, Collection) and len(handle.get_facecolor()):
        colour, others = handle.get_facecolor()[0], ("points", handle.get_hatch() or "")
    else:
        return None
    rgba = mcolors.to_rgba(colour, handle.get_alpha())
    rgb = tuple(round(255 * (rgba[3] * c + 1 - rgba[3])) for c in rgba[:3])  # as drawn over the white figure
    return rgb, others


def confusable_legend_entries(fig) -> list[str]:
    """Two entries of one legend whose keys differ in nothing but a colour too close to tell (CIELAB distance under
    test_series_colours.DISTINCT): a reader cannot say which series is which (the grid's 28 pastel TP groups)."""
    found = []
    for legend in _legends(fig):
        entries = [(t.get_text(), _legend_cues(h)) for h, t in zip(legend.legend_handles, legend.get_texts())]
        entries = [(label, cues) for label, cues in entries if cues is not None]
        for k, (label, (colour, others)) in enumerate(entries):
            for other_label, (other_colour, other_others) in entries[:k]:
                if others == other_others and colour_distance(colour, other_colour) < DISTINCT:
                    found.append(f"legend entries {other_label!r} and {label!r} look alike (colour and {others})")
    return found


#: a power or a root written as code, not as the reader's notation: 10^9, x^2, sqrt(2 delta M) (a figure's text; matplotlib's
#: own mathtext, '$...$', is drawn as notation and left out)
ASCII_MATH = re.compile(r"\w\^[-\w{(]|\bsqrt\(")


def ascii_math(texts) -> list[str]:
    """Texts a reader sees that write a power or a root as code: lessons 1, 4 and 7 labelled their axes
    'GB = 10^9 bytes' and lesson 11b's checkpoint app keyed Young's interval 'sqrt(2 delta M)' (review v16)."""
    return [f"text {t!r} writes math as code" for t in texts if "$" not in t and ASCII_MATH.search(t)]


def _saturated(colour) -> bool:
    """A colour that reads as a series' colour, not a neutral reference (black, grey)."""
    r, g, b, _ = mcolors.to_rgba(colour)
    return max(r, g, b) - min(r, g, b) > 0.15


def _unexplained_marker_line(line, keys, text_colours) -> list[str]:
    """A neutral (black, grey) vertical line drawn at an event across the axes, in a figure with a legend, that no
    key of its style and no text of its colour names: lesson 11's FSDP stream figures drew the step's end (solid
    black) and the compute alone (dashed grey) unnamed, while the same marks in the app's HTML legend were "step
    ends" and "compute alone" (review v19). Other neutral lines (a y = x diagonal, a gridline) stay references the
    axes explain."""
    x = np.asarray(line.get_xdata(), dtype=float)
    if len(x) != 2 or x[0] != x[1] or line.get_transform().contains_branch_seperately(line.axes.transData)[1]:
        return []  # not an axvline: a curve, a diagonal, or a segment in data coordinates
    style = _line_style(line.get_linestyle())
    if _rgba(line.get_color()) in text_colours or any(
        s == style and (c is None or c == _rgba(line.get_color())) for c, s, _ in keys
    ):
        return []
    return [f"a neutral {style} line at x = {x[0]:g} that no legend key or text names"]


def unexplained_lines(fig) -> list[str]:
    """A coloured line (or marker) in a figure that has a legend, which no legend key and no text of its colour
    explains: lesson 8's ring-attention figure drew each fabric's crossover as a dotted line in the fabric's colour,
    and its legend named only the solid curves, so a reader could not tell what the dotted lines mark (review v16).
    A key explains a line when it has the line's line style (or marker) and its colour, or a neutral colour (one
    grey dotted key for the dotted lines of every series); a text in the line's colour (an annotation beside it)
    explains it too. Neutral lines (black, grey) are references the axes' labels explain."""
    legends = [lg for lg in _legends(fig) if lg.get_visible()]
    if not legends:
        return []  # an app's figure: its HTML legend beside the canvas names the marks (html_legend_problems)
    keys = set()
    for legend in legends:
        for handle in legend.legend_handles:
            if isinstance(handle, Line2D):
                colour = _rgba(handle.get_color())
                colour = colour if _saturated(handle.get_color()) else None  # a neutral key: any colour
                keys.add((colour, _line_style(handle.get_linestyle()), str(handle.get_marker())))
    found = []
    for ax in fig.axes:
        text_colours = {_rgba(t.get_color()) for t in ax.texts if t.get_visible() and t.get_text().strip()}
        for line in ax.lines:
            if not line.get_visible() or len(line.get_xdata()) == 0:
                continue
            if not _saturated(line.get_color()):
                found += _unexplained_marker_line(line, keys, text_colours)
                continue
            colour = _rgba(line.get_color())
            if colour in text_colours:
                continue
            style, marker = _line_style(line.get_linestyle()), str(line.get_marker())
            drawn_style = style if style != "None" else None
            drawn_marker = marker if marker not in ("None", "", " ") else None
            if not any(
                c in (colour, None) and ((drawn_style and s == drawn_style) or (drawn_marker and m == drawn_marker))
                for c, s, m in keys
            ):
                found.append(f"a {style} line in {colour} that no legend key or text explains")
    return found


def _line_style(style) -> str:
    """matplotlib's line style as one name: ':' and 'dotted' alike."""
    return {"-": "solid", "--": "dashed", ":": "dotted", "-.": "dashdot", "": "None", " ": "None"}.get(
        str(style), str(style)
    )


def overlapping_tick_labels(fig, renderer) -> list[str]:
    """Tick labels of one axis that overprint each other (review look24: lesson 8b's ladder numbered its rungs only;
    named, long names must not collide)."""
    found = []
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            labels = [t for t in axis.get_ticklabels() if t.get_visible() and t.get_text().strip()]
            lo, hi = sorted(axis.get_view_interval())
            labels = [t for t in labels if lo - 1e-9 <= (t.get_position()[0 if axis is ax.xaxis else 1]) <= hi + 1e-9]
            boxes = [t.get_window_extent(renderer) for t in labels]
            for i, (a, box_a) in enumerate(zip(labels, boxes)):
                for b, box_b in zip(labels[i + 1 :], boxes[i + 1 :]):
                    if box_a.width and box_b.width and box_a.shrunk(0.95, 0.8).overlaps(box_b.shrunk(0.95, 0.8)):
                        found.append(f"tick labels {a.get_text()!r} and {b.get_text()!r} overlap")
    return found


def problems(fig) -> list[str]:
    found = []
    renderer = fig._get_renderer()
    fig.draw_without_rendering()
    found += overlapping_tick_labels(fig, renderer)
    found += mixed_byte_units(fig) + tiny_legend_handles(fig, renderer) + confusable_legend_entries(fig)
    found += unexplained_lines(fig) + ascii_math(_all_texts(fig))
    frame = fig.bbox
    drawn = _drawn_colours(fig)
    for legend in _legends(fig):
        if not legend.get_visible():
            continue
        for label, colour in _legend_entries(legend):
            if label.startswith("_"):
                found.append(f"legend label {label!r}")
            elif colour is not None and colour not in drawn:
                found.append(f"legend colour of {label!r} {colour} is not drawn")
        box = legend.get_window_extent(renderer)
        if box.x0 < frame.x0 - 1 or box.x1 > frame.x1 + 1 or box.y0 < frame.y0 - 1 or box.y1 > frame.y1 + 1:
            found.append("a legend leaves the figure")
    texts: list[Text] = list(_placed_texts(fig))
    boxes = [t.get_window_extent(renderer) for t in texts]
    for t, box in zip(texts, boxes):
        if box.x0 < frame.x0 - 1 or box.x1 > frame.x1 + 1 or box.y0 < frame.y0 - 1 or box.y1 > frame.y1 + 1:
            found.append(f"text {t.get_text()!r} leaves the figure")
    found += legend_over_bars(fig, renderer) + unlabelled_empty_bars(fig, renderer)
    found += dashed_lines_over_texts(fig, renderer)
    legend_boxes = [lg.get_window_extent(renderer) for lg in _legends(fig) if lg.get_visible()]
    for i, (a, box_a) in enumerate(zip(texts, boxes)):
        for b, box_b in zip(texts[i + 1 :], boxes[i + 1 :]):
            if box_a.width and box_b.width and box_a.shrunk(0.95, 0.8).overlaps(box_b.shrunk(0.95, 0.8)):
                found.append(f"texts {a.get_text()!r} and {b.get_text()!r} overlap")
        for box_l in legend_boxes:
            if box_a.width and box_a.shrunk(0.95, 0.8).overlaps(box_l):
                found.append(f"text {a.get_text()!r} runs over a legend")
    return found


def _drawn_by_matplotlib(app_class) -> bool:
    import matplotlib.pyplot as plt

    app = app_class()
    fig = getattr(app, "fig", None)
    if fig is not None:
        plt.close(fig)
    return fig is not None


#: the apps drawn by matplotlib in the kernel (each caches its frames in the browser): chosen by class, not by building
#: every app at collection, which each xdist worker repeats (1.9 s); the next test holds the two choices equal
APPS = [app for app in _apps() if issubclass(app, FrameCachingApp)]


def test_the_apps_checked_are_every_app_drawn_by_matplotlib():
    assert [a.__name__ for a in APPS] == [a.__name__ for a in _apps() if _drawn_by_matplotlib(a)]


def test_the_figures_of_lessons_8_8b_10_11_are_checked():
    names = {a.__name__ for a in APPS}
    assert {"BucketApp", "ProductionStepApp", "AllToAllApp", "FsdpApp", "ScheduleApp"} <= names, names


@pytest.mark.slow  # every app's figure at every offered value: outside the fast tier (README)
@pytest.mark.parametrize("app_class", APPS, ids=lambda a: f"{a.__module__.rsplit('.', 1)[1]}.{a.__name__}")
def test_figures_read_right_at_every_offered_value(app_class):
    import matplotlib.pyplot as plt

    app = app_class()
    fig = app.fig
    try:

        def check() -> list[str]:
            return problems(fig) + html_legend_problems(app, _drawn_colours(fig)) + html_legend_shape_problems(app, fig)

        found = [f"default: {p}" for p in check()] if app.error is None else []
        for control, value in list(_choices(app)):
            default = control.value
            control.value = value
            if app.error is None:
                found += [f"{control.description} = {value!r}: {p}" for p in check()]
            control.value = default
        assert not found, f"{app_class.__name__}: " + "; ".join(dict.fromkeys(found))
    finally:
        plt.close(fig)


def test_the_checks_find_each_defect():
    # a figure with each defect the issue found, made by hand: a legend handle whose label is matplotlib's
    # '_nolegend_' (lesson 11's), a legend colour no bar has (lesson 4's), two annotations on top of each other
    # (lesson 7's 'usable: 78 GB' on 'compute 7.02 s') and one outside the figure
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4, 3))
    ax = fig.add_subplot()
    (bar,) = ax.bar([0], [1], color="#0072B2")
    ax.legend(handles=[bar, Patch(color="#D55E00", label="weights")], loc="upper right")
    ax.text(0.1, 0.5, "compute 7.02 s", transform=ax.transAxes)
    ax.text(0.12, 0.5, "usable: 78 GB", transform=ax.transAxes)
    ax.text(1.5, 0.5, "off the edge", transform=ax.transAxes)
    found = problems(fig)
    assert any("'_nolegend_'" in p or "'_child" in p for p in found), found
    assert any("'weights'" in p and "not drawn" in p for p in found), found
    assert any("overlap" in p and "compute 7.02 s" in p for p in found), found
    assert any("'off the edge' leaves the figure" in p for p in found), found
    assert any("runs over a bar" in p for p in found), found  # the one bar fills the axes: the legend sits on it
    ax.plot([0.2, 0.2], [0, 1], linestyle="--", transform=ax.transAxes)  # through 'compute 7.02 s' (no patch)
    assert any("'compute 7.02 s' is crossed by a dashed line" in p for p in problems(fig)), problems(fig)
    ax.set_xticks([0], ["1 KiB"])
    ax.set_yticks([1], ["1.02 kB"])
    assert any("and binary ['KiB'] units" in p for p in problems(fig)), problems(fig)
    ax.clear()
    (dot,) = ax.plot([0], [1], "o", markersize=0.5, label="measured")
    ax.legend(handles=[dot, Patch(color="#D55E00", label="weights", linewidth=0)], handlelength=0.05, loc="upper right")
    assert any("legend key of 'measured'" in p for p in problems(fig)), problems(fig)
    assert any("legend key of 'weights'" in p for p in problems(fig)), problems(fig)
    ax.clear()
    ax.bar([0], [1], color="#aec7e8", label="group 0")
    ax.bar([1], [1], color="#9ecae1", label="group 15")  # the old grid's near twins, no other cue
    ax.legend(loc="upper left", bbox_to_anchor=(1, 1))
    assert any("'group 0' and 'group 15' look alike" in p for p in problems(fig)), problems(fig)
    ax.clear()
    ax.bar([0], [1], color="#0072B2", label="weights")
    ax.set_xlim(-0.5, 3)
    ax.legend(loc="upper right")
    assert problems(fig) == []


def test_the_math_check_finds_a_power_or_a_root_written_as_code():
    assert ascii_math(["memory per GPU (GB = 10^9 bytes)", "Young's sqrt(2 delta M)", "R^2 of log time"]) == [
        "text 'memory per GPU (GB = 10^9 bytes)' writes math as code",
        'text "Young\'s sqrt(2 delta M)" writes math as code',
        "text 'R^2 of log time' writes math as code",
    ]
    assert ascii_math(["memory per GPU (GB = 10⁹ bytes)", "Young's √(2δM)", "$10^{3}$", "x^ y", "a ^ b"]) == []


def test_the_checks_find_an_unexplained_line_and_a_line_through_a_legend():
    # lesson 8's ring-attention figure (review v16): each fabric's crossover a dotted line in the fabric's colour that
    # no legend key named, and the legend, frameless in the upper left, crossed by the NVLink crossover's line;
    # lesson 11b's goodput figure: a dot on each curve (Daly's best interval) that no key named
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5, 3))
    ax = fig.add_subplot()
    ax.plot([1, 10], [1, 10], color="#4c72b0", label="K/V transfer, nvlink4")
    ax.plot([5], [5], "o", color="#4c72b0")
    ax.axvline(3, color="#4c72b0", linestyle=":")
    ax.legend(loc="upper left", frameon=False)
    found = problems(fig)
    assert any("a dotted line" in p and "no legend key" in p for p in found), found
    assert any("a None line" in p for p in found), found  # the dot: a marker, no line
    assert any("'K/V transfer, nvlink4' is crossed by a dashed line" in p for p in found), found
    # one neutral key per mark explains the marks of every colour; a legend below the axes is crossed by nothing
    ax.plot([], [], color="#57606a", linestyle=":", label="crossover")
    ax.plot([], [], "o", color="#57606a", label="the best")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=3, frameon=False)
    fig.set_layout_engine("constrained")
    assert problems(fig) == [], problems(fig)
    # lesson 11's FSDP stream figure: the step's end a black line, the compute alone a dashed grey one, neither named
    ax.axvline(8, color="black", lw=1.5)
    ax.axvline(7, color="#57606a", linestyle="--")
    found = problems(fig)
    assert any("neutral solid line at x = 8" in p for p in found), found
    assert any("neutral dashed line at x = 7" in p for p in found), found
    ax.plot([], [], color="black", label="step ends")
    ax.plot([], [], color="#57606a", linestyle="--", label="compute alone")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=3, frameon=False)
    assert problems(fig) == [], problems(fig)


def test_the_html_legends_are_read():
    # the apps' legends are HTML beside the canvas: the swatch pattern must find their entries, or the colour
    # check above would pass on nothing (ProductionStepApp lists its drawn parts, ScheduleApp F, B, W and idle)
    import matplotlib.pyplot as plt

    read = {}
    for app_class in APPS:
        app = app_class()
        try:
            read[app_class.__name__] = [
                label.strip() for w in _walk(app) if isinstance(w, widgets.HTML) for _, label in SWATCH.findall(w.value)
            ]
        finally:
            plt.close(app.fig)
    assert read["ScheduleApp"] == ["forward (F)", "backward (B)", "weight gradient (W)", "idle (bubble)"], read
    assert "compute" in read["ProductionStepApp"] and "EP all-to-all" not in read["ProductionStepApp"], read
    assert sum(map(len, read.values())) >= 30, read


def _decimals(number: float) -> int:
    """Decimals a step needs: 10.0 -> 0, 0.5 -> 1, 0.05 -> 2."""
    text = repr(float(number))
    return 0 if "e" in text else len(text.split(".")[1].rstrip("0"))


def slider_readout_problems(app) -> list[str]:
    """The float sliders whose readout shows more decimals than their step can make ('300.00' ms for a slider in
    steps of 10 ms, review v14: lessons 3, 4, 8b and 11b): a readout in 'f' or '%' may show the step's decimals."""
    found = []
    for w in _walk(app):
        if isinstance(w, widgets.FloatSlider):
            shown = re.fullmatch(r"\.(\d+)([f%])", w.readout_format or "")
            if shown is None:
                continue  # a 'g' or 'e' format shows what the value needs
            decimals = int(shown[1]) + (2 if shown[2] == "%" else 0)
            if decimals > _decimals(w.step):
                found.append(f"{w.description!r}: readout {w.readout_format!r} for steps of {w.step:g}")
    return found


@pytest.mark.parametrize("app_class", _apps(), ids=lambda a: f"{a.__module__.rsplit('.', 1)[1]}.{a.__name__}")
def test_no_slider_reads_out_more_decimals_than_its_step(app_class):
    import matplotlib.pyplot as plt

    app = app_class()
    try:
        assert not slider_readout_problems(app)
    finally:
        if getattr(app, "fig", None) is not None:
            plt.close(app.fig)


def test_the_readout_check_finds_a_needless_decimal():
    box = widgets.VBox([widgets.FloatSlider(step=10.0, description="backward (ms)"), widgets.FloatSlider(step=0.25)])
    assert slider_readout_problems(box) == ["'backward (ms)': readout '.2f' for steps of 10"]


def test_the_shape_check_finds_a_dot_for_a_star():
    # lesson 8's bucket app drew the best count as a green '*' and keyed it with a dot
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    from distlab.plots._style import swatch

    fig = Figure()
    ax = fig.add_subplot()
    ax.plot([1, 2], [1, 2], color="#D55E00")
    ax.plot([1], [1], "*", color="#009E73")
    box = widgets.VBox([widgets.HTML(swatch("#009E73", "best", "dot") + swatch("#D55E00", "exposed", "line"))])
    assert html_legend_shape_problems(box, fig) == [
        "legend key of 'best' is a dot, and the figure draws no dot in its colour"
    ]
    box.children[0].value = swatch("#009E73", "best", "star") + swatch("#D55E00", "exposed", "line")
    assert html_legend_shape_problems(box, fig) == []


def test_the_shape_check_finds_a_solid_key_for_a_dashed_line():
    # lesson 11's FSDP app drew 'compute alone' as a grey dashed line and keyed it with a solid one (review v16)
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    from distlab.plots._style import swatch

    fig = Figure()
    ax = fig.add_subplot()
    ax.axvline(1.0, color="#57606a", ls="--")
    ax.plot([1, 2], [1, 2], color="#000000")
    box = widgets.VBox([widgets.HTML(swatch("#57606a", "compute alone", "line") + swatch("#000000", "step", "dashed"))])
    assert html_legend_shape_problems(box, fig) == [
        "legend key of 'compute alone' is a line, and the figure draws no line in its colour",
        "legend key of 'step' is a dashed, and the figure draws no dashed in its colour",
    ]
    box.children[0].value = swatch("#57606a", "compute alone", "dashed") + swatch("#000000", "step", "line")
    assert html_legend_shape_problems(box, fig) == []


def test_no_html_legend_entry_breaks_across_lines():
    # a legend that wraps at the notebook's width must break between entries: lesson 11's FSDP app broke 'compute
    # alone' after 'compute' (review v14), so its next line began 'alone time in units of ...'
    import matplotlib.pyplot as plt

    # the legends of HTML panels, and those a browser picture shows above its canvas (LadderPicture.legend: lesson
    # 8b's "- - GPU memory" broke after its first dash in a 320 px output)
    box = re.compile(r'<span style="display:inline-block;[^"]*(?:background|border)[^"]*"></span>')
    whole = re.compile(r'<span style="white-space:nowrap"><span style="display:inline-block[^>]*></span>[^<]*</span>')
    for app_class in _apps():
        app = app_class()
        try:
            for w in _walk(app):
                legend = w.value if isinstance(w, widgets.HTML) else getattr(w, "legend", None)
                if isinstance(legend, str):
                    assert len(box.findall(legend)) == len(whole.findall(legend)), (app_class.__name__, legend)
                    assert not glyph_entry_problems(legend), (app_class.__name__, glyph_entry_problems(legend))
        finally:
            if getattr(app, "fig", None) is not None:
                plt.close(app.fig)


#: a legend entry keyed by a text glyph rather than a swatch box: a span whose text is a symbol (an entity such as
#: &#8942;, or a character that is not a letter, digit or punctuation of prose) or a dashed line typed as dashes
#: ("- -": a capacity line), a space and a label
GLYPH_ENTRY = re.compile(
    r'<span style="([^"]*)">((?:&#x?[0-9a-fA-F]+;|[^\w\s<>&;,.:()\[\]"\'-])+|-(?: -)+)[ \t]+([^<]+)</span>'
)


def glyph_entry_problems(html: str) -> list[str]:
    """The glyph-keyed legend entries in `html` that a wrapped legend can break inside (no white-space:nowrap: lesson
    8's '&#8942; backward ends' broke after its glyph, review v16) or that stick to the text before them (no space
    before the entry: the line cannot break there, so the entry and its neighbour wrap as one)."""
    found = []
    for m in GLYPH_ENTRY.finditer(html):
        before = html[: m.start()]
        if "white-space:nowrap" not in m.group(1).replace(" ", ""):
            found.append(f"{m.group(2)} {m.group(3)!r} can break after its glyph")
        elif not (before[-1:].isspace() or before.endswith("<br>") or re.search(r"<div[^>]*>$", before)):
            found.append(f"{m.group(2)} {m.group(3)!r} has no space before it to break at")
    return found


def test_the_glyph_entry_check_finds_a_breakable_and_a_stuck_entry():
    from distlab.plots._style import glyph_key, swatch

    breakable = '<div><span style="color:#57606a">&#8942; backward ends</span></div>'
    stuck = swatch("#000000", "all-reduced") + '<span style="color:red;white-space:nowrap">\u2502 step ends</span>'
    dashes = '<div>: <span style="color:#c44e52;margin-left:12px">- - GPU memory</span></div>'
    assert len(glyph_entry_problems(breakable)) == 1 and len(glyph_entry_problems(stuck)) == 1
    assert len(glyph_entry_problems(dashes)) == 1
    assert (
        glyph_entry_problems(swatch("#000000", "all-reduced") + glyph_key("#57606a", "&#8942;", "backward ends")) == []
    )


def test_every_html_legend_key_is_a_few_px_on_each_side():
    # the apps' HTML legends (plots._style.swatch: a box, a line, a dot) beside the canvas; a key under MIN_HANDLE_PX
    # reads as no key (the browser pictures' own legends draw 12 px keys: bars.js, lab.js, grid.js)
    from distlab.plots import _style

    for shape, look in _style._SWATCH_SIZE.items():
        sizes = [float(v) for v in re.findall(r"(?:width|height):([\d.]+)px", look)]
        assert len(sizes) == 2 and min(sizes) >= MIN_HANDLE_PX, (shape, look)
    for shape in _style._SWATCH_SIZE:
        assert re.search(r"(width|height):[\d.]+px", _style.swatch("#000000", "x", shape))


def test_the_empty_bar_check_finds_a_category_drawn_as_nothing():
    """Lesson 11's schedules figure before review v17: ZB-V's zero idle was no bar and no label."""
    from matplotlib.figure import Figure

    from distlab.plots.training_at_scale import schedules_figure

    fig = Figure()
    ax = fig.add_subplot()
    ax.bar([0, 1, 2], [3.0, 0.0, 1.0])
    ax.set_xticks([0, 1, 2], ["1f1b", "zb-v", "zb-h1"])
    fig.draw_without_rendering()
    assert unlabelled_empty_bars(fig, fig._get_renderer()) == ["an empty bar at x = 1 has no label"]
    fixed = schedules_figure(["1f1b", "zb-v", "zb-h1"], [3.0, 0.0, 1.0], [4.0, 4.0, 4.0])
    fixed.draw_without_rendering()
    assert unlabelled_empty_bars(fixed, fixed._get_renderer()) == []


def test_the_unit_check_finds_powers_of_ten_of_bytes_and_passes_plain_units():
    from matplotlib.figure import Figure

    from distlab.plots._style import decade_labels
    from distlab.units import format_bytes, format_seconds

    fig = Figure()
    ax = fig.add_subplot()
    ax.loglog([1e3, 1e11], [1e-6, 1.0])
    ax.set_xlabel("message size M (bytes)")
    ax.set_ylabel("time (s)")
    assert [p.split(":")[0] for p in powers_of_units(fig)] == ["x axis 'message size M (bytes)'", "y axis 'time (s)'"]
    decade_labels(ax, "x", format_bytes)
    decade_labels(ax, "y", format_seconds)
    fig.draw_without_rendering()
    assert powers_of_units(fig) == []
    assert [t.get_text() for t in ax.xaxis.get_ticklabels()][:2] == ["1 kB", "10 kB"]


def test_the_tick_label_check_finds_labels_on_top_of_each_other():
    from matplotlib.figure import Figure

    fig = Figure(figsize=(3, 2))
    ax = fig.add_subplot()
    ax.bar(range(4), [1, 2, 3, 4])
    ax.set_xticks(range(4), ["a long category name"] * 4)
    fig.draw_without_rendering()
    assert any("tick labels" in p and "overlap" in p for p in overlapping_tick_labels(fig, fig._get_renderer()))


@pytest.mark.parametrize("mb, tp, pp", [(1, 8, 4), (2, 1, 4), (1, 1, 1), (2, 2, 1), (8, 2, 4)])
def test_the_static_triage_figure_names_its_rungs_when_they_fit(mb, tp, pp):
    """Lesson 8b's ladder numbered its rungs only (review look24): a ladder of up to NAMED_RUNGS rungs names each
    rung's change under its number, with no two labels on top of each other; a longer one numbers them (as its
    summary lists them). Ladders of 2, 4, 5, 6 and 8 rungs on Llama 3.1 (the 8 on the 405B)."""
    from distlab import hardware
    from distlab.plots.production import NAMED_RUNGS, triage_figure
    from distlab.triage import oom_triage

    model = "llama3.1-405b" if mb == 8 else "llama3.1-70b"
    kw = dict(micro_batch_size=mb, tp=tp, pp=pp, zero=0, recompute="none", attention="unfused")
    t = oom_triage(model, hardware.cluster("dgx-h100", 32), global_batch=256, seq_len=8192, **kw)
    fig = triage_figure(t)
    fig.draw_without_rendering()
    ax = fig.axes[0]
    lo, hi = ax.get_xlim()
    ticks = [x.get_text() for x in ax.get_xticklabels() if lo <= x.get_position()[0] <= hi]
    assert ticks[0] == "given" and len(ticks) == len(t.ladder) + 1
    for k, (tick, step) in enumerate(zip(ticks[1:], t.ladder), start=1):
        named = " ".join(tick.split("\n")[1:]).replace("_ ", "_").replace("= ", "=")
        assert tick.split("\n")[0] == str(k) and (named == step.change if len(t.ladder) <= NAMED_RUNGS else not named)
    assert not overlapping_tick_labels(fig, fig._get_renderer())
