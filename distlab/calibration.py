"""Calibration: the two fitted constants of distlab.efficiency refit on the calibration set only.

TRAINING_MATMUL_SHARE and MEMORY_TRAFFIC (distlab.efficiency, where they are stored with their sources) are the grid
point with the least mean |step-time error| of training.estimate() over the calibration runs of distlab.validation
(Narayanan et al. 2021 Table 1); tests/core/test_efficiency.py checks that the stored values are this fit's result.
It sits above the step model it fits, beside validation. Lesson 7 §8.
"""

from __future__ import annotations

import functools

import numpy as np

from . import validation
from .efficiency import MEMORY_TRAFFIC, TRAINING_MATMUL_SHARE  # noqa: F401 (fit_calibration's doctest reads them)
from .training import estimate

__all__ = ["SHARE_GRID", "TRAFFIC_GRID", "fit_calibration"]

#: The grids fit_calibration searches (TRAINING_MATMUL_SHARE, MEMORY_TRAFFIC).
SHARE_GRID = np.round(np.arange(0.60, 1.0001, 0.02), 2)
TRAFFIC_GRID = np.round(np.arange(0.0, 4.0001, 0.2), 2)


def fit_calibration() -> dict:
    """Refit TRAINING_MATMUL_SHARE and MEMORY_TRAFFIC on the calibration set only (Narayanan et al. 2021
    Table 1): the grid point with the least mean |step-time error|. Returns share, traffic, the mean and
    max |error| there, and the run ids used. Slow (hundreds of estimates); the stored constants are its
    result (tests check). Lesson 7 §8.

    >>> fit = fit_calibration()
    >>> (fit["share"], fit["traffic"]) == (TRAINING_MATMUL_SHARE, MEMORY_TRAFFIC)
    True
    """
    return dict(_grid_fit())


@functools.lru_cache(maxsize=1)
def _grid_fit() -> dict:
    """fit_calibration's grid search, computed once per process."""
    runs = [r for r in validation.load_runs("calibration") if r["distlab"]["expressible"]]
    prepared = []
    for r in runs:
        measured = validation.measured_step_time(r)
        prepared.append((validation.run_model(r), validation.run_cluster(r), r["distlab"]["estimate"], measured))
    best = None
    for share in SHARE_GRID:
        for traffic in TRAFFIC_GRID:
            errors = []
            for model, cluster, kwargs, measured in prepared:
                est = estimate(model, cluster, **kwargs, calibration=(float(share), float(traffic)))
                errors.append(abs(est.step_time_s / measured - 1.0))
            score = (float(np.mean(errors)), float(np.max(errors)))
            if best is None or score < best[0]:
                best = (score, float(share), float(traffic))
    assert best is not None  # the grids are not empty
    (mean, worst), share, traffic = best
    return dict(share=share, traffic=traffic, mean_abs_error=mean, max_abs_error=worst, runs=[r["id"] for r in runs])
