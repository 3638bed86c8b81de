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
