"""The browser pictures' series colours (one per GPU of lesson 2's ring, one per part of a bar): 16 GPUs get 16
different colours, and none is the black the pictures draw outlines and busy arrows in (issue 31: the ring's GPU 7
was black, so the stripes of its data and the outline of a chunk just received looked alike). The colours are
computed by the browser code itself, run in Node."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from distlab.plots.collectives import MAX_PICTURE_GPUS

JS = Path(__file__).resolve().parents[2] / "distlab" / "widgets" / "browser_js"
NODE = shutil.which("node")


def _series_colours(n: int) -> list[str]:
    script = (
        JS / "common.js"
    ).read_text() + f"\nconsole.log(JSON.stringify([...Array({n}).keys()].map(seriesColour)));"
    out = subprocess.run([NODE, "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _rgb(colour: str) -> tuple[int, int, int]:
    if colour.startswith("#"):
        return tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))  # type: ignore[return-value]
    return tuple(int(v) for v in re.findall(r"\d+", colour)[:3])  # type: ignore[return-value]


@pytest.mark.skipif(NODE is None, reason="needs Node.js to run the browser code")
def test_every_gpu_of_the_ring_has_its_own_colour_and_none_is_the_outline_black():
    colours = [_rgb(c) for c in _series_colours(MAX_PICTURE_GPUS)]
    assert len(set(colours)) == MAX_PICTURE_GPUS, colours
    ring = (JS / "ring.js").read_text()
    # the dark colours ring.js strokes outlines and busy arrows with ("#111111")
    dark = {_rgb(c) for c in re.findall(r'"(#[0-9a-fA-F]{6})"', ring) if max(_rgb(c)) < 0x40}
    assert dark, "ring.js names its outline colour"
    # a series colour at least this far (sum of channel differences) from every outline colour: black is 0 from
    # "#111111" + 51; the darkest Okabe-Ito blue "#0072B2" is 0x72 + 0xB2 - 2*0x11 = 262 from it
    assert min(sum(abs(a - b) for a, b in zip(c, d)) for c in colours for d in dark) > 150


# --- series that share or nearly share a colour, with no other cue (review v14: the grid's 28 TP groups drew pastel
# hues 13 degrees apart, 8 CIELAB units; the ring's light sky blue and light blue were 12 apart)

#: the least CIELAB distance (CIE76) at which two series' colours are told apart at a glance; 2.3 is the smallest
#: difference seen side by side, categorical palettes keep 20 or more
DISTINCT = 15.0


def _lab(rgb) -> tuple[float, float, float]:
    def linear(c: float) -> float:
        c /= 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(c) for c in rgb)
    x, y, z = (
        (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047,
        0.2126 * r + 0.7152 * g + 0.0722 * b,
        (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883,
    )

    def f(t: float) -> float:
        return t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116

    return 116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))


def colour_distance(a, b) -> float:
    """CIELAB distance (CIE76) of two colours given as '#rrggbb', 'rgb(r, g, b)' or (r, g, b) in 0-255."""
    la, lb = (_lab(c if isinstance(c, tuple) else _rgb(c)) for c in (a, b))
    return sum((p - q) ** 2 for p, q in zip(la, lb)) ** 0.5


def confusable(cues: list[tuple]) -> list[str]:
    """'k and j' for each two series whose (colour, other cue...) differ in nothing but a colour within DISTINCT."""
    found = []
    for k, (colour, *rest) in enumerate(cues):
        for j in range(k):
            if cues[j][1:] == tuple(rest) and colour_distance(colour, cues[j][0]) < DISTINCT:
                found.append(f"series {j} and {k}: {cues[j][0]} and {colour} with the same other cues {rest}")
    return found


def _grid_cues(count: int, kind: str = "groups") -> list[tuple[str, str]]:
    """(fill colour, hatch) of group k = 0..count-1 as grid.js draws them, run in Node."""
    source = (
        (JS / "common.js").read_text() + "\n" + (JS / "grid.js").read_text().replace("export default", "const _m =")
    )
    hatch = "typeof fillHatch === 'function' ? fillHatch(f, k) : ''"
    script = source + (
        f"\nconst f = {{fill_kind: {json.dumps(kind)}, fill_count: {count}}};"
        f"\nconsole.log(JSON.stringify([...Array({count}).keys()].map((k) => [fillColour(f, k), {hatch}])));"
    )
    out = subprocess.run([NODE, "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return [tuple(c) for c in json.loads(out.stdout)]


#: the most groups the lesson 6 grid app can colour by (D up to 32 x P up to 16 TP groups at T = 1)
MAX_GRID_GROUPS = 512
#: the groups whose fills are all told apart (7 colours x 7 hatches); past it they repeat, neighbours still differ
TOLD_APART = 49


@pytest.mark.skipif(NODE is None, reason="needs Node.js to run the browser code")
def test_the_ring_and_bars_series_colours_are_told_apart():
    colours = _series_colours(MAX_PICTURE_GPUS)
    assert confusable([(c,) for c in colours]) == []


@pytest.mark.skipif(NODE is None, reason="needs Node.js to run the browser code")
def test_the_grid_tells_every_group_apart_by_colour_or_hatch():
    cues = _grid_cues(MAX_GRID_GROUPS)
    for count in (2, 7, 8, 9, 16, 28, TOLD_APART):
        assert confusable(cues[:count]) == [], count  # group k's fill does not depend on the count
    assert _grid_cues(28) == cues[:28]
    assert all(cues[k] != cues[k + 1] for k in range(MAX_GRID_GROUPS - 1))  # past 49: neighbours still differ


@pytest.mark.skipif(NODE is None, reason="needs Node.js to run the browser code")
def test_the_lessons_static_grids_draw_the_browser_grids_cues():
    # distlab.plots.parallelism_3d draws lesson 6's static grids: the same colour and hatch for group k as grid.js
    import numpy as np
    from matplotlib.colors import to_hex

    from distlab.plots.parallelism_3d import GROUP_HATCHES, group_colours, group_hatches

    browser = _grid_cues(TOLD_APART)
    index = np.arange(TOLD_APART)
    ours = [(to_hex(c).upper(), GROUP_HATCHES[h]) for c, h in zip(group_colours(index), group_hatches(index))]
    assert [_rgb(c) for c, _ in ours] == [_rgb(c) for c, _ in browser]
    assert confusable([(c, h) for c, h in ours]) == []
    # one hatch per round of seven, in the same order as the browser's (matplotlib doubles a hatch's strokes)
    assert [h[:1] for _, h in ours] == [h[:1] for _, h in browser]


def test_the_check_finds_near_twins_without_a_second_cue():
    pastel = [f"#{int(r):02x}{int(g):02x}{int(b):02x}" for r, g, b in [(174, 199, 232), (158, 202, 225)]]
    assert confusable([(c,) for c in pastel]) != []  # the old grid's first and sixteenth group colours
    assert confusable([(pastel[0], ""), (pastel[1], "/")]) == []  # a hatch tells them apart


#: How far (CIELAB) a chart's capacity line stays from every series colour drawn with it: a dashed line is a thin cue,
#: so its colour alone must tell it from the boxes. The lab's vermillion capacity line against its orange gradients
#: (33 apart) read as one colour (review v18); the red now used is 60 or more from each.
CAPACITY_APART = 50.0


@pytest.mark.parametrize(
    "script, capacity, parts",
    [("lab.js", "LAB_CAPACITY", "MEMORY_COLOURS"), ("bars.js", "CAPACITY", "PART_COLOURS")],
)
def test_a_capacity_line_is_no_series_colour(script, capacity, parts):
    import distlab.widgets

    source = (Path(distlab.widgets.__file__).parent / "browser_js" / script).read_text(encoding="utf-8")
    line = re.search(rf'^const {capacity} = "(#[0-9a-fA-F]{{6}})"', source, re.MULTILINE).group(1)
    body = re.search(rf"^const {parts} = \[([^\]]*)\]", source, re.MULTILINE).group(1)
    series = re.findall(r"#[0-9a-fA-F]{6}", body)
    assert len(series) >= 4
    near = [(c, round(colour_distance(line, c), 1)) for c in series if colour_distance(line, c) < CAPACITY_APART]
    assert near == [], f"{script}: the capacity line {line} is near series colours {near}"


# --- the step-time parts: one colour each, in the matplotlib bars and in the training lab's picture (review v19: with a
# mixture-of-experts model the lab drew "EP all-to-all" and "overlap slowdown" in the same sky blue, #56B4E9: lab.js named
# no colour for the overlap slowdown, so it took the series colour of its position; the matplotlib bars drew them 12.5
# CIELAB apart)


def _lab_step_colours() -> dict[str, str]:
    import distlab.widgets

    source = (Path(distlab.widgets.__file__).parent / "browser_js" / "lab.js").read_text(encoding="utf-8")
    body = re.search(r"^const STEP_COLOURS = \{(.*?)^\};", source, re.MULTILINE | re.DOTALL).group(1)
    return dict(re.findall(r'"([^"]+)":\s*"(#[0-9a-fA-F]{6})"', body))


def _far_apart(colours: dict[str, str]) -> list[str]:
    names = list(colours)
    return [
        f"{a} and {b}: {colours[a]} and {colours[b]}"
        for i, a in enumerate(names)
        for b in names[:i]
        if colour_distance(colours[a], colours[b]) < DISTINCT
    ]


def test_every_step_part_has_its_own_colour_in_the_bars_and_in_the_lab():
    from distlab.plots._bars import STEP_COLOURS, STEP_PARTS

    lab = _lab_step_colours()
    # every part the step model prices is named (a part left out falls back to a colour by position, which another
    # part may already have), and no two parts' colours are confusable
    assert [p for p in STEP_PARTS if p not in lab] == [], "lab.js's STEP_COLOURS leaves parts to a positional colour"
    assert _far_apart({p: lab[p] for p in STEP_PARTS}) == []
    assert _far_apart({p: STEP_COLOURS[p] for p in STEP_PARTS}) == []


# --- one colour per part in every picture (student review, session 22: lesson 7's static step-time figure drew the
# parts in seaborn's palette, the training lab above it in Okabe & Ito's, so p2p, exposed DP, the optimizer and the
# overlap slowdown each had two colours; lesson 8b's ladder drew memory in one palette, lessons 1, 3 and 7 in another)


def _js_table(script: str, name: str) -> list[str]:
    import distlab.widgets

    source = (Path(distlab.widgets.__file__).parent / "browser_js" / script).read_text(encoding="utf-8")
    body = re.search(rf"^const {name} = \[([^\]]*)\]", source, re.MULTILINE).group(1)
    return [c.lower() for c in re.findall(r"#[0-9a-fA-F]{6}", body)]


def _js_constant(script: str, name: str) -> str:
    import distlab.widgets

    source = (Path(distlab.widgets.__file__).parent / "browser_js" / script).read_text(encoding="utf-8")
    return re.search(rf'^const {name} = "(#[0-9a-fA-F]{{6}})"', source, re.MULTILINE).group(1).lower()


def test_every_picture_draws_a_part_in_the_same_colour():
    from distlab.plots._bars import MEMORY_COLOURS, STEP_COLOURS
    from distlab.plots._style import CAPACITY_COLOUR
    from distlab.step_parts import MEMORY_COMPONENTS, STEP_PARTS

    # the step parts: the matplotlib bars (and the ladder's data, distlab.production) against the training lab's table
    lab = {part: colour.lower() for part, colour in _lab_step_colours().items()}
    assert {p.label: p.colour.lower() for p in STEP_PARTS} == lab
    assert {label: colour.lower() for label, colour in STEP_COLOURS.items()} == lab
    # the memory parts, in stacking order: the matplotlib bars, lessons 1 and 3's browser bars, the training lab
    memory = [MEMORY_COLOURS[c].lower() for c in MEMORY_COMPONENTS]
    assert _js_table("lab.js", "MEMORY_COLOURS") == memory
    assert _js_table("bars.js", "PART_COLOURS")[: len(memory)] == memory
    # the capacity line
    assert CAPACITY_COLOUR.lower() == _js_constant("bars.js", "CAPACITY") == _js_constant("lab.js", "LAB_CAPACITY")
