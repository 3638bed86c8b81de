"""The look every plot module shares: named colours, stable axis ranges, HTML legend swatches.

Lesson plot modules import from here (and from the shared drawing in plots/_bars.py), never from
each other.
"""

from __future__ import annotations

import math

# The palette (seaborn "deep"): one name per colour, so a lesson's colours read as words.
BLUE = "#4c72b0"
ORANGE = "#dd8452"
GREEN = "#55a868"
RED = "#c44e52"
PURPLE = "#8172b3"
BROWN = "#937860"
PINK = "#da8bc3"
GREY = "#8c8c8c"
PALETTE = (BLUE, ORANGE, GREEN, RED, PURPLE, BROWN, PINK, GREY)

#: A GPU's memory capacity, drawn as a dashed line wherever memory is plotted: a dark red, far from every memory and
#: step part's colour (distlab.step_parts), as the browser pictures draw it (bars.js CAPACITY, lab.js LAB_CAPACITY).
CAPACITY_COLOUR = "#b3261e"
#: Text: main, secondary (captions, notes), and "good" (a best choice, a fit).
TEXT_COLOUR = "#1f2328"
MUTED = "#57606a"
GOOD = "#1a7f37"

#: Bars drawn for invalid input: the last valid picture, faded to this alpha.
FADED_ALPHA = 0.25

_SWATCH_SIZE = {
    "box": "width:12px;height:12px",
    "line": "width:14px;height:3px",
    "dot": "width:9px;height:9px;border-radius:5px",
    # a line cut into dashes, for a dashed or dotted line (lesson 11's 'compute alone', 11b's Young interval)
    "dashed": "width:14px;height:3px;-webkit-mask:repeating-linear-gradient(90deg,#000 0 4px,transparent 4px 7px);"
    "mask:repeating-linear-gradient(90deg,#000 0 4px,transparent 4px 7px)",
    # a five-pointed star cut from a 13 px box, for a curve's '*' marker (lesson 8's best bucket count)
    "star": "width:13px;height:13px;clip-path:polygon(50% 0,61% 35%,98% 35%,68% 57%,79% 91%,50% 70%,21% 91%,"
    "32% 57%,2% 35%,39% 35%)",
}


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 1.5, 2, 3, 4, 5, 6, 8 x 10^k at or above value (stable axis ranges)."""
    if value <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    for step in (1, 1.5, 2, 3, 4, 5, 6, 8, 10):
        if step * power >= value * (1 - 1e-12):
            return step * power
    return 10 * power


def decade_labels(ax, which: str, text) -> None:
    """Label the whole decades of a log axis of `ax` ('x' or 'y') in plain units, text(value) ('1 ms', '100 GB'),
    not matplotlib's 10^k: a student reads "100 GB" at once and 10^11 bytes only after counting (review v18; lesson
    8's bucket figure already wrote '100 µs ... 1 s'). Call it once the limits are set; minor ticks stay unlabelled."""
    from matplotlib.ticker import FixedFormatter, FixedLocator, NullFormatter

    low, high = sorted(ax.get_xlim() if which == "x" else ax.get_ylim())
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    ticks = [10.0**k for k in range(first, last + 1) if low * (1 - 1e-9) <= 10.0**k <= high * (1 + 1e-9)]
    if len(ticks) < 2:  # less than a decade shown: 1, 2, 5 of each decade
        ticks = [m * 10.0**k for k in range(first, last + 1) for m in (1, 2, 5) if low <= m * 10.0**k <= high]
    axis = ax.xaxis if which == "x" else ax.yaxis
    axis.set_major_locator(FixedLocator(ticks))
    axis.set_major_formatter(FixedFormatter([text(v) for v in ticks]))
    axis.set_minor_formatter(NullFormatter())


def finish_axes(ax, title: str = "") -> None:
    """The house finish of a static chart: a frameless small legend, no top or right spine, the title (wrapped at
    the figure's edges: lesson 11b's one-layer context figure cut its 87-character title off at both sides)."""
    ax.legend(fontsize=8, frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    if title:
        ax.set_title(title, fontsize=11, wrap=True)


def swatch(colour: str, label: str, shape: str = "box", margin: str = "0 4px 0 12px") -> str:
    """One legend entry as HTML: a coloured box, line, dashed line, dot or star ('outline': an empty box with a
    coloured edge), the shape the figure draws the series with, then the label, kept on one line (a legend that wraps breaks between entries, not inside one: lesson
    11's 'compute alone' broke after 'compute', and 'alone' began the next line). Widgets show legends as HTML to
    keep text out of the per-frame render."""
    if shape == "outline":
        look = f"{_SWATCH_SIZE['box']};border:2.5px solid {colour}"
    else:
        look = f"{_SWATCH_SIZE[shape]};background:{colour}"
    box = f'<span style="display:inline-block;{look};margin:{margin};vertical-align:middle"></span>'
    return f'<span style="white-space:nowrap">{box}{label}</span>'


def glyph_key(colour: str, glyph: str, label: str, margin_px: int = 12) -> str:
    """One legend entry keyed by a text glyph in the series' colour (a rule '&#9474;', a dotted rule '&#8942;', a
    square '&#9632;': the mark the figure draws), kept on one line as swatch keeps its entries: a wrapped legend broke
    lesson 8's '&#8942; backward ends' after its glyph, leaving the glyph at one line's end and its words on the
    next). The space before it is where a wrapped legend may break (none: the entry sticks to the one before it)."""
    return f' <span style="color:{colour};margin-left:{margin_px}px;white-space:nowrap">{glyph} {label}</span>'
