"""calibration.grid_step_times prices a configuration at every (share, traffic) grid point in one vectorised call; the
scalar path, estimate(..., calibration=(share, traffic)) one point at a time, is the independent implementation it
must equal (it is what fit_calibration ran before, 441 estimates per run)."""

from __future__ import annotations

import numpy as np
import pytest

from distlab import calibration, validation
from distlab.errors import ConfigurationError
from distlab.training import estimate, step_model_array


def _runs():
    return [r for r in validation.load_runs("calibration") if r["distlab"]["expressible"]]


@pytest.mark.parametrize("index", [0, 4, 9])
def test_the_grid_equals_one_estimate_per_point(index):
    run = _runs()[index]
    model, cluster, kwargs = validation.run_model(run), validation.run_cluster(run), run["distlab"]["estimate"]
    est = estimate(model, cluster, **kwargs)
    shares = np.array([0.60, 0.82, 1.00, 0.74])
    traffics = np.array([0.0, 1.4, 4.0, 2.2])
    grid = calibration.grid_step_times(est, cluster, shares, traffics)
    one_by_one = [
        estimate(model, cluster, **kwargs, calibration=(float(a), float(t))).step_time_s
        for a, t in zip(shares, traffics)
    ]
    assert grid == pytest.approx(one_by_one, rel=1e-12)


def test_an_estimate_carries_the_keywords_it_was_priced_with():
    run = _runs()[0]
    est = estimate(validation.run_model(run), validation.run_cluster(run), **run["distlab"]["estimate"])
    core, keywords = est.step_inputs
    assert float(step_model_array(core, **keywords)["step_time_s"]) == est.step_time_s


def test_an_array_of_efficiencies_outside_0_1_is_our_error():
    run = _runs()[0]
    est = estimate(validation.run_model(run), validation.run_cluster(run), **run["distlab"]["estimate"])
    core, keywords = est.step_inputs
    with pytest.raises(ConfigurationError, match="efficiency"):
        step_model_array(core, **{**keywords, "efficiency": np.array([0.5, 1.5])})
