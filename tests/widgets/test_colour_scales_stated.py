"""Every colour-mapped picture of a lesson app says what its colours mean in numbers (the student-view review of
session 23: lesson 10's all-to-all matrix coloured "MB each GPU sends each GPU" with no scale, so no cell could be
read). A figure's image either has a colour bar in the same figure, or the app's text names the top of its scale in
the image's own number (the matrix's scale changes with the routing, and a blitted frame keeps its axes)."""

from __future__ import annotations

import html
import re

import pytest
from matplotlib.image import AxesImage

from distlab.widgets.mixture_of_experts import EP_SIZES, AllToAllApp
from lesson_apps import lesson_apps, shown_texts


def _images(app) -> list:
    fig = getattr(app, "fig", None)
    if fig is None:
        return []
    return [artist for ax in fig.axes for artist in ax.get_children() if isinstance(artist, AxesImage)]


def _has_colour_bar(fig) -> bool:
    return any(getattr(ax, "_colorbar", None) is not None for ax in fig.axes)


def _scale_stated(app, image) -> bool:
    top = image.get_clim()[1]
    text = html.unescape(" ".join(shown_texts(app))).replace("\xa0", " ")
    return re.search(rf"(?<![\d.]){re.escape(f'{top:g}')} MB", text) is not None


@pytest.mark.parametrize("app_class", lesson_apps(), ids=lambda a: a.__name__)
def test_a_colour_mapped_picture_states_its_scale(app_class):
    app = app_class()
    for image in _images(app):
        assert _has_colour_bar(app.fig) or _scale_stated(app, image), f"{app_class.__name__}: colours without a scale"


@pytest.mark.parametrize("ep", EP_SIZES)
def test_the_all_to_all_matrix_says_the_scale_it_is_drawn_with(ep):
    # the scale follows the largest block (plots.mixture_of_experts.byte_matrix_scale): each EP size its own
    app = AllToAllApp(ep=ep)
    image = app.matrix.image
    assert _scale_stated(app, image), app.status.value
    assert image.get_clim()[1] >= app.result.bytes_matrix.max() / 1e6 > 0


def test_the_check_finds_a_matrix_without_its_scale(monkeypatch):
    # the check must fail on the defect: the all-to-all app as it was, its text without the scale
    app = AllToAllApp()
    app.status.value = re.sub(r"left, colour:[^<]*", "", app.status.value)
    assert not _has_colour_bar(app.fig) and not _scale_stated(app, app.matrix.image)


def test_the_walk_sees_the_lesson_apps_images():
    # the check above looks at every image of every app: at least lesson 10's matrix must be among them
    with_images = [a.__name__ for a in lesson_apps() if _images(a())]
    assert "AllToAllApp" in with_images
