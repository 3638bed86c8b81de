"""A number and its unit stay on one line in every app's status panel: the panel wraps at the notebook's width and
broke "5.75 / ms exposed" in lesson 8's bucket app (review v16). message_html writes the space between them as a
no-break space."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
from lesson_apps import lesson_apps, walk

from distlab.widgets.browser import BrowserPicture
from distlab.widgets.common import message_html

JS = Path(__file__).resolve().parents[2] / "distlab" / "widgets" / "browser_js"

#: a breakable space between a number and a unit the kit prints
BREAKABLE = re.compile(r"\d (?:[kMGTP]?B(?:/s)?|[kMGT]iB|ms|µs|ns|s|%|W|GPUs?|nodes?|days?)(?![\w/])")


def test_message_html_keeps_each_number_with_its_unit():
    shown = message_html("20 buckets of 674 MB: 115 ms of communication, 5.75 ms exposed on 64 GPUs; 3 stages")
    assert not BREAKABLE.search(shown), shown
    assert "674&nbsp;MB" in shown and "64&nbsp;GPUs" in shown and "3 stages" in shown  # a count of stages may break


@pytest.mark.parametrize("app_class", lesson_apps(), ids=lambda a: a.__name__)
def test_no_status_panel_breaks_a_number_from_its_unit(app_class):
    app = app_class()
    try:
        status = getattr(app, "status", None)
        text = getattr(status, "value", "") or ""
        assert not BREAKABLE.search(text), BREAKABLE.search(text)
    finally:
        fig = getattr(app, "fig", None)
        if fig is not None:
            plt.close(fig)


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js to run the browser code")
def test_no_picture_summary_breaks_a_number_from_its_unit():
    """The text under a picture drawn in the browser (browser_js/common.js writes a summary into the page) keeps each
    number with its unit too: at a 900 px window the training lab's broke "pipeline bubble 4.84 / s" (review v19).
    Every lesson app's picture summaries, as common.js's keepUnits writes them (run in Node)."""
    summaries = []
    for app_class in lesson_apps():
        app = app_class()
        try:
            for picture in (w for w in walk(app) if isinstance(w, BrowserPicture)):
                summaries += [s for s in picture.summaries if s]
        finally:
            app.close()
    assert len(summaries) > 20 and any(re.search(r"\d s\b", s) for s in summaries)  # the check means something
    source = (JS / "common.js").read_text(encoding="utf-8")
    script = source + f"\nconsole.log(JSON.stringify({json.dumps(summaries)}.map(keepUnits)));"
    done = subprocess.run(["node", "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-800:]
    shown = json.loads(done.stdout)
    broken = [BREAKABLE.search(s).group() for s in shown if BREAKABLE.search(s)]
    assert not broken, broken[:5]
