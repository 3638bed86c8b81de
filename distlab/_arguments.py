"""Argument checks and small helpers shared by the formula modules (one copy of each).

Internal: the formula modules import these names; lessons and users call the formula modules. Each check
raises ConfigurationError naming the parameter and its valid values, the contract of distlab.errors.
"""

from __future__ import annotations

import functools
import math
import numbers
import warnings
from typing import Sequence

import numpy as np

from .errors import ConfigurationError
from .units import positive, positive_int

#: ZeRO stages (Rajbhandari et al. 2020): 0 is plain data parallelism.
ZERO_STAGES = (0, 1, 2, 3)
#: Activation recomputation modes (Korthikanti et al. 2022, Sec. 5).
RECOMPUTE_MODES = ("none", "selective", "full")


def divisors(n: int) -> list[int]:
    """Every divisor of n, ascending.

    >>> divisors(12)
    [1, 2, 3, 4, 6, 12]
    """
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def short_list(values: Sequence[int], limit: int = 8) -> str:
    """The first `limit` values, comma-separated, with ', ...' when there are more (for error messages).

    >>> short_list(range(1, 11))
    '1, 2, 3, 4, 5, 6, 7, 8, ...'
    """
    values = list(values)
    shown = ", ".join(str(v) for v in values[:limit])
    return shown + (", ..." if len(values) > limit else "")


def readonly(array: np.ndarray) -> np.ndarray:
    """The same array, marked read-only (records handed to plots and tests cannot be changed in place)."""
    array.flags.writeable = False
    return array


def whole_number(value, name: str, low: int, high: int) -> int:
    """A whole number in [low, high]: 8.0 is accepted; 2.5, True and NaN are not.

    >>> whole_number(8.0, "buckets", 1, 10)
    8
    """
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if ok and not isinstance(value, numbers.Integral):
        ok = math.isfinite(value) and value == int(value)
    if not (ok and low <= value <= high):
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        raise ConfigurationError(f"{name}={shown} must be a whole number from {low} to {high:,}")
    return int(value)


def real_number(value, name: str, low: float, high: float, low_open: bool = False) -> float:
    """A finite real number in [low, high] ((low, high] with low_open): True, NaN and strings are not.

    >>> real_number(1.25, "capacity_factor", 0.0, 4.0, low_open=True)
    1.25
    """
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    if not (ok and (value > low if low_open else value >= low) and value <= high):
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        raise ConfigurationError(f"{name}={shown} must be a number {'>' if low_open else '>='} {low:g} and <= {high:g}")
    return float(value)


def zero_stage(zero) -> int:
    """A ZeRO stage, 0 to 3 (True is refused: it is not a stage)."""
    if isinstance(zero, bool) or not isinstance(zero, numbers.Real) or zero not in ZERO_STAGES:
        raise ConfigurationError(f"zero={zero!r} is not a ZeRO stage; valid: 0, 1, 2, 3")
    return int(float(zero))


def check_fraction(value, name: str) -> float:
    """A fraction in (0, 1], such as an achievable share of peak; ConfigurationError otherwise. Lesson 7 §6.

    >>> check_fraction(0.5, 'efficiency')
    0.5
    """
    number = positive(value, "", name)
    if number > 1:
        raise ConfigurationError(f"{name}={number:g} must be a fraction in (0, 1] (e.g. 0.5 for 50% of peak)")
    return number


def recompute_mode(mode) -> str:
    """An activation recomputation mode: 'none' (also None), 'selective' or 'full'.

    >>> recompute_mode(" Selective ")
    'selective'
    """
    if mode is None:
        return "none"
    if not isinstance(mode, str) or mode.strip().lower() not in RECOMPUTE_MODES:
        raise ConfigurationError(f"recompute={mode!r} is not a recomputation mode; valid: none, selective, full")
    return mode.strip().lower()


def link_parameters(link, bandwidth, latency, prefix: str = "") -> tuple[float, float]:
    """(bandwidth B/s per direction, latency s) from a link object or name, or explicit values.

    Explicit `bandwidth=`/`latency=` override the link's; with no link, latency defaults to 0.
    """
    from .units import BYTES_PER_SECOND, SECONDS, non_negative

    link_name = f"{prefix}link"
    if link is None and bandwidth is None:
        raise ConfigurationError(
            f"no {link_name} given: pass {link_name}= (a name such as 'nvlink4' or a Link) "
            f"or {prefix}bandwidth= (e.g. '450 GB/s', per direction) and {prefix}latency= (e.g. '5 us')"
        )
    if isinstance(link, str):
        from . import hardware

        link = hardware.link(link)
    if link is not None and not (hasattr(link, "bandwidth") and hasattr(link, "latency")):
        raise ConfigurationError(
            f"{link_name}={link!r} is neither a link name nor an object with .bandwidth (B/s) and .latency (s)"
        )
    bw = bandwidth if bandwidth is not None else link.bandwidth
    lat = latency if latency is not None else (link.latency if link is not None else 0.0)
    return (
        positive(bw, BYTES_PER_SECOND, f"{prefix}bandwidth"),
        non_negative(lat, SECONDS, f"{prefix}latency"),
    )


