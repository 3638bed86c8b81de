"""Stragglers: synchronous steps wait for the slowest GPU; the expected maximum of N GPUs' times. Lesson 8b §2."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import training
from .._arguments import estimate_config, whole_number
from ..errors import ConfigurationError
from ..units import (
    format_seconds,
    non_negative,
    positive,
    positive_int,
)

__all__ = [
    "EULER_GAMMA",
    "MAX_NORMALS",
    "expected_max_normal",
    "leading_term_max_normal",
    "gumbel_expected_max",
    "expected_slowest",
    "MAX_SIMULATION_DRAWS",
    "simulate_slowest",
    "StragglerStep",
    "straggler_step",
]

# ----------------------------------------------------------------------------------------
# 5. Stragglers: synchronous steps wait for the slowest GPU


#: Euler-Mascheroni constant (the mean of the standard Gumbel distribution).
EULER_GAMMA = 0.5772156649015329

_GRID = np.linspace(-12.0, 12.0, 24001)
_erf = np.frompyfunc(math.erf, 1, 1)
_PHI = 0.5 * (1.0 + np.asarray(_erf(_GRID / math.sqrt(2.0)), dtype=float))
#: log Phi(x) on the grid, accurate in both tails: log(erfc(-x/sqrt 2)/2) below 0, log1p(-Q(x)) with
#: Q(x) = erfc(x/sqrt 2)/2 above (Phi itself rounds to 1 once Q < 1e-16, x > 8.2).
_LOG_PHI = np.array(
    [
        math.log(0.5 * math.erfc(-x / math.sqrt(2.0))) if x < 0 else math.log1p(-0.5 * math.erfc(x / math.sqrt(2.0)))
        for x in _GRID
    ]
)
#: Largest n expected_max_normal integrates: n Q(12) = n x 1.8e-33 must stay negligible on the grid.
MAX_NORMALS = 10**15


def expected_max_normal(n) -> float:
    """E[max of n independent standard normals], exactly up to quadrature error (< 1e-6).

    E[M] = a + int_a^inf (1 - Phi(x)^n) dx for any a with Phi(a)^n = 0, here a = -12 (trapezoid
    rule on [-12, 12], step 0.001), with 1 - Phi^n computed as -expm1(n log Phi(x)) and
    log Phi(x) = log1p(-Q(x)), Q = erfc(x / sqrt 2) / 2, in the upper tail, so the integrand keeps
    its accuracy where Phi rounds to 1 (what matters once n passes ~1e10). n = 1: 0; n = 2:
    1/sqrt(pi) = 0.5642; n = 1000: 3.2414 (Tippett 1925's tables). n up to MAX_NORMALS (1e15). Lesson 8b §2.

    >>> round(float(expected_max_normal(2)), 4), round(float(expected_max_normal(1000)), 4)
    (0.5642, 3.2414)
    """
    k = positive_int(n, "n")
    if k > MAX_NORMALS:
        raise ConfigurationError(
            f"n={n!r} is more than {MAX_NORMALS:,}: the integration grid ends at 12 standard deviations"
        )
    return _GRID[0] + _trapezoid(-np.expm1(k * _LOG_PHI), _GRID)


def _trapezoid(y, x) -> float:
    return float(np.sum((y[1:] + y[:-1]) * np.diff(x)) / 2.0)


def leading_term_max_normal(n):
    """sqrt(2 ln n): the leading term of E[max of n standard normals] (extreme-value theory), the
    well-known growth law; it overestimates the expected maximum (n = 1000: 3.72 vs the exact 3.24).
    NumPy broadcast over whole n >= 1 (anything else raises ConfigurationError). Lesson 8b §2.

    >>> round(leading_term_max_normal(1000), 2)  # sqrt(2 x 6.9078)
    3.72
    """
    bad = ConfigurationError(f"n={n!r} must be whole numbers >= 1 (GPUs)")
    if isinstance(n, (bool, str, bytes)):
        raise bad
    try:
        arr = np.asarray(n, dtype=float)
    except (TypeError, ValueError, OverflowError):
        raise bad from None
    if arr.size == 0 or not np.all(np.isfinite(arr)) or np.any(arr < 1) or np.any(arr != np.round(arr)):
        raise bad
    value = np.sqrt(2.0 * np.log(arr))
    return float(value) if np.ndim(value) == 0 else value


def gumbel_expected_max(n) -> float:
    """Extreme-value approximation of E[max of n standard normals] (n >= 2):
    b_n + gamma a_n with a_n = 1/sqrt(2 ln n), b_n = sqrt(2 ln n) - (ln ln n + ln 4 pi) / (2 sqrt(2 ln n)).
    Its leading term sqrt(2 ln n) is the well-known growth law; the correction matters (n = 1000:
    sqrt(2 ln n) = 3.72 vs the exact 3.24). Source: Cramer 1946, Sec. 28.6; Embrechts et al. 1997. Lesson 8b §2.

    n = 1000: 3.7169 - (1.9326 + 2.5310) / (2 x 3.7169) + 0.5772 / 3.7169 = 3.2718.

    >>> round(gumbel_expected_max(1000), 4)
    3.2718
    """
    k = positive_int(n, "n")
    if k < 2:
        raise ConfigurationError(f"n={n!r}: the extreme-value approximation needs n >= 2 GPUs")
    if k > MAX_NORMALS:
        raise ConfigurationError(f"n={n!r} is more than {MAX_NORMALS:,}")
    r = math.sqrt(2.0 * math.log(k))
    return r - (math.log(math.log(k)) + math.log(4.0 * math.pi)) / (2.0 * r) + EULER_GAMMA / r


def _check_sigma(sigma) -> float:
    value = non_negative(sigma, "", "sigma")
    if value > 0.25:
        raise ConfigurationError(
            f"sigma={value:g} must be at most 0.25 (a 25% standard deviation of a GPU's "
            f"step time); the normal model of jitter needs step times to stay positive"
        )
    return value


def _check_slow(slow_factor) -> float:
    value = positive(slow_factor, "", "slow_factor")
    if value < 1:
        raise ConfigurationError(f"slow_factor={value:g} must be >= 1 (1 = healthy, 1.5 = one GPU 50% slower)")
    if value > 100:
        raise ConfigurationError(f"slow_factor={value:g} must be at most 100")
    return value


def expected_slowest(gpus, sigma=0.0, slow_factor=1.0) -> float:
    """E[max over GPUs of time / healthy mean]: one GPU slowed by k, every GPU jittered by sigma.

    GPU i takes (1 + sigma Z_i) of the healthy time (Z_i independent standard normals), GPU 0 k
    times that. P(max <= x) = Phi((x/k - 1)/sigma) Phi((x - 1)/sigma)^(N-1); E = integral of
    (1 - F) over x > 0 (the mass below 0 is negligible for sigma <= 0.25). sigma = 0: k;
    k = 1: 1 + sigma E[max of N normals]. Lesson 8b §2.

    >>> round(float(expected_slowest(1000, sigma=0.1)), 4), expected_slowest(8, slow_factor=1.5)  # 1 + 0.1 x 3.2414
    (1.3241, 1.5)
    """
    n = positive_int(gpus, "gpus")
    if n > MAX_NORMALS:
        raise ConfigurationError(f"gpus={gpus!r} is more than {MAX_NORMALS:,}")
    sig = _check_sigma(sigma)
    k = _check_slow(slow_factor)
    if k == 1:
        return 1.0 + sig * expected_max_normal(n)
    if sig * k < 1e-9:  # narrower than the grid resolves: max = k to within 1e-8
        return k
    # E = x0 + integral from x0 of (1 - F), x0 = 1 - 12 sigma (F = 0 below); a grid fine near 1 and near k
    x = np.unique(
        np.concatenate(
            [1.0 + sig * _GRID, k * (1.0 + sig * _GRID), np.linspace(1.0 - 12 * sig, k * (1.0 + 12 * sig), 4001)]
        )
    )
    x = x[x >= 1.0 - 12 * sig]
    cdf_slow = np.interp((x / k - 1.0) / sig, _GRID, _PHI)
    cdf_rest = np.interp((x - 1.0) / sig, _GRID, _PHI) ** (n - 1)
    return float(x[0]) + _trapezoid(1.0 - cdf_slow * cdf_rest, x)


#: Most GPU-steps (gpus x steps) one simulation draws.
MAX_SIMULATION_DRAWS = 50_000_000


def simulate_slowest(gpus, sigma, *, slow_factor=1.0, steps=1000, seed=0) -> np.ndarray:
    """Simulated per-step max over GPUs of time / healthy mean (seeded NumPy generator, chunked).

    Each step draws 1 + sigma Z for every GPU (GPU 0 times slow_factor) and keeps the maximum;
    returns one value per step. Compare its mean with expected_slowest. Lesson 8b §2.

    8 GPUs, 5% jitter: expected 1 + 0.05 x 1.4236 = 1.0712 (standard error of 2,000 steps about 0.0007).

    >>> round(float(simulate_slowest(8, 0.05, steps=2000, seed=0).mean()), 2)
    1.07
    """
    n = positive_int(gpus, "gpus")
    sig = _check_sigma(sigma)
    k = _check_slow(slow_factor)
    steps = positive_int(steps, "steps")
    if n * steps > MAX_SIMULATION_DRAWS:
        raise ConfigurationError(
            f"gpus x steps = {n:,} x {steps:,} draws is over {MAX_SIMULATION_DRAWS:,}; simulate fewer steps"
        )
    rng = np.random.default_rng(whole_number(seed, "seed", 0, 2**63 - 1))
    out = np.empty(steps)
    chunk = max(1, 4_000_000 // n)
    for start in range(0, steps, chunk):
        stop = min(steps, start + chunk)
        times = 1.0 + sig * rng.standard_normal((stop - start, n))
        times[:, 0] *= k
        out[start:stop] = times.max(axis=1)
    return out


@dataclass(frozen=True)
class StragglerStep:
    """A step whose synchronous GPUs wait for the slowest: healthy estimate plus the wait (seconds)."""

    healthy: training.StepEstimate
    gpus: int
    sigma: float
    slow_factor: float
    slowest: float  # E[max time / healthy] over the GPUs
    scaled_s: float  # the compute-bound part that stretches: the compute of the m microbatches

    @property
    def wait_s(self) -> float:
        """Time every GPU spends waiting for the slowest one: (slowest - 1) x compute (the bubble does not stretch)."""
        return (self.slowest - 1.0) * self.scaled_s

    @property
    def step_time_s(self) -> float:
        return self.healthy.step_time_s + self.wait_s

    @property
    def slowdown(self) -> float:
        return self.step_time_s / self.healthy.step_time_s

    @property
    def mfu(self) -> float:
        """Model FLOPs utilisation of the step with the wait: the healthy step's MFU x healthy / actual time."""
        return self.healthy.model_flops / (self.step_time_s * self.healthy.gpus * self.healthy.peak_flops)

    def parts(self) -> dict:
        return {**self.healthy.parts(), "waiting for the slowest GPU": self.wait_s}

    def __str__(self) -> str:
        what = (
            ", ".join(
                ([f"one GPU {self.slow_factor:g}x slow"] if self.slow_factor > 1 else [])
                + ([f"jitter {100 * self.sigma:g}%"] if self.sigma > 0 else [])
            )
            or "healthy"
        )
        return (
            f"{self.gpus} GPUs, {what}: the slowest GPU takes "
            f"{self.slowest:.4f} x the healthy compute;\n    step {format_seconds(self.healthy.step_time_s)} -> "
            f"{format_seconds(self.step_time_s)} (+{100 * (self.slowdown - 1):.1f}%)"
        )


def straggler_step(model, cluster, *, slow_factor=1.0, sigma=0.0, **config) -> StragglerStep:
    """estimate() of a healthy step, then the wait for the slowest of its GPUs.

    Synchronous training waits at every collective, so every step runs at its slowest GPU's
    pace: a slow GPU stretches its TP group's compute and so its pipeline stage, and the DP
    all-reduce waits for that replica. With GPipe or 1F1B and m microbatches of stage time t the
    step is (m - 1) x the slowest stage time + the sum of the p stage times (the critical path
    runs the slowest stage's m microbatches plus one microbatch on each other stage), so one
    stage slowed by k adds (k - 1) x m x t = (k - 1) x compute: the pipeline bubble does not
    stretch (the other stages' fill and drain stay as fast). That is exact for GPipe wherever the
    slow stage sits, and for 1F1B when it is the last stage (distlab.pipeline's simulator; a slow
    earlier 1F1B stage costs a little less, its first microbatches hiding in the warm-up): the
    worst placement. Here the compute stretches by E[max over the N GPUs] (expected_slowest);
    communication, the overlap slowdown (a share of the communication's time), the bubble and the optimizer step do
    not. sigma: each GPU's relative standard
    deviation per step (independent jitter of m microbatches averages to sigma_mb / sqrt(m)). Lesson 8b §2.

    One GPU 1.5x slow, no jitter: the wait is 0.5 x the 0.382 s of compute at a fixed 50% of peak
    (training.estimate's example).

    >>> st = straggler_step('llama2-7b', 'dgx-h100', nodes=1, fabric='ib-ndr', slow_factor=1.5, global_batch=8,
    ...                     seq_len=4096, efficiency=0.5)
    >>> st.slowest, round(st.wait_s, 3)
    (1.5, 0.191)
    """
    estimate_config(config)
    est = training.estimate(model, cluster, **config)
    sig = _check_sigma(sigma)
    k = _check_slow(slow_factor)
    slowest = expected_slowest(est.gpus, sig, k)
    return StragglerStep(est, est.gpus, sig, k, slowest, est.compute_s)
