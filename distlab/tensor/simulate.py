"""The numerical demonstration: real matrices split over simulated GPUs, summed by the ring simulation, equal the unsplit result. Lesson 5 §1-§2."""

from __future__ import annotations

from typing import Any

import math
import numbers
from dataclasses import dataclass

import numpy as np

from .. import collectives
from .._arguments import divisors, short_list
from ..errors import ConfigurationError
from ..units import (
    positive_int,
)

__all__ = [
    "ACTIVATIONS",
    "MAX_MLP_ENTRIES",
    "random_mlp",
    "SplitMatmulResult",
    "simulate_split_matmul",
    "TPMLPResult",
    "simulate_tp_mlp",
]

# ----------------------------------------------------------------------------------------
# The numerical demonstration: real matrices on simulated GPUs


def _matrix(a, name: str) -> np.ndarray:
    array = np.asarray(a)
    if array.ndim != 2:
        raise ConfigurationError(f"{name} has shape {array.shape}; expected a 2-D matrix")
    if array.dtype == bool or not np.issubdtype(array.dtype, np.number):
        raise ConfigurationError(f"{name} has dtype {array.dtype}; expected numbers")
    if array.size == 0:
        raise ConfigurationError(f"{name} is empty (shape {array.shape})")
    if np.issubdtype(array.dtype, np.inexact) and not np.all(np.isfinite(array)):
        raise ConfigurationError(f"{name} contains NaN or infinity")
    return array.astype(np.result_type(array.dtype, np.float64), copy=False)


def _check_split(size: int, t: int, what: str) -> None:
    if size % t:
        raise ConfigurationError(f"tp={t} does not divide the {size} {what}; valid: {short_list(divisors(size), 16)}")


def _gelu(x):
    # GeLU, tanh approximation (Hendrycks & Gimpel 2016), as GPT-2/3 and Megatron-LM use
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


ACTIVATIONS = {"gelu": _gelu, "relu": lambda x: np.maximum(x, 0.0), "identity": lambda x: x}


def _activation(name):
    if not isinstance(name, str) or name.strip().lower() not in ACTIVATIONS:
        raise ConfigurationError(f"activation={name!r} is not known; valid: {', '.join(ACTIVATIONS)}")
    return ACTIVATIONS[name.strip().lower()]


#: Most numbers random_mlp draws: 2**24 float64, 128 MiB (a lesson's MLP holds a few hundred).
MAX_MLP_ENTRIES = 2**24


def random_mlp(tokens=4, hidden=8, ffn=32, seed=0):
    """(x, w_in, w_out) with standard-normal entries from a seeded generator: x (tokens, hidden),
    w_in (hidden, ffn), w_out (ffn, hidden), weights scaled by 1/sqrt(fan-in). Lesson 5 §2.

    >>> [a.shape for a in random_mlp(tokens=4, hidden=8, ffn=32, seed=0)]
    [(4, 8), (8, 32), (32, 8)]
    """
    n, h, f = positive_int(tokens, "tokens"), positive_int(hidden, "hidden"), positive_int(ffn, "ffn")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ConfigurationError(f"seed={seed!r} must be a whole number >= 0")
    entries = n * h + 2 * h * f
    if entries > MAX_MLP_ENTRIES:
        raise ConfigurationError(
            f"tokens={n:,}, hidden={h:,}, ffn={f:,} make {entries:,} random numbers, more than "
            f"the {MAX_MLP_ENTRIES:,} (128 MiB) a simulated MLP may hold; use smaller sizes"
        )
    rng = np.random.default_rng(int(seed))
    return (
        rng.standard_normal((n, h)),
        rng.standard_normal((h, f)) / math.sqrt(h),
        rng.standard_normal((f, h)) / math.sqrt(f),
    )


@dataclass(frozen=True)
class SplitMatmulResult:
    """Y = X W computed on tp simulated GPUs, then combined by a simulated collective."""

    split: str
    tp: int
    weight_shards: tuple
    partials: tuple
    combined: np.ndarray
    reference: np.ndarray
    trace: Any

    @property
    def max_abs_error(self) -> float:
        return float(np.max(np.abs(self.combined - self.reference)))

    @property
    def allclose(self) -> bool:
        return bool(np.allclose(self.combined, self.reference))