def as_cluster(cluster, nodes=None, fabric=None, oversubscription=None, rail_optimized=None):
    """A hardware.Cluster: passed through, rebuilt with the given overrides, or built from a node name."""
    from . import hardware

    if isinstance(cluster, hardware.Cluster):
        if nodes is None and fabric is None and oversubscription is None and rail_optimized is None:
            return cluster
        return hardware.cluster(
            cluster.node,
            cluster.nodes if nodes is None else nodes,
            cluster.fabric if fabric is None else fabric,
            cluster.oversubscription if oversubscription is None else oversubscription,
            cluster.rail_optimized if rail_optimized is None else rail_optimized,
        )
    return hardware.cluster(
        cluster,
        positive_int(1 if nodes is None else nodes, "nodes"),
        fabric,
        1.0 if oversubscription is None else oversubscription,
        bool(rail_optimized),
    )


def renamed_attribute(module: str, name: str, renamed: dict, namespace: dict):
    """A module-level __getattr__ for renamed public names: the old name still works and warns.

    >>> renamed_attribute("distlab.memory", "OLD", {"OLD": "NEW"}, {"NEW": 1})  # doctest: +SKIP
    1
    """
    import warnings

    if name in renamed:
        new = renamed[name]
        warnings.warn(
            f"{module}.{name} is now {module}.{new}; the old name will be removed", DeprecationWarning, stacklevel=3
        )
        return namespace[new]
    raise AttributeError(f"module {module!r} has no attribute {name!r}")


