"""The planner's error band and ties (issue 14): the band is the validation set's mean |step-time error|, ties
are the feasible rows within it, and deciding_assumption names the component that separates two rows."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from distlab import planner, validation
from distlab.errors import ConfigurationError

KEYS = ("compute_s", "tp_comm_s", "cp_comm_s", "bubble_s", "p2p_s", "dp_exposed_s", "optimizer_s")


def synthetic_plan(parts, feasible=None, dp_comm=None, memory=None):
    """A Plan over hand-made rows: parts is one dict of step-time components (s) per row; the step time is
    their sum, as in training.step_model_array."""
    n = len(parts)
    results = {k: np.array([float(p.get(k, 0.0)) for p in parts]) for k in KEYS}
    results["step_time_s"] = sum(results[k] for k in KEYS)
    results["dp_comm_s"] = results["dp_exposed_s"] if dp_comm is None else np.array(dp_comm, dtype=float)
    results["memory_bytes"] = np.zeros(n) if memory is None else np.array(memory, dtype=float)
    results["microbatches"] = np.ones(n)
    results["mfu"] = np.full(n, 0.5)
    columns = {name: np.ones(n, dtype=np.int64) for name in planner.COLUMNS}
    columns["dp"] = np.arange(1, n + 1)  # tells the rows apart
    feasible = np.ones(n, dtype=bool) if feasible is None else np.array(feasible, dtype=bool)
    order = np.lexsort((results["step_time_s"], ~feasible))
    return planner.Plan(
        columns=columns, results=results, feasible=feasible, order=order, rejected={}, gpus=n, model_name="toy"
    )


def test_error_band_is_the_validation_mean_and_computed_once():
    want = validation.compare("validation").summary["validation"]["mean_abs_error_percent"]
    assert planner.error_band_percent() == want and 0 < want < 100
    before = planner.error_band_percent.cache_info()
    planner.error_band_percent()
    after = planner.error_band_percent.cache_info()
    assert after.hits == before.hits + 1 and after.misses == before.misses  # cached: no second comparison


def test_ties_and_deciding_component_by_construction():
    # step times: A 10 s (compute), B 10.5 s (compute 10 + exposed DP 0.5), C 11.5 s (compute 10 + bubble 1.5),
    # D 9 s but infeasible. With a 10% band around A: |10.5 - 10| = 0.5 <= 1.0 ties, |11.5 - 10| = 1.5 > 1.0 does not.
    p = synthetic_plan(
        [
            {"compute_s": 10},
            {"compute_s": 10, "dp_exposed_s": 0.5},
            {"compute_s": 10, "bubble_s": 1.5},
            {"compute_s": 9},
        ],
        feasible=[1, 1, 1, 0],
    )
    assert [r["dp"] for r in p.top(4)] == [1, 2, 3, 4]  # feasible first, by step time
    assert [r["dp"] for r in p.ties(0, band_percent=10)] == [1, 2]
    assert p.tie_count(0, band_percent=10) == 2
    # around B (10.5 s) a 10% band is 1.05 s wide: A (0.5 away) and C (1.0 away) both tie
    assert [r["dp"] for r in p.ties(1, band_percent=10)] == [1, 2, 3]
    assert p.tie_count(0, band_percent=0) == 1  # a zero band ties a row with itself only
    d = p.deciding_assumption(0, 1)
    assert d.component == "DP communication (exposed)" and d.difference_s == pytest.approx(0.5)
    assert "hides behind compute" in d.assumption and "ZeRO-3" in d.assumption
    assert d.step_time_difference_s == pytest.approx(0.5)
    d = p.deciding_assumption(0, 2)
    assert d.component == "pipeline bubble" and d.difference_s == pytest.approx(1.5)
    assert "schedule and microbatch count" in d.assumption


def test_traffic_priced_as_hidden_can_decide():
    # A: compute 10 s, 3 s of DP traffic all hidden; B: compute 10.2 s, 0.2 s of DP traffic all hidden.
    # The step times differ by the 0.2 s of compute, but 2.8 s rests on the overlap assumption; the step model holds
    # 18.9% of hidden traffic in its overlap slowdown, so (1 - 0.189) x 2.8 = 2.2708 s more is at stake.
    p = synthetic_plan([{"compute_s": 10}, {"compute_s": 10.2}], dp_comm=[3.0, 0.2], memory=[50e9, 70e9])
    d = p.deciding_assumption(0, 1)
    assert d.component == "DP communication priced as hidden" and d.difference_s == pytest.approx(-2.2708)
    assert d.hidden_dp_s == pytest.approx((3.0, 0.2))
    assert d.differences_s["compute"] == pytest.approx(0.2) and d.memory_difference_bytes == pytest.approx(20e9)
    assert "20 GB more" in d.text()
    # priced with a fixed efficiency (Lesson 7 §1), the step time holds none of the hidden traffic: all 2.8 s at stake
    fixed = synthetic_plan([{"compute_s": 10}, {"compute_s": 10.2}], dp_comm=[3.0, 0.2], memory=[50e9, 70e9])
    fixed.extra.update(calibrated=False, overlap_slowdown=0.0)
    assert fixed.deciding_assumption(0, 1).difference_s == pytest.approx(-2.8)


def test_ties_on_the_lesson_7_scenario_are_feasible_and_within_the_band():
    p = planner.plan("llama3.1-70b", "dgx-h100", nodes=32, fabric="ib-ndr", global_batch=256, seq_len=8192)
    band = p.band_percent  # the band of H100 runs in mixed precision
    t0 = p.row(0)["step_time_s"]
    ties = p.ties(0)
    assert ties == p.top(len(ties)) and all(r["fits"] for r in ties)
    assert all(abs(r["step_time_s"] - t0) <= band / 100 * t0 for r in ties)
    after = p.row(len(ties))  # the first feasible row outside the band
    assert after["fits"] and after["step_time_s"] - t0 > band / 100 * t0
    # the components' differences add up to the step-time difference (step = their sum)
    for b in (1, len(ties) - 1, len(ties) + 5):
        d = p.deciding_assumption(0, b)
        assert sum(d.differences_s.values()) == pytest.approx(d.step_time_difference_s, rel=1e-9, abs=1e-12)
        assert d.step_time_difference_s == pytest.approx(p.row(b)["step_time_s"] - t0, rel=1e-12)


def test_table_marks_the_ties_only_when_asked():
    p = synthetic_plan([{"compute_s": 10}, {"compute_s": 10.5}, {"compute_s": 12}])
    plain = p.table(3)
    assert "≈" not in plain
    marked = p.table(3, ties=True).splitlines()
    tied = p.tie_count(0)
    assert [line.startswith("≈") for line in marked[1:]] == [r < tied for r in range(3)]


def test_invalid_ranks_and_bands_raise_our_error():
    p = synthetic_plan([{"compute_s": 10}, {"compute_s": 11}], feasible=[1, 0])
    with pytest.raises(ConfigurationError, match=r"rank \(a feasible row\)=1 must be a whole number from 0 to 0"):
        p.ties(1)
    with pytest.raises(ConfigurationError, match="band_percent must not be negative"):
        p.ties(0, band_percent=-1)
    with pytest.raises(ConfigurationError, match="b=2 must be a whole number from 0 to 1"):
        p.deciding_assumption(0, 2)
    with pytest.raises(ConfigurationError, match="none ties"):
        synthetic_plan([{"compute_s": 1}], feasible=[0]).ties(0)


@settings(max_examples=60, deadline=None)
@given(
    times=st.lists(st.floats(0.01, 100.0), min_size=1, max_size=30),
    fits=st.lists(st.booleans(), min_size=30, max_size=30),
    band=st.floats(0.0, 50.0),
    pick=st.integers(0, 29),
)
def test_ties_equal_a_brute_force_search(times, fits, band, pick):
    fits = fits[: len(times)]
    fits[0] = True
    p = synthetic_plan([{"compute_s": t} for t in times], feasible=fits)
    rank = pick % p.feasible_count
    t0 = p.row(rank)["step_time_s"]
    want = [r for r in range(p.feasible_count) if abs(p.row(r)["step_time_s"] - t0) <= band / 100 * t0]
    got = p.ties(rank, band_percent=band)
    assert got == [p.row(r) for r in want]
    assert p.tie_count(rank, band_percent=band) == len(want)
    other = (rank + 1) % len(p)
    d = p.deciding_assumption(rank, other)
    assert abs(d.difference_s) == max(abs(x) for x in [*d.differences_s.values(), d.hidden_dp_s[1] - d.hidden_dp_s[0]])


@pytest.mark.parametrize("node", ["dgx-a100", "dgx-h100"])
def test_a_plan_ties_within_the_band_of_runs_like_it(node):
    # issue 30: the planner calls two configurations a tie when their step times lie within the model's error band
    # for runs LIKE THESE (validation.error_band of the plan's GPU family and precision: A100 runs in mixed
    # precision, H100 runs in mixed precision), not the whole validation set's mean. The tie count is checked by
    # brute force over the plan's feasible step times: |t - t_0| <= band / 100 x t_0.
    p = planner.plan("llama2-7b", node, nodes=2, global_batch=64)
    band = validation.error_band({"dgx-a100": "a100-80gb", "dgx-h100": "h100-sxm"}[node], "mixed")
    assert band.matched and p.band_percent == pytest.approx(band.percent)
    assert band.percent != pytest.approx(planner.error_band_percent())  # the kinds' bands differ from the mean
    times = np.sort(p.results["step_time_s"][p.feasible])
    assert p.tie_count(0) == int(np.sum(np.abs(times - times[0]) <= band.percent / 100 * times[0]))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from([0.0, -0.0, 1e-9, 1.0, 1.5, 2.0, 3.25]), st.booleans()), max_size=300),
)
def test_the_ranking_is_lexsorts(rows):
    # an independent implementation: NumPy's lexsort of (step time, infeasible), stable (equal times in row order)
    t = np.array([time for time, _ in rows], dtype=float)
    fits = np.array([fit for _, fit in rows], dtype=bool)
    assert planner._ranking(t, fits).tolist() == np.lexsort((t, ~fits)).tolist()


def test_the_ranking_is_lexsorts_on_a_plan_sized_sweep():
    # 60,000 rows of 500 distinct times (NumPy's SIMD quicksort runs on arrays this long): the same order as lexsort
    rng = np.random.default_rng(32)
    t, fits = rng.integers(0, 500, 60_000) / 7.0, rng.random(60_000) < 0.3
    assert np.array_equal(planner._ranking(t, fits), np.lexsort((t, ~fits)))
