"""A best value found by searching a bounded range says so when it is the range's end (a student's review: lesson 8's
bucket app printed "best: 2000 buckets of 6.74 MB" at 65,536 tokens per GPU; 2,000 is the slider's, and the sweep's,
last count, and the exposed time still falls there: B* = (T - M s) / L is about 19,000)."""

from __future__ import annotations

import itertools


from distlab import dataparallel, production
from distlab.widgets.production import MAX_BUCKETS, BucketApp

QUALIFIER = "the most priced"


def _sweep(tokens: int, max_buckets: int = MAX_BUCKETS):
    return production.bucket_sweep(
        dataparallel.gradient_bytes("llama2-7b"),
        production.backward_time("llama2-7b", tokens),
        64,
        max_buckets=max_buckets,
        link="nvlink4",
        algorithm="hierarchical",
        gpus_per_node=8,
        inter_link="ib-ndr",
    )


def test_a_sweep_whose_best_is_its_last_count_says_so():
    long = _sweep(65536)
    assert long.best_buckets == MAX_BUCKETS and long.closed_form_buckets > MAX_BUCKETS
    assert long.best_at_end and QUALIFIER in long.best_words() and QUALIFIER in str(long)
    inside = _sweep(4096)  # lesson 8's: the best, 613 buckets, lies inside the range
    assert not inside.best_at_end and inside.best_words() == "613 buckets of 22 MB" and QUALIFIER not in str(inside)


def test_a_sweep_of_one_count_has_no_end_to_speak_of():
    assert not _sweep(4096, max_buckets=1).best_at_end


def _states(app):
    """Every model, tokens per GPU, DP size and algorithm the bucket app offers."""
    for model, tokens, dp, algorithm in itertools.product(
        app.model.options, app.tokens.options, app.dp.options, app.algorithm.options
    ):
        app.model.value, app.tokens.value, app.dp.value, app.algorithm.value = model, tokens, dp, algorithm
        yield f"{model} {tokens} tokens dp={dp} {algorithm}", app.compute_for(app.values())


def test_the_bucket_apps_best_says_when_it_is_the_sliders_end():
    app = BucketApp()
    at_end, wrong = 0, []
    for name, result in _states(app):
        sweep = result[0]
        best_line = next(line for line in app.describe(result).split("\n") if line.startswith("best: "))
        if sweep.best_at_end:
            at_end += 1
        if sweep.best_at_end != (QUALIFIER in best_line):
            wrong.append(f"{name}: {best_line}")
    assert at_end > 0  # the check sees the case
    assert not wrong, "\n".join(wrong[:5])