def simulate_split_matmul(x, w, tp, split="column") -> SplitMatmulResult:
    """One matmul Y = X W on tp simulated GPUs.

    split='column': GPU i keeps W[:, block i] and computes the column block X W_i; an all-gather
    (distlab.collectives.simulate_all_gather) concatenates the blocks. split='row': GPU i keeps
    W[block i, :] and X[:, block i] and computes a partial X_i W_i of the full shape; an all-reduce
    (simulate_ring_all_reduce) adds them. Either way every GPU ends with X W. Lesson 5 §1.

    >>> x, w, _ = random_mlp(seed=0)
    >>> r = simulate_split_matmul(x, w, 4, split='column')
    >>> r.weight_shards[0].shape, r.allclose  # 32 columns / 4 GPUs
    ((8, 8), True)
    """
    xm, wm = _matrix(x, "x"), _matrix(w, "w")
    if xm.shape[1] != wm.shape[0]:
        raise ConfigurationError(f"x is {xm.shape} and w is {wm.shape}: x's columns must equal w's rows")
    t = positive_int(tp, "tp")
    if split not in ("column", "row"):
        raise ConfigurationError(f"split={split!r} is not valid; valid: column, row")
    reference = xm @ wm
    if split == "column":
        _check_split(wm.shape[1], t, "columns of w")
        blocks = np.split(np.arange(wm.shape[1]), t)
        shards = tuple(wm[:, blk] for blk in blocks)
        partials = tuple(xm @ s for s in shards)
        # all-gather on the transposed blocks: their flattened rows concatenate to Y^T
        trace = collectives.simulate_all_gather([p.T.ravel() for p in partials])
        combined = trace.outputs[0].reshape(wm.shape[1], xm.shape[0]).T
    else:
        _check_split(wm.shape[0], t, "rows of w")
        blocks = np.split(np.arange(wm.shape[0]), t)
        shards = tuple(wm[blk, :] for blk in blocks)
        partials = tuple(xm[:, blk] @ wm[blk, :] for blk in blocks)
        trace = collectives.simulate_ring_all_reduce([p.ravel() for p in partials])
        combined = trace.outputs[0].reshape(reference.shape)
    return SplitMatmulResult(split, t, shards, partials, combined, reference, trace)


@dataclass(frozen=True)
class TPMLPResult:
    """A Megatron MLP, act(X A) B, computed on tp simulated GPUs and summed by a simulated ring all-reduce.

    outputs[i] is GPU i's result after the all-reduce; reference the unsplit MLP on one GPU.
    """

    tp: int
    activation: str
    w_in_shards: tuple
    w_out_shards: tuple
    hidden_shards: tuple
    partials: tuple
    outputs: tuple
    reference: np.ndarray
    trace: Any

    @property
    def max_abs_error(self) -> float:
        return float(max(np.max(np.abs(out - self.reference)) for out in self.outputs))

    @property
    def allclose(self) -> bool:
        """Every GPU's output equals the unsplit MLP (np.allclose, float64)."""
        return all(bool(np.allclose(out, self.reference)) for out in self.outputs)

    @property
    def bytes_sent_per_gpu(self) -> float:
        """Bytes each GPU sent in the ring all-reduce (2 (t-1)/t x the output buffer)."""
        return self.trace.bytes_sent_per_gpu

    def __str__(self) -> str:
        a, b = self.w_in_shards[0].shape, self.w_out_shards[0].shape
        return (
            f"tp={self.tp}: each GPU keeps A_i {a[0]} x {a[1]} and B_i {b[0]} x {b[1]}; one ring all-reduce "
            f"({self.trace.steps} steps) sums the partial outputs; largest difference from the unsplit MLP "
            f"{self.max_abs_error:.1e}; allclose: {self.allclose}"
        )


def simulate_tp_mlp(x, w_in, w_out, tp, activation="gelu") -> TPMLPResult:
    """Megatron's MLP split over tp simulated GPUs, with real numbers.

    GPU i keeps the column block A_i = w_in[:, block i] and the row block B_i = w_out[block i, :]
    (blocks of ffn/tp), computes Y_i = act(X A_i) with no communication (the nonlinearity acts
    element by element, so a column block of act(X A) is act of the column block), then the
    partial Z_i = Y_i B_i of the full output shape. A ring all-reduce
    (distlab.collectives.simulate_ring_all_reduce) sums the Z_i on every GPU; the result equals
    act(X A) B, since X A B = sum_i X A_i B_i. tp must divide ffn. Shoeybi et al. 2019, Sec. 3. Lesson 5 §2.

    The 4 x 8 float64 output (256 B) is summed in 2 (t - 1) = 6 ring steps, each GPU sending 2 (t-1)/t x 256 B:

    >>> r = simulate_tp_mlp(*random_mlp(seed=0), tp=4)
    >>> r.allclose, r.trace.steps, r.bytes_sent_per_gpu
    (True, 6, 384.0)
    """
    xm, a, b = _matrix(x, "x"), _matrix(w_in, "w_in"), _matrix(w_out, "w_out")
    if xm.shape[1] != a.shape[0]:
        raise ConfigurationError(f"x is {xm.shape} and w_in is {a.shape}: x's columns must equal w_in's rows")
    if a.shape[1] != b.shape[0]:
        raise ConfigurationError(f"w_in is {a.shape} and w_out is {b.shape}: w_in's columns must equal w_out's rows")
    t = positive_int(tp, "tp")
    _check_split(a.shape[1], t, "MLP columns (ffn)")
    act = _activation(activation)
    blocks = np.split(np.arange(a.shape[1]), t)
    a_shards = tuple(a[:, blk] for blk in blocks)
    b_shards = tuple(b[blk, :] for blk in blocks)
    hidden = tuple(act(xm @ ai) for ai in a_shards)
    partials = tuple(y @ bi for y, bi in zip(hidden, b_shards))
    trace = collectives.simulate_ring_all_reduce([z.ravel() for z in partials])
    outputs = tuple(out.reshape(xm.shape[0], b.shape[1]) for out in trace.outputs)
    reference = act(xm @ a) @ b
    return TPMLPResult(t, activation.strip().lower(), a_shards, b_shards, hidden, partials, outputs, reference, trace)