def renamed_keyword(**renames):
    """Decorator: accept a renamed keyword argument by its old name too, with a DeprecationWarning.

    `@renamed_keyword(n="gpus")` lets `f(n=8)` still run as `f(gpus=8)`; giving both is an error.

    >>> @renamed_keyword(n="gpus")
    ... def f(gpus):
    ...     return gpus
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     f(n=8), caught[0].category.__name__
    (8, 'DeprecationWarning')
    """

    def decorate(func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            for old, new in renames.items() if kwargs else ():
                if old in kwargs:
                    if new in kwargs:
                        raise ConfigurationError(f"{func.__name__}: give {new}= only ({old}= is its old name)")
                    warnings.warn(
                        f"{func.__name__}({old}=...) is deprecated; use {new}=", DeprecationWarning, stacklevel=2
                    )
                    kwargs[new] = kwargs.pop(old)
            return func(*args, **kwargs)

        return wrapper

    return decorate


def deprecated_alias(func, old_name: str, new_name: str):
    """func under its old public name: the same call, with a DeprecationWarning naming the new one."""

    @functools.wraps(func)
    def call(*args, **kwargs):
        warnings.warn(f"{old_name} is deprecated; use {new_name}", DeprecationWarning, stacklevel=2)
        return func(*args, **kwargs)

    call.__name__ = call.__qualname__ = old_name.rsplit(".", 1)[-1]
    call.__doc__ = f"Deprecated name of {new_name} (same call, warns)."
    return call


def renamed_module(old: str, new: str) -> None:
    """Make module `old` the module `new` (the same object), with a DeprecationWarning: a thin alias file
    calls this, so code that imports the old name keeps working while it moves."""
    import importlib
    import sys
    import warnings

    warnings.warn(f"{old} is deprecated; import {new}", DeprecationWarning, stacklevel=3)
    sys.modules[old] = importlib.import_module(new)


def warn_renamed(old: str, new: str) -> None:
    """Warn that `old` (an attribute, a keyword) is now called `new`: for a thin alias property."""
    import warnings

    warnings.warn(f"{old} is deprecated; use {new}", DeprecationWarning, stacklevel=3)


def number_array(value, name: str, low: float = 0.0) -> np.ndarray:
    """`value` (a number or an array of numbers, for the NumPy-broadcast fast paths) as a float array whose
    entries are finite and >= low; anything else (a string, None, a dict, 10**400) is our error.

    >>> number_array([1, 2], "tp").tolist()
    [1.0, 2.0]
    """
    array = None if isinstance(value, (str, bytes)) or value is None else np.asarray(value)
    if array is None or array.dtype.kind not in "biuf":
        raise ConfigurationError(f"{name}={_shown(value)} must be a number or an array of numbers")
    array = array.astype(float, copy=False)
    # one comparison per entry, in Python for a single number (the estimate runs ~100 of these checks: NumPy's
    # np.all/np.any cost ~10 us each on a 0-d array); NaN fails both comparisons, inf the second
    if array.ndim == 0:
        x = float(array)
        valid = low <= x < math.inf
    else:
        valid = array.size == 0 or bool(np.logical_and(array >= low, array < math.inf).all())
    if not valid:
        raise ConfigurationError(f"{name}={_shown(value)} must hold finite numbers >= {low:g}")
    return array


def code_array(value, name: str, codes: Sequence[str]) -> np.ndarray:
    """`value` as an integer array of indexes into `codes` (e.g. RECOMPUTE_MODES), each one valid.

    >>> code_array([0, 2], "recompute_code", RECOMPUTE_MODES).tolist()
    [0, 2]
    """
    array = None if isinstance(value, (str, bytes)) or value is None else np.asarray(value)
    if array is None or array.dtype.kind not in "biuf":
        valid = False
    elif array.ndim == 0:  # a single code: a Python comparison, not np.isin (~30 us)
        valid = float(array) in range(len(codes))
    else:  # a whole number in [0, len(codes)): what np.isin(array, range(len(codes))) tests, in two reductions
        valid = array.size == 0 or bool(
            array.min() >= 0
            and array.max() < len(codes)
            and (array.dtype.kind != "f" or np.array_equal(array, np.floor(array)))
        )
    if array is None or not valid:
        shown = ", ".join(f"{i} ({c})" for i, c in enumerate(codes))
        raise ConfigurationError(f"{name}={_shown(value)} must hold codes {shown}")
    return array.astype(int)


def finite_result(what: str, result):
    """`result`, after checking that no entry overflowed to infinity or NaN (inputs near 1e308)."""
    from .units import require_finite

    if isinstance(result, float) and math.isfinite(result):  # the common single number, without NumPy
        return result
    require_finite(what, result)
    return result


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


#: The keywords of training.estimate() besides model and cluster, in its order (estimate_config checks against them;
#: tests/core/test_training.py ties them to estimate's signature).
ESTIMATE_KEYWORDS = (
    "global_batch",
    "seq_len",
    "dp",
    "tp",
    "pp",
    "chunks",
    "micro_batch_size",
    "zero",
    "recompute",
    "sequence_parallel",
    "schedule",
    "precision",
    "efficiency",
    "attention",
    "fabric",
    "nodes",
    "calibration",
    "tp_overlap",
    "memory_recipe",
    "cp",
    "balance_stages",
    "ep",
    "etp",
    "kernels",
    "moe_imbalance",
    "capacity_factor",
    "max_nodes_per_token",
    "attention_kernel",
    "fp8_scaling",
    "expert_gemm",
    "zero3_collectives",
    "recompute_layers",
    "overlap_param_gather",
    "activation_offload_layers",
    "fp8_attention",
)


def estimate_config(config: dict) -> dict:
    """Keyword arguments for training.estimate() passed through **config: refuse an unknown keyword or a
    missing global_batch with our error (Python's own is a TypeError naming no valid keyword)."""
    unknown = [name for name in config if name not in ESTIMATE_KEYWORDS]
    if unknown:
        raise ConfigurationError(
            f"{unknown[0]}= is not a keyword of training.estimate(); valid: {', '.join(ESTIMATE_KEYWORDS)}"
        )
    if "global_batch" not in config:
        raise ConfigurationError("global_batch= is required: the sequences per step, e.g. global_batch=512")
    return config


def broadcastable(**arrays) -> None:
    """Refuse arrays that NumPy cannot broadcast together (shapes (2,) and (3,)), naming them and their shapes."""
    shapes = {name: np.shape(value) for name, value in arrays.items()}
    try:
        np.broadcast_shapes(*shapes.values())
    except ValueError:
        shown = ", ".join(f"{name} {shape}" for name, shape in shapes.items())
        raise ConfigurationError(f"{', '.join(shapes)} must be numbers or arrays of one shape; got {shown}") from None


def flag(value, name: str) -> bool:
    """A yes/no switch: True, False (NumPy's too) or 1/0; anything else (an array, a string) is our error.

    >>> flag(1, "sequence_parallel")
    True
    """
    if isinstance(value, (bool, np.bool_)) or (isinstance(value, numbers.Integral) and value in (0, 1)):
        return bool(value)
    raise ConfigurationError(f"{name}={_shown(value)} must be True or False")


def broadcasting(func):
    """Decorator for the NumPy-broadcast fast paths: arrays of shapes that do not broadcast together
    ((2,) and (3,)) raise our error naming the function, not NumPy's ValueError."""

    @functools.wraps(func)
    def call(*args, **kwargs):
        try:
            # an overflow (inputs near 1e308, a bandwidth near 0) becomes inf or NaN, which the function refuses with
            # our error (finite_result); NumPy's RuntimeWarning would reach the student first
            with np.errstate(over="ignore", divide="ignore", invalid="ignore", under="ignore"):
                return func(*args, **kwargs)
        except ValueError as exc:
            if isinstance(exc, ConfigurationError) or "broadcast" not in str(exc):
                raise
            raise ConfigurationError(
                f"{func.__name__}: its arrays must have shapes that broadcast together "
                f"(numbers, or arrays of one shape): {exc}"
            ) from None

    return call
