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
from .step.pricing import compute_arguments, compute_model_for
from .training import estimate, step_model_array

__all__ = ["SHARE_GRID", "TRAFFIC_GRID", "fit_calibration", "grid_step_times"]

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
    """fit_calibration's grid search, computed once per process: each run priced once by estimate(), then at every
    grid point in one vectorised step_model_array call (grid_step_times)."""
    runs = [r for r in validation.load_runs("calibration") if r["distlab"]["expressible"]]
    shares, traffics = (g.ravel() for g in np.meshgrid(SHARE_GRID, TRAFFIC_GRID, indexing="ij"))
    errors = []
    for r in runs:
        est = estimate(validation.run_model(r), validation.run_cluster(r), **r["distlab"]["estimate"])
        times = grid_step_times(est, validation.run_cluster(r), shares, traffics)
        errors.append(np.abs(times / validation.measured_step_time(r) - 1.0))
    table = np.vstack(errors)
    mean, worst = table.mean(axis=0), table.max(axis=0)
    best = min(range(mean.size), key=lambda i: (float(mean[i]), float(worst[i])))  # ties: the smaller max, then order
    return dict(
        share=float(shares[best]),
        traffic=float(traffics[best]),
        mean_abs_error=float(mean[best]),
        max_abs_error=float(worst[best]),
        runs=[r["id"] for r in runs],
    )


def grid_step_times(est, cluster, shares, traffics) -> np.ndarray:
    """Step times of one estimate()'s configuration with the fitted constants (TRAINING_MATMUL_SHARE,
    MEMORY_TRAFFIC) replaced by each (share, traffic) pair: the compute model of each pair
    (pricing.compute_model_for, the one home of how the constants enter it) as arrays, in one step_model_array
    call over the configuration's keywords (StepEstimate.step_inputs). Lesson 7 §8.

    >>> run = validation.load_runs("calibration")[0]
    >>> cl = validation.run_cluster(run)
    >>> est = estimate(validation.run_model(run), cl, **run["distlab"]["estimate"])
    >>> float(grid_step_times(est, cl, np.array([0.82]), np.array([1.4]))[0]) == est.step_time_s  # stored constants
    True
    """
    core_model, keywords = est.step_inputs
    c = est.config
    named = dict(attention_kernel=c.get("attention_kernel"), memory_recipe=c["memory_recipe"])
    if "fp8_scaling" in c:
        named["fp8_scaling"] = c["fp8_scaling"]
    columns = [
        compute_arguments(compute_model_for(cluster, None, c["attention"], (float(a), float(t)), c["kernels"], **named))
        for a, t in zip(shares, traffics)
    ]
    varying = {k: np.array([col[k] for col in columns]) for k in columns[0] if _varies(columns, k)}
    out = step_model_array(core_model, **{**keywords, **varying})
    return np.broadcast_to(np.asarray(out["step_time_s"], dtype=float), np.shape(shares))


def _varies(columns: list, key: str) -> bool:
    """Whether a compute-model keyword differs between grid points (numbers only; the rest must not)."""
    first = columns[0][key]
    return any(col[key] != first for col in columns) and isinstance(first, float)
