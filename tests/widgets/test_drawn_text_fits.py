"""No text a browser-drawn picture writes runs past its canvas (issue 31's kind of defect: a legend label cut off).

Lesson 1 and 3's stacked bars (browser_js/bars.js) drew the capacity line's label, "h100-sxm: 84.9 GB (80 GB HBM3 =
79.11 GiB visible to CUDA)", on one line in the 150 px legend column: in Chromium it was cut off at the canvas's right
edge after "(8" (seen in the two-page browser test's screenshot, session 8). The drawing function runs here in Node
with a recording canvas whose font is 7 px per character (wider than the UI font's 11 px digits and letters, which
average about 6 px: a label that fits here fits in Chromium), for every GPU of the catalog's capacity label.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from distlab import hardware
from distlab.units import format_bytes

JS = Path(__file__).resolve().parents[2] / "distlab" / "widgets" / "browser_js"
NODE = shutil.which("node")

#: a canvas context that records every fillText with its alignment and measures 7 px per character
RECORDER = """
const calls = [];
const ctx = {
  font: "", fillStyle: "", strokeStyle: "", lineWidth: 1, textAlign: "left", textBaseline: "alphabetic",
  measureText: (t) => ({ width: 7 * String(t).length }),
  fillText(t, x, y) { calls.push([String(t), x, y, this.textAlign]); },
  fillRect() {}, strokeRect() {}, beginPath() {}, moveTo() {}, lineTo() {}, stroke() {}, setLineDash() {},
  save() {}, restore() {}, clearRect() {}, closePath() {}, fill() {}, rect() {}, arc() {}, translate() {},
  rotate() {}, scale() {}, setTransform() {}, fillTextRotated() {},
};
"""


def _drawn(frames: dict, w: int, h: int) -> list:
    source = (JS / "common.js").read_text() + (JS / "bars.js").read_text().replace("export default", "const _unused =")
    script = (
        source
        + RECORDER
        + f"""
const model = {{ get: (n) => ({{ frames: {json.dumps(frames)} }})[n] }};
drawBars(ctx, {w}, {h}, model, 0);
console.log(JSON.stringify(calls));
"""
    )
    done = subprocess.run([NODE, "-e", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.skipif(NODE is None, reason="node is not installed")
@pytest.mark.parametrize("gpu", sorted(hardware.ACCELERATORS))
def test_the_bars_capacity_label_stays_inside_the_canvas(gpu):
    part = hardware.accelerator(gpu)
    label = f"{part.name}: {format_bytes(part.memory_bytes)} ({part.memory_text()})"  # as data_parallel_zero.py
    frames = {
        "parts": ["weights", "gradients", "optimizer states"],
        "bars": [[[13.5, 13.5, 80.9], [13.5, 13.5, 80.9]]],
        "labels": ["one GPU, no sharding", "each GPU in your setup"],
        "totals": [["108 GB", "108 GB"]],
        "unit": "GB",
        "capacity": part.memory_bytes / 1e9,
        "capacity_label": label,
    }
    w = 600  # the memory wall's canvas (lesson 1)
    calls = _drawn(frames, w, 280)
    left_aligned = [(t, x) for t, x, _, align in calls if align in ("left", "start")]
    assert any(label.startswith(t) for t, _ in left_aligned)  # the label is drawn
    for text, x in left_aligned:
        assert x + 7 * len(text) <= w, f"{text!r} runs {x + 7 * len(text) - w:.0f} px past the {w} px canvas"
    lines = [t for t, x in left_aligned if x == w - 120]  # the legend's text column (bars.js: right 150, text at +30)
    assert " ".join(lines[len(frames["parts"]) :]) == label  # every word of it, in order, none cut
