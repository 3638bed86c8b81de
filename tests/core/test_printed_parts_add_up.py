"""A memory total printed with its parts names every part, and the parts printed add up to it.

A student review (session 23) read lesson 11's FSDP summary: "3.37 GB sharded state + 1.21 GB gathered", "per layer
(421 MB)", "2 layers gathered at most": 2 x 421 MB is 842 MB, not 1.21 GB. The gathered bytes also hold one layer's
unsharded gradients, and a layer there is its own parameters, without the share of the embedding and output layer
the 421 MB gathers carry; the summary said neither. It now writes "gathered = 2 layers' weights + one layer's
unsharded gradients, 405 MB each (a layer: 202M parameters)". Here, for FSDP and HSDP plans over models,
prefetch depths, resharding and precisions: the state and gathered parts add up to the total printed, the gathered
part is the layers and the gradients it names, as many layers as the timeline line says, each the size printed.
"""

from __future__ import annotations

import re

import pytest

from distlab import production
from distlab.units import parse_quantity

SIZE = r"([\d.]+ [kMGT]?B)"
TOTAL = re.compile(rf"memory per GPU: {SIZE} sharded state \+ {SIZE} gathered = {SIZE}")
PARTS = re.compile(
    rf"gathered = (\d+) layers?'s? weights(?:, {SIZE} each,)? \+ one layer's (?:unsharded )?gradients, {SIZE}"
    rf"( each)? \(a layer: ([\d.]+)M parameters\)"
)
AT_MOST = re.compile(r"(\d+) layers? gathered at most")


def _bytes(text: str) -> float:
    return float(parse_quantity(text).to("B").magnitude)


def _close(a: float, b: float) -> bool:
    """Equal to the three significant digits format_bytes prints (each part rounded by at most half a unit in the
    third digit)."""
    return abs(a - b) <= 0.01 * max(a, b)


CASES = [
    dict(model="llama2-7b", nodes=4),
    dict(model="llama2-7b", nodes=4, sharding="hybrid"),
    dict(model="llama2-7b", nodes=4, prefetch=0),
    dict(model="llama2-7b", nodes=4, prefetch=2),
    dict(model="llama2-7b", nodes=4, reshard_after_forward=False),
    dict(model="llama2-7b", nodes=4, precision="fp8"),
    dict(model="llama3.1-70b", nodes=8),
    dict(model="llama2-13b", nodes=2, sharding="hybrid", prefetch=3),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_the_memory_line_names_its_parts_and_they_add_up(case):
    case = dict(case)
    plan = production.sharding_plan(case.pop("model"), "dgx-h100", **case)
    text = plan.summary()
    total = TOTAL.search(text)
    assert total, text
    state, gathered, whole = (_bytes(x) for x in total.groups())
    assert _close(state + gathered, whole), text
    parts = PARTS.search(text)
    assert parts, f"the gathered bytes are printed without what they are:\n{text}"
    layers, each_weights, gradients, both, params = parts.groups()
    weights = _bytes(each_weights) if each_weights else _bytes(gradients)
    assert (each_weights is None) == bool(both), text  # "405 MB each" covers both parts only when they are equal
    assert int(layers) == int(AT_MOST.search(text).group(1)) == plan.timeline.peak_gathered, text
    assert _close(int(layers) * weights + _bytes(gradients), gathered), text
    assert _close(float(params) * 1e6, plan.params_per_layer), text
    assert max(map(len, text.splitlines())) <= 110, text  # the lessons' output width (tests/lessons/test_output_width)


def test_the_search_finds_the_parts_and_misses_a_bare_total():
    line = "    gathered = 2 layers' weights + one layer's unsharded gradients, 405 MB each (a layer: 202M parameters)"
    assert PARTS.search(line).groups() == ("2", None, "405 MB", " each", "202")
    assert not PARTS.search("memory per GPU: 3.37 GB sharded state + 1.21 GB gathered = 4.58 GB")
