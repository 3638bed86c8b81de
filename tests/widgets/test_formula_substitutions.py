"""A published formula the apps print with a number after it shows the numbers it put in, and they are the app's own.

A student review (session 23) read lesson 4's bubble grid on DualPipe: "DeepSeek-V3 Table 2: (PP/2-1)(F&B+B-3W) =
6 x t_F with F&B = F + B", next to the sliders B : F = 1 and W : F = 1. Read with the grid's B (the input gradient)
the formula gives 3 x (2 + 1 - 3) = 0, not 6: the table's B is the whole backward (the grid's B + W), which the text
did not say. The text now writes the substitution, "= 3 x (3 + 2 - 3 x 1) = 6 x t_F", and names what each term is
in the grid's terms. Here every such substitution evaluates to the value printed after it, and its terms are the
sliders' values, for both DualPipe schedules over stage counts and cost ratios.
"""

from __future__ import annotations

import re

import pytest

from distlab.widgets.pipeline import BubbleGridApp

#: "= <number> x (<a> + <b> - 3 x <c>) = <value> x t_F": a product of a factor and a sum of terms, then its value
SUBSTITUTION = re.compile(
    r"= ([\d.]+) x \(([\d.]+) \+ ([\d.]+) - 3 x ([\d.]+)\) = ([\d.]+) x t_F \(PP = (?:2p|p) = (\d+)"
)


def _formula_numbers(text: str):
    found = SUBSTITUTION.search(text)
    assert found, f"the published bound is shown without its substitution: {text}"
    return [float(x) for x in found.groups()]


@pytest.fixture(scope="module")
def app():
    return BubbleGridApp(kind="dualpipe", stages=4, microbatches=8)


@pytest.mark.parametrize("kind", ["dualpipe", "dualpipe-v"])
@pytest.mark.parametrize("stages", [2, 4, 8])
@pytest.mark.parametrize("ratios", [(1.0, 1.0), (2.0, 1.0), (1.5, 0.25), (0.5, 0.0)])
def test_the_published_bound_shows_numbers_that_give_it(app, kind, stages, ratios):
    backward, weight = ratios
    with app.hold_trait_notifications():
        app.kind.value, app.stages.value, app.microbatches.value = kind, stages, 4 * stages
        app.backward.value, app.weight.value = backward, weight
    text = app.summary()
    factor, fb, whole, w, value, pp = _formula_numbers(text)
    # the arithmetic on the page gives the value on the page (to its 4 significant digits)
    assert factor * (fb + whole - 3 * w) == pytest.approx(value, rel=1e-3, abs=1e-9), text
    # the terms are the sliders': the table's B is the grid's B + W, F&B = F + B; DualPipe-V halves all three over
    # PP = 2p half-stage chunks
    share = 0.5 if kind == "dualpipe-v" else 1.0
    assert pp == (2 * stages if kind == "dualpipe-v" else stages)
    assert factor == pp / 2 - 1
    assert whole == pytest.approx((backward + weight) * share, rel=1e-3)
    assert fb == pytest.approx(share + whole, rel=1e-3)
    assert w == pytest.approx(weight * share, rel=1e-3)
    assert "whole backward" in text and "F&B = F + B" in text


def test_the_search_finds_a_substitution_and_misses_a_bare_value():
    assert _formula_numbers("(PP/2-1)(F&B+B-3W) = 3 x (3 + 2 - 3 x 1) = 6 x t_F (PP = p = 8, F = 1; ...")
    with pytest.raises(AssertionError):
        _formula_numbers("DeepSeek-V3 Table 2: (PP/2-1)(F&B+B-3W) = 6 x t_F with F&B = F + B")
