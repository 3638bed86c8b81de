"""Lesson 11's log sliders answered from the browser's cache (issue 32): a FloatLogSlider's label in the browser's key
is its step position round((log_base(value) - min) / step), which browser_js/prefetch.js (run here in Node) and
distlab.widgets.prefetch compute alike where the value itself differs in its last bits (noUiSlider steps the exponent
in its own float arithmetic); a value between steps keeps its number; the kernel prefetches one step either side."""

from __future__ import annotations

import json
import math
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from distlab.widgets.controls import neighbour_values
from distlab.widgets.prefetch import control_label, js_number, log_slider_label

JS = Path(__file__).resolve().parents[2] / "distlab" / "widgets" / "browser_js"
NODE = shutil.which("node")


def _log_cases(seed: int = 32, n: int = 400) -> list:
    """(min, max, step, base, k) for log sliders like ipywidgets' (min/max exponents, a decimal step), k a step index."""
    rng = random.Random(seed)
    cases = [(-7, -3, 0.1, 10, k) for k in range(41)] + [(-2, 1, 0.1, 10, k) for k in range(31)]  # lesson 11's two
    while len(cases) < n:
        step = rng.choice([0.01, 0.05, 0.1, 0.125, 0.2, 0.25, 0.3, 0.5, 1.0, 0.07])
        low = round(rng.uniform(-12, 6), 1)
        last = rng.randint(1, 120)
        cases.append((low, low + last * step, step, rng.choice([10, 2, math.e, 3]), rng.randint(0, last)))
    return cases


@pytest.mark.skipif(NODE is None, reason="needs Node.js to run the browser code")
def test_a_log_sliders_label_is_its_step_index_on_both_sides_and_the_number_between_steps():
    # at a step position k: the browser's value is Math.pow(base, exponent), the exponent as noUiSlider may reach it
    # (min + k step, or k steps added one by one), Python's neighbour is base ** (min + k step); the last bits may
    # differ, the label is str(k) on every side. Between steps (half a step off, and a random fraction): the same
    # float on both sides (JSON carries it exactly), labelled "~" + JavaScript's String of it.
    cases = _log_cases()
    rng = random.Random(7)
    between = [
        (low, high, step, base, k + rng.choice([0.5, rng.uniform(0.01, 0.99)])) for low, high, step, base, k in cases
    ]
    between = [c for c in between if c[4] < round((c[1] - c[0]) / c[2])]
    offs = [base ** (low + f * step) for low, high, step, base, f in between]
    script = (
        (JS / "prefetch.js").read_text()
        + f"""
const cases = {json.dumps(cases)};
const offs = {json.dumps(offs)};
const between = {json.dumps(between)};
const labels = cases.map(([min, max, step, base, k]) => {{
  let added = min;
  for (let i = 0; i < k; i++) added += step;
  return [logSliderLabel(Math.pow(base, min + k * step), min, step, base), logSliderLabel(Math.pow(base, added), min, step, base)];
}});
const offLabels = between.map(([min, max, step, base], i) => logSliderLabel(offs[i], min, step, base));
console.log(JSON.stringify({{ labels, offLabels }}));
"""
    )
    done = subprocess.run([NODE, "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    js = json.loads(done.stdout)
    for (low, high, step, base, k), (direct, added) in zip(cases, js["labels"]):
        mine = log_slider_label(base ** (low + k * step), low, step, base)
        assert mine == direct == added == str(k), (low, high, step, base, k, mine, direct, added)
    for (low, _high, step, base, f), value, label in zip(between, offs, js["offLabels"]):
        assert log_slider_label(value, low, step, base) == label == "~" + js_number(value), (low, step, base, f)
    assert len(cases) == 400 and len(between) > 300


def test_a_log_sliders_neighbours_are_one_step_either_side_of_its_handle():
    # lesson 11's failure-rate slider at its default 1.97e-5 (between steps: log10 = -4.705, the handle at step 23 of
    # -7 + 0.1 k) and its storage slider at 2 TB/s (log10 2 = 0.301: step 23 of -2 + 0.1 k): the neighbours are the
    # values at steps 24 and 22, labelled "24" and "22"; at an end, one neighbour only
    from distlab.widgets.training_at_scale import CheckpointApp

    app = CheckpointApp()
    for widget in (app.rate, app.storage):
        near = neighbour_values(widget)
        assert [control_label(widget, v) for v in near] == ["24", "22"]
        assert near == [10 ** (widget.min + 24 * 0.1), 10 ** (widget.min + 22 * 0.1)]
        assert control_label(widget).startswith("~")
    app.rate.value = 1e-3  # the top step, 40
    assert [control_label(app.rate, v) for v in neighbour_values(app.rate)] == ["39"]
    app.close()
