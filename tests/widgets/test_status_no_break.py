"""A number and its unit stay on one line in every app's status panel: the panel wraps at the notebook's width and
broke "5.75 / ms exposed" in lesson 8's bucket app (review v16). message_html writes the space between them as a
no-break space."""

from __future__ import annotations

import re

import matplotlib.pyplot as plt
import pytest
from lesson_apps import lesson_apps

from distlab.widgets.common import message_html

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
