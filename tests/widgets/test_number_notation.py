"""One notation for a number in scientific form: JavaScript's, which the sliders' readouts use (d3-format's '.2e':
2.00e-5), never Python's zero-padded exponent beside it (lesson 11b's checkpoint app printed "at 2e-05 failures per
GPU-hour" under a slider that read 2.00e-5; review v16). Every lesson app's text, as built and after each numeric
slider's first step, has no exponent written with a leading zero."""

from __future__ import annotations

import re

import ipywidgets as widgets
import pytest

from distlab.failures import rate_text
from lesson_apps import lesson_apps as _apps
from lesson_apps import texts_through_steps

#: Python's exponent: 2e-05, 1.97e-05, 1e+09
PADDED_EXPONENT = re.compile(r"\d[eE][-+]0\d")


@pytest.mark.parametrize("app_class", _apps(), ids=lambda a: f"{a.__module__.rsplit('.', 1)[1]}.{a.__name__}")
def test_no_app_writes_an_exponent_with_a_leading_zero(app_class):
    app = app_class()
    try:
        kinds = (widgets.FloatLogSlider, widgets.FloatSlider)
        found = [hit for text in texts_through_steps(app, kinds) for hit in PADDED_EXPONENT.findall(text)]
        assert not found, f"{app_class.__name__}: {found}"
    finally:
        app.close()


def test_a_failure_rate_reads_as_the_slider_reads_it():
    assert [rate_text(r) for r in (1.97e-5, 2e-5, 1e-3, 1e-7)] == ["1.97e-5", "2.00e-5", "1.00e-3", "1.00e-7"]
    assert PADDED_EXPONENT.search(f"{2e-5:.3g}") and not PADDED_EXPONENT.search(rate_text(2e-5))
