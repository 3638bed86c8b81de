"""No bracket inside a bracket in what an app shows: lesson 1's capacity label read "h200: 141 GB (141 GB HBM3e as
marketed (no CUDA-visible total sourced))", lesson 7's lab "step time 9.26 s (compute 7.02 s, ..., DP communication
(exposed) 2.62 ms, ...)" (review v16): a reader loses which bracket closes which. Every lesson app's text (its HTML
panels, its picture's texts and labels) at its defaults, and the capacity label of every GPU the memory apps offer,
nest no round brackets."""

from __future__ import annotations


import pytest

from lesson_apps import lesson_apps as _apps
from lesson_apps import shown_texts


def nested(text: str) -> list[str]:
    """The stretches of `text` (each line on its own) where a round bracket opens inside another."""
    found = []
    for line in text.splitlines():
        depth = 0
        for i, ch in enumerate(line):
            depth += (ch == "(") - (ch == ")")
            if ch == "(" and depth == 2:
                found.append(line[max(0, i - 50) : i + 50])
            depth = max(depth, 0)
    return found


@pytest.mark.parametrize("app_class", _apps(), ids=lambda a: f"{a.__module__.rsplit('.', 1)[1]}.{a.__name__}")
def test_no_app_text_nests_brackets(app_class):
    app = app_class()
    try:
        found = [hit for text in shown_texts(app) for hit in nested(text)]
        assert not found, f"{app_class.__name__}: {found[:3]}"
    finally:
        app.close()


def test_every_gpus_capacity_label_nests_no_brackets():
    from distlab.widgets.memory_wall import MemoryWallApp

    app = MemoryWallApp()
    try:
        for gpu in app.gpu.options:
            app.gpu.value = gpu
            label = app.picture.frames.get("capacity_label", "")
            assert gpu in label and not nested(label), label
    finally:
        app.close()


def test_the_check_finds_a_nested_bracket():
    assert nested("h200: 141 GB (141 GB HBM3e as marketed (no CUDA-visible total sourced))")
    assert not nested("h200: 141 GB (141 GB HBM3e as marketed; no CUDA-visible total sourced)\n(a) (b)")
